// ThreadPool when its threads share one CPU: a caller confined to one CPU gets a one-thread
// pool, and a worker that runs on its caller's CPU leaves every chunk to the caller (it would
// only take turns with it). Worker and caller are pinned with sched_setaffinity (the worker
// from the pool's ThreadInit), so which thread runs a chunk is deterministic; the tests
// restore the test thread's affinity when they end.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/threadpool.h"
#include "threadpool_test_util.h"

namespace strata {
namespace {

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

bool PinThisThread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

// Pins the calling thread to one CPU for its lifetime, then restores the previous mask.
class ScopedPin {
 public:
  explicit ScopedPin(int cpu) {
    CPU_ZERO(&saved_);
    ok_ = sched_getaffinity(0, sizeof(saved_), &saved_) == 0 && PinThisThread(cpu);
  }
  ~ScopedPin() { sched_setaffinity(0, sizeof(saved_), &saved_); }
  ScopedPin(const ScopedPin&) = delete;
  ScopedPin& operator=(const ScopedPin&) = delete;
  bool ok() const { return ok_; }

 private:
  cpu_set_t saved_;
  bool ok_ = false;
};

// ThreadInit that pins each worker to g_worker_cpu.
std::atomic<int> g_worker_cpu{0};
std::atomic<int> g_pin_failures{0};
void PinWorker() {
  if (!PinThisThread(g_worker_cpu.load())) g_pin_failures.fetch_add(1);
}

// One ParallelFor of n items with grain 1: returns "" when every index ran exactly once,
// and counts the chunks run by threads other than the caller in *foreign. Each chunk yields
// its CPU once, so a runnable worker on the caller's CPU gets to run while the region is
// open (and would claim chunks if it did not decline them).
std::string RunAndCount(ThreadPool& pool, int64_t n, int* foreign) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int> others{0};
  const std::thread::id caller = std::this_thread::get_id();
  pool.ParallelFor(n, 1, [&](int64_t b, int64_t e) {
    if (std::this_thread::get_id() != caller) others.fetch_add(1);
    sched_yield();
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  *foreign += others.load();
  for (int64_t i = 0; i < n; ++i)
    if (hits[static_cast<size_t>(i)].load() != 1)
      return "index " + std::to_string(i) + " ran " + std::to_string(hits[static_cast<size_t>(i)].load()) + " times";
  return "";
}

// The LSTM's kind of cooperative protocol (src/cpu/rnn_lstm_fused.cc): participants claim
// the items of a step from a shared word, wait while every item of the step is claimed but
// not finished, and the last finisher opens the next step. It must complete when only one
// participant ever runs at a time.
struct Steps {
  static constexpr int kSteps = 200, kItems = 6;
  std::atomic<uint64_t> state{0};  // step (32 bits) | items claimed (16) | items finished (16)
  std::atomic<int> runs[kSteps][kItems] = {};
  std::atomic<int> participants{0};
  std::atomic<int> foreign{0};  // participants run off the caller thread
  std::thread::id caller;
};

void Participate(void* ctx, int64_t b, int64_t e) {
  auto& st = *static_cast<Steps*>(ctx);
  if (std::this_thread::get_id() != st.caller) st.foreign.fetch_add(1);
  st.participants.fetch_add(static_cast<int>(e - b));
  for (;;) {
    uint64_t w = st.state.load(std::memory_order_acquire);
    const uint64_t s = w >> 32, claimed = (w >> 16) & 0xFFFF;
    if (s >= Steps::kSteps) return;
    if (claimed == Steps::kItems) {  // every item of step s is taken: wait for the holders
      std::this_thread::yield();
      continue;
    }
    if (!st.state.compare_exchange_weak(w, w + (uint64_t{1} << 16), std::memory_order_acq_rel)) continue;
    st.runs[s][claimed].fetch_add(1);
    if ((st.state.fetch_add(1, std::memory_order_acq_rel) & 0xFFFF) + 1 == Steps::kItems)
      st.state.store((s + 1) << 32, std::memory_order_release);
  }
}

std::string CheckSteps(const Steps& st, int participants) {
  if (st.participants.load() != participants)
    return std::to_string(st.participants.load()) + " participants ran, expected " + std::to_string(participants);
  for (int s = 0; s < Steps::kSteps; ++s)
    for (int k = 0; k < Steps::kItems; ++k)
      if (st.runs[s][k].load() != 1)
        return "step " + std::to_string(s) + " item " + std::to_string(k) + " ran " +
               std::to_string(st.runs[s][k].load()) + " times";
  return "";
}

// A process (here: the constructing thread) allowed on one CPU gets one thread, whatever
// was asked, and still runs every region and participant protocol completely.
TEST(ThreadPoolColocation, OneAllowedCpuGivesOneThread) {
  const std::vector<int> cpus = AllowedCpus();
  ASSERT_FALSE(cpus.empty());
  ScopedPin pin(cpus.back());
  ASSERT_TRUE(pin.ok());
  for (int asked : {0, 2, 4}) {
    ThreadPool pool(asked);
    EXPECT_EQ(pool.num_threads(), 1) << asked << " threads asked";
    int foreign = 0;
    for (int64_t n : {1, 7, 64, 1000}) EXPECT_EQ(RunAndCount(pool, n, &foreign), "") << "n " << n;
    EXPECT_EQ(foreign, 0);
    Steps st;
    st.caller = std::this_thread::get_id();
    pool.RunParticipants(2, Participate, &st);
    EXPECT_EQ(CheckSteps(st, 2), "");
  }
}

// With two allowed CPUs, threads <= 0 sizes the pool by the affinity mask, not by the
// machine's online CPUs.
TEST(ThreadPoolColocation, DefaultSizeFollowsTheAffinityMask) {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two allowed CPUs";
  cpu_set_t saved, two;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  CPU_ZERO(&two);
  CPU_SET(cpus[0], &two);
  CPU_SET(cpus[1], &two);
  ASSERT_EQ(sched_setaffinity(0, sizeof(two), &two), 0);
  const int threads = ThreadPool(0).num_threads();
  sched_setaffinity(0, sizeof(saved), &saved);
  EXPECT_EQ(threads, 2);
}

// A 2-thread pool whose worker is pinned to the caller's CPU: the worker takes no chunk
// (regions run inline, and the probes that wake it every millisecond find it on the
// caller's CPU again), every chunk runs exactly once, and a participant protocol completes
// with the caller running every participant. Moving the caller to another CPU and back
// keeps every region complete.
TEST(ThreadPoolColocation, WorkerOnTheCallersCpuLeavesEveryChunkToTheCaller) {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two allowed CPUs";
  const int shared = cpus[0], other = cpus[1];
  g_worker_cpu = shared;
  g_pin_failures = 0;
  ThreadPool pool(2, PinWorker);
  ASSERT_EQ(pool.num_threads(), 2);
  ASSERT_EQ(g_pin_failures.load(), 0);
  {
    ScopedPin pin(shared);
    ASSERT_TRUE(pin.ok());
    int foreign = 0;
    for (int r = 0; r < 300; ++r) {
      // A pause now and then lets the probe interval pass, so some regions wake the worker.
      if (r % 50 == 49) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      ASSERT_EQ(RunAndCount(pool, 16 + r % 50, &foreign), "") << "region " << r;
    }
    EXPECT_EQ(foreign, 0) << "chunks run by the worker on the caller's CPU";
    for (int r = 0; r < 3; ++r) {
      Steps st;
      st.caller = std::this_thread::get_id();
      pool.RunParticipants(2, Participate, &st);
      EXPECT_EQ(CheckSteps(st, 2), "") << "round " << r;
      EXPECT_EQ(st.foreign.load(), 0);
    }
  }
  {
    // On another CPU the worker may take chunks (when is up to the scheduler): only
    // completeness is checked.
    ScopedPin pin(other);
    ASSERT_TRUE(pin.ok());
    int foreign = 0;
    for (int r = 0; r < 300; ++r) ASSERT_EQ(RunAndCount(pool, 16 + r % 50, &foreign), "") << "region " << r;
    Steps st;
    st.caller = std::this_thread::get_id();
    pool.RunParticipants(2, Participate, &st);
    EXPECT_EQ(CheckSteps(st, 2), "");
  }
  {
    ScopedPin pin(shared);
    ASSERT_TRUE(pin.ok());
    int foreign = 0;
    for (int r = 0; r < 200; ++r) ASSERT_EQ(RunAndCount(pool, 16 + r % 50, &foreign), "") << "region " << r;
    EXPECT_EQ(foreign, 0) << "chunks run by the worker on the caller's CPU";
  }
}

// Nested regions inside a co-located pool still run inline and complete.
TEST(ThreadPoolColocation, NestedRegionsWhileColocated) {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two allowed CPUs";
  g_worker_cpu = cpus[0];
  ThreadPool pool(2, PinWorker);
  ScopedPin pin(cpus[0]);
  ASSERT_TRUE(pin.ok());
  EXPECT_EQ(testing::NestedRegionsError(pool, 8, 30, 2, 100), "");
}

}  // namespace
}  // namespace strata
