// Address-dependence probe for the per-process speed modes (modes.py counts them across
// processes): creates S sessions of one model in ONE process, all alive at once (so their
// packed weights, arenas and scratch sit at different addresses), then times them
// round-robin, B runs per session per round, and prints each session's median and min.
// If the speed mode follows the buffers' addresses, sessions in one process differ as much
// as processes do; if it is a property of the process or the time, they all agree.
//
//   g++ -O2 -std=c++17 -Iinclude bench/compare-ort/modes_sessions.cc -Lbuild/release/lib -lstrata
//       -Wl,-rpath,$PWD/build/release/lib -o build/modes_sessions
//   build/modes_sessions MODEL INPUT_NAME SHAPE [SESSIONS=6] [THREADS=1] [ROUNDS=20] [RUNS=100]
//
// The model's single float input is fed a tensor of SHAPE (e.g. 1x2048 or 1x3x224x224) of
// fixed pseudo-random values. MODES_CPU=1 adds the calling thread's CPU time per run, which
// preemption by other processes does not inflate (at 1 thread the whole run is on it).
#include <strata/strata.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

namespace {

bool Check(strata_status* st, const char* what) {
  if (!st) return true;
  std::fprintf(stderr, "%s: %s\n", what, strata_status_get_message(st));
  strata_status_release(st);
  return false;
}

double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL INPUT_NAME SHAPE [SESSIONS] [THREADS] [ROUNDS] [RUNS]\n", argv[0]);
    return 2;
  }
  const char* model = argv[1];
  const char* input = argv[2];
  std::vector<int64_t> dims;
  long k = 1;
  for (const char* c = argv[3]; *c;) {
    char* end = nullptr;
    const long d = std::strtol(c, &end, 10);
    if (end == c || d <= 0) {
      std::fprintf(stderr, "bad SHAPE '%s': want positive dims like 1x2048\n", argv[3]);
      return 2;
    }
    dims.push_back(d);
    k *= d;
    c = *end == 'x' ? end + 1 : end;
    if (*end && *end != 'x') {
      std::fprintf(stderr, "bad SHAPE '%s': want positive dims like 1x2048\n", argv[3]);
      return 2;
    }
  }
  const int sessions = argc > 4 ? std::atoi(argv[4]) : 6;
  const int threads = argc > 5 ? std::atoi(argv[5]) : 1;
  const int rounds = argc > 6 ? std::atoi(argv[6]) : 20;
  const int runs = argc > 7 ? std::atoi(argv[7]) : 100;
  if (sessions <= 0 || threads <= 0 || rounds <= 0 || runs <= 0) {
    std::fprintf(stderr, "SESSIONS, THREADS, ROUNDS and RUNS must be positive\n");
    return 2;
  }
  strata_env* env = nullptr;
  if (!Check(strata_env_create(&env), "env")) return 1;
  strata_session_options* opts = nullptr;
  if (!Check(strata_session_options_create(&opts), "options")) return 1;
  if (!Check(strata_session_options_set_threads(opts, threads), "threads")) return 1;
  std::vector<strata_session*> ss(sessions, nullptr);
  for (auto& s : ss)
    if (!Check(strata_session_create(env, model, opts, &s), "create")) return 1;
  strata_tensor* x = nullptr;
  if (!Check(strata_tensor_create(STRATA_DTYPE_FLOAT32, dims.data(), dims.size(), &x), "tensor")) return 1;
  float* xd = static_cast<float*>(strata_tensor_data(x));
  unsigned seed = 12345;
  for (long i = 0; i < k; ++i) {
    seed = seed * 1103515245u + 12345u;
    xd[i] = static_cast<float>((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
  }
  const char* names[1] = {input};
  const strata_tensor* ins[1] = {x};
  // Wall time per run, and the calling thread's CPU time per run (immune to preemption;
  // at 1 thread the whole run is on this thread).
  std::vector<std::vector<double>> samples(sessions), cpu(sessions);
  const bool series = std::getenv("MODES_SERIES") != nullptr;
  // MODES_SYSCALL=1: one cheap system call before each timed run, outside the timed span (as a
  // pool's futex wake or a timer interrupt would be): with PTI and no PCID it flushes the TLB.
  const bool syscall_each = std::getenv("MODES_SYSCALL") != nullptr;
  // MODES_CPU=1: also the thread's CPU time per run (clock_gettime of the thread CPU clock is
  // a system call, so this flushes the TLB before every run too).
  const bool cpu_clock = std::getenv("MODES_CPU") != nullptr;
  for (int r = 0; r < rounds; ++r) {
    if (series) std::printf("round %3d:", r);
    for (int si = 0; si < sessions; ++si) {
      std::vector<double> round_cpu;
      for (int i = 0; i < runs + 3; ++i) {  // 3 untimed runs bring this session's data back in
        strata_tensor* out = nullptr;
        if (syscall_each) syscall(SYS_getppid);
        const double c0 = cpu_clock ? ThreadCpuMs() : 0;
        auto t0 = std::chrono::steady_clock::now();
        if (!Check(strata_session_run(ss[si], names, ins, 1, nullptr, &out, 1), "run")) return 1;
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        const double cms = cpu_clock ? ThreadCpuMs() - c0 : ms;
        strata_tensor_destroy(out);
        if (i >= 3) {
          samples[si].push_back(ms);
          cpu[si].push_back(cms);
          round_cpu.push_back(cms);
        }
      }
      if (series) std::printf(" %.4f", Median(round_cpu));
    }
    if (series) std::printf("\n");
  }
  for (int si = 0; si < sessions; ++si)
    std::printf("session %d median %.4f min %.4f  thread-cpu median %.4f min %.4f\n", si, Median(samples[si]),
                *std::min_element(samples[si].begin(), samples[si].end()), Median(cpu[si]),
                *std::min_element(cpu[si].begin(), cpu[si].end()));
  strata_tensor_destroy(x);
  for (auto* s : ss) strata_session_destroy(s);
  strata_session_options_destroy(opts);
  strata_env_destroy(env);
  return 0;
}
