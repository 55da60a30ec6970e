// C API for io bindings (strata_io_binding_*, strata_session_run_binding): repeated runs
// with caller-owned buffers. The success path of a run allocates nothing here.
#include <memory>
#include <string>

#include "capi/capi_internal.h"
#include "core/io_binding.h"

using strata::capi::Guard;
using strata::capi::MakeError;
using strata::capi::ToC;

struct strata_io_binding {
  strata_session* session = nullptr;
  std::unique_ptr<strata::IoBinding> binding;
};

extern "C" {

strata_status* strata_io_binding_create(strata_session* session, strata_io_binding** out) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(out, "out is NULL");
    *out = nullptr;
    STRATA_CHECK_ARG(session && session->session, "session is NULL");
    auto b = std::make_unique<strata_io_binding>();
    b->session = session;
    b->binding = std::make_unique<strata::IoBinding>(*session->session);
    *out = b.release();
    return nullptr;
  });
}

void strata_io_binding_destroy(strata_io_binding* binding) { delete binding; }

strata_status* strata_io_binding_bind_input(strata_io_binding* binding, const char* name, const strata_tensor* tensor) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(binding, "binding is NULL");
    STRATA_CHECK_ARG(name, "input name is NULL");
    STRATA_CHECK_ARG(tensor, std::string("tensor for input '") + name + "' is NULL");
    STRATA_CHECK_ARG(tensor->value.empty(),
                     std::string("input '") + name + "': io bindings take tensors, not a " + tensor->value.Describe());
    return ToC(binding->binding->BindInput(name, tensor->tensor));
  });
}

strata_status* strata_io_binding_bind_output(strata_io_binding* binding, const char* name, strata_tensor* tensor) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(binding, "binding is NULL");
    STRATA_CHECK_ARG(name, "output name is NULL");
    STRATA_CHECK_ARG(tensor, std::string("tensor for output '") + name + "' is NULL");
    STRATA_CHECK_ARG(tensor->value.empty(),
                     std::string("output '") + name + "': io bindings take tensors, not a " + tensor->value.Describe());
    return ToC(binding->binding->BindOutput(name, tensor->tensor));
  });
}

void strata_io_binding_clear(strata_io_binding* binding) {
  if (binding) binding->binding->Clear();
}

strata_status* strata_session_run_binding(strata_session* session, strata_io_binding* binding) {
  return strata_session_run_binding_with_options(session, binding, nullptr);
}

strata_status* strata_session_run_binding_with_options(strata_session* session, strata_io_binding* binding,
                                                       const strata_run_options* run_options) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(session, "session is NULL");
    STRATA_CHECK_ARG(binding, "binding is NULL");
    STRATA_CHECK_ARG(binding->session == session, "the io binding was created for a different session");
    strata::Status st = binding->binding->Run(run_options ? &run_options->opts : nullptr);
    if (st.ok()) return nullptr;
    return ToC(st);
  });
}

int strata_io_binding_outputs_in_place(const strata_io_binding* binding) {
  return binding && binding->binding->run_count() > 0 && binding->binding->last_run_wrote_in_place() ? 1 : 0;
}

}  // extern "C"
