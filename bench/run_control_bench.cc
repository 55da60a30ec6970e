// The cost of the executor's per-node run-control check (core/run_control.h): no run
// (pool threads), a run without a deadline (every session run checks the terminate
// count), and a run with a deadline (plus a steady_clock read).
#include <benchmark/benchmark.h>

#include <optional>

#include "core/run_control.h"

namespace strata {
namespace {

void BM_CheckRunControl(benchmark::State& state) {
  RunTerminator terminator;
  const int mode = static_cast<int>(state.range(0));  // 0: no scope, 1: no deadline, 2: deadline
  std::optional<RunControlScope> scope;
  if (mode > 0) scope.emplace(&terminator, mode == 2 ? 3600 * 1000 : 0);
  for (auto _ : state) {
    Status st = CheckRunControl();
    benchmark::DoNotOptimize(st);
  }
}
BENCHMARK(BM_CheckRunControl)->Arg(0)->Arg(1)->Arg(2);

}  // namespace
}  // namespace strata
