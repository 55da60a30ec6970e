// libFuzzer target: arbitrary bytes -> ParseNpy, the .npy reader used for CLI inputs.
#include <cstddef>
#include <cstdint>

#include "core/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = strata::ParseNpy(data, size, "fuzz input");
  // A parsed tensor must be self-consistent; re-serialising touches every byte.
  if (t.ok()) (void)strata::SerializeNpy(*t);
  return 0;
}
