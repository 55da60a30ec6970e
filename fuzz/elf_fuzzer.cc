// libFuzzer target: arbitrary bytes -> audit::ParseElf, the per-file reader behind
// `strata audit` (libelf over an in-memory image).
#include <cstddef>
#include <cstdint>

#include "audit/elf_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto info = strata::audit::ParseElf(reinterpret_cast<const char*>(data), size);
  (void)info;
  return 0;
}
