// libFuzzer target: arbitrary bytes -> ONNX import (parse, check, shape inference,
// convert) -> Session creation (optimize at level 99, partition, create kernels, plan).
// One thread and a memory cap so that a hostile model cannot make the fuzzer itself OOM.
#include <cstddef>
#include <cstdint>

#include "core/session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  strata::SessionOptions opts;
  opts.threads = 1;
  opts.optimization_level = 99;
  opts.memory_cap_bytes = size_t{64} << 20;
  // Either outcome is fine; a crash, leak or sanitizer report is the bug.
  auto session = strata::Session::CreateFromBytes(data, size, opts);
  (void)session;
  return 0;
}
