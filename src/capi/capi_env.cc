#include "capi/capi_internal.h"
#include "capi/env.h"

using strata::capi::Guard;

extern "C" {

strata_status* strata_env_create(strata_env** out) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(out, "out is NULL");
    *out = new strata_env();
    return nullptr;
  });
}

void strata_env_destroy(strata_env* env) { delete env; }

}  // extern "C"
