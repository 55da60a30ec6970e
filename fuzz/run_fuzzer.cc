// libFuzzer target: arbitrary bytes -> a session (as strata_fuzz_model) -> one Run on made-up
// inputs. The model target stops at session creation, so it never reaches a kernel's
// Compute: a model whose attributes, constants or shapes a kernel mishandles only at run
// time (an index past a table, a broadcast the shapes do not allow, NaN where an integer
// is made) passes it. Here every session that loads runs once, one thread, on inputs of the
// declared types whose values mix small integers with the awkward ones (0, -1, NaN,
// infinities, denormals, the integer extremes), so index, shape and count inputs get both
// sane and hostile values. Either outcome of Run is fine; a crash, leak or sanitizer report
// is the bug.
//
// Work is bounded so that the fuzzer spends its time on code paths, not on big tensors: a
// session runs only when its inputs have at most 2^14 elements each and 2^16 in all (dims the
// model leaves open are 1 to 3, picked from the input's hash; fuzz/run_inputs.h), and the
// memory cap keeps any single tensor under 4 MiB.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/session.h"
#include "run_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto session = strata::Session::CreateFromBytes(data, size, strata::fuzz::RunOptions());
  if (!session.ok()) return 0;
  std::vector<std::pair<std::string, strata::Value>> feeds;
  if (!strata::fuzz::MakeRunFeeds(**session, data, size, &feeds)) return 0;
  auto out = (*session)->Run(feeds);  // either outcome is fine
  (void)out;
  return 0;
}
