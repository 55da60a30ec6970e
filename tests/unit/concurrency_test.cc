// Session::Run is documented thread-safe: these tests call it from 8 threads at once on one
// session and require every result to be bit-identical to a single-threaded run. The
// ConcurrencyThreadPool tests drive the intra-op pool directly (concurrent and nested
// regions, pool teardown). scripts/sanitizers.sh tsan runs all Concurrency* tests under
// ThreadSanitizer.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "core/npy.h"
#include "core/session.h"
#include "core/threadpool.h"
#include "onnx_builder.h"
#include "threadpool_test_util.h"

namespace strata {
namespace {

using Feeds = std::vector<std::pair<std::string, Value>>;

using testing::ExpectEachOnce;
using namespace onnx_builder;  // AddInput, AddOutput, AddNode, AddPseudoRandomInit, PseudoRandom, Serialize
onnx::ModelProto MakeModel(int opset = 17) { return onnx_builder::MakeModel(opset, "concurrency_test"); }

void AddInt64Init(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> vals, bool scalar = false) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  if (!scalar) t->add_dims(static_cast<int64_t>(vals.size()));
  for (int64_t v : vals) t->add_int64_data(v);
}

// One single-head attention block with a residual, LayerNormalization and a Gelu-like MLP
// (Erf-based), on x[2, 16, 32]: MatMul, Transpose, Div, Softmax, Add, Mul, Erf, Reshape.
onnx::ModelProto TransformerBlock() {
  auto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 16, 32});
  for (const char* w : {"wq", "wk", "wv", "wo"}) AddPseudoRandomInit(g, w, {32, 32}, static_cast<uint32_t>(w[1]));
  AddPseudoRandomInit(g, "w1", {32, 64}, 11);
  AddPseudoRandomInit(g, "w2", {64, 32}, 12);
  AddPseudoRandomInit(g, "gamma", {32}, 13);
  AddPseudoRandomInit(g, "beta", {32}, 14);
  auto* sc = g->add_initializer();
  sc->set_name("scale");
  sc->set_data_type(onnx::TensorProto::FLOAT);
  sc->add_float_data(std::sqrt(32.0f));
  auto* half = g->add_initializer();
  half->set_name("half");
  half->set_data_type(onnx::TensorProto::FLOAT);
  half->add_float_data(0.5f);
  auto* one = g->add_initializer();
  one->set_name("one");
  one->set_data_type(onnx::TensorProto::FLOAT);
  one->add_float_data(1.0f);
  auto* rs2 = g->add_initializer();
  rs2->set_name("rsqrt2");
  rs2->set_data_type(onnx::TensorProto::FLOAT);
  rs2->add_float_data(0.70710678f);
  AddInt64Init(g, "flat", {32, 32});
  AddInt64Init(g, "unflat", {2, 16, 32});

  AddNode(g, "MatMul", {"x", "wq"}, {"q"});
  AddNode(g, "MatMul", {"x", "wk"}, {"k"});
  AddNode(g, "MatMul", {"x", "wv"}, {"v"});
  AddNode(g, "Transpose", {"k"}, {"kt"})->add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("perm");
    a.set_type(onnx::AttributeProto::INTS);
    for (int64_t p : {0, 2, 1}) a.add_ints(p);
    return a;
  }());
  AddNode(g, "MatMul", {"q", "kt"}, {"s"});
  AddNode(g, "Div", {"s", "scale"}, {"s2"});
  AddNode(g, "Softmax", {"s2"}, {"p"});
  AddNode(g, "MatMul", {"p", "v"}, {"att"});
  AddNode(g, "MatMul", {"att", "wo"}, {"o"});
  AddNode(g, "Add", {"x", "o"}, {"r1"});
  AddNode(g, "LayerNormalization", {"r1", "gamma", "beta"}, {"n1"});
  AddNode(g, "Reshape", {"n1", "flat"}, {"n1f"});
  AddNode(g, "MatMul", {"n1f", "w1"}, {"h"});
  AddNode(g, "Mul", {"h", "rsqrt2"}, {"hs"});
  AddNode(g, "Erf", {"hs"}, {"he"});
  AddNode(g, "Add", {"he", "one"}, {"he1"});
  AddNode(g, "Mul", {"h", "he1"}, {"hg"});
  AddNode(g, "Mul", {"hg", "half"}, {"gelu"});
  AddNode(g, "MatMul", {"gelu", "w2"}, {"m2"});
  AddNode(g, "Reshape", {"m2", "unflat"}, {"m2u"});
  AddNode(g, "Add", {"n1", "m2u"}, {"y"});
  AddOutput(g, "y", {2, 16, 32});
  return m;
}

// If(c) then x*2 else x+1, followed by a Loop that adds the If result M times
// (y = M * if_out) and collects each partial sum as a scan output.
onnx::ModelProto IfLoopModel() {
  auto m = MakeModel(16);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {4, 8});
  AddInput(g, "c", {}, onnx::TensorProto::BOOL);
  AddInput(g, "M", {}, onnx::TensorProto::INT64);
  auto* two = g->add_initializer();
  two->set_name("two");
  two->set_data_type(onnx::TensorProto::FLOAT);
  two->add_float_data(2.0f);
  auto* onef = g->add_initializer();
  onef->set_name("onef");
  onef->set_data_type(onnx::TensorProto::FLOAT);
  onef->add_float_data(1.0f);
  auto* ctrue = g->add_initializer();
  ctrue->set_name("ctrue");
  ctrue->set_data_type(onnx::TensorProto::BOOL);
  ctrue->add_int32_data(1);
  AddPseudoRandomInit(g, "zeros_seed", {4, 8}, 99);

  auto* iff = AddNode(g, "If", {"c"}, {"t"});
  auto* then_a = iff->add_attribute();
  then_a->set_name("then_branch");
  then_a->set_type(onnx::AttributeProto::GRAPH);
  auto* tb = then_a->mutable_g();
  tb->set_name("then");
  AddNode(tb, "Mul", {"x", "two"}, {"t_then"});
  AddOutput(tb, "t_then", {4, 8});
  auto* else_a = iff->add_attribute();
  else_a->set_name("else_branch");
  else_a->set_type(onnx::AttributeProto::GRAPH);
  auto* eb = else_a->mutable_g();
  eb->set_name("else");
  AddNode(eb, "Add", {"x", "onef"}, {"t_else"});
  AddOutput(eb, "t_else", {4, 8});

  auto* loop = AddNode(g, "Loop", {"M", "ctrue", "zeros_seed"}, {"acc", "partials"});
  auto* body_a = loop->add_attribute();
  body_a->set_name("body");
  body_a->set_type(onnx::AttributeProto::GRAPH);
  auto* b = body_a->mutable_g();
  b->set_name("body");
  AddInput(b, "i", {}, onnx::TensorProto::INT64);
  AddInput(b, "cin", {}, onnx::TensorProto::BOOL);
  AddInput(b, "a", {4, 8});
  AddNode(b, "Identity", {"cin"}, {"cout"});
  AddNode(b, "Add", {"a", "t"}, {"a2"});
  AddNode(b, "Tanh", {"a2"}, {"a3"});
  AddNode(b, "Identity", {"a3"}, {"scan"});
  AddOutput(b, "cout", {}, onnx::TensorProto::BOOL);
  AddOutput(b, "a3", {4, 8});
  AddOutput(b, "scan", {4, 8});
  AddOutput(g, "acc", {4, 8});
  auto* po = g->add_output();
  po->set_name("partials");
  po->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto* ps = po->mutable_type()->mutable_tensor_type()->mutable_shape();
  ps->add_dim()->set_dim_param("m");
  ps->add_dim()->set_dim_value(4);
  ps->add_dim()->set_dim_value(8);
  return m;
}

std::unique_ptr<Session> MustCreate(const onnx::ModelProto& m, int threads) {
  std::string s;
  m.SerializeToString(&s);
  SessionOptions o;
  o.threads = threads;
  auto r = Session::CreateFromBytes(s.data(), s.size(), o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(*r) : nullptr;
}

bool SameBits(const std::vector<Value>& a, const std::vector<Value>& b, std::string* why) {
  if (a.size() != b.size()) {
    *why = "output count";
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor& x = a[i].tensor();
    const Tensor& y = b[i].tensor();
    if (x.dtype() != y.dtype() || x.shape() != y.shape() || x.byte_size() != y.byte_size()) {
      *why = "output " + std::to_string(i) + " dtype/shape";
      return false;
    }
    if (std::memcmp(x.raw_data(), y.raw_data(), x.byte_size()) != 0) {
      *why = "output " + std::to_string(i) + " values";
      return false;
    }
  }
  return true;
}

// Runs every feed set once single-threaded for the reference, then `threads` threads each
// run all feed sets `iters` times (in a thread-dependent order) and compare bit for bit.
void RunConcurrently(const Session& s, const std::vector<Feeds>& feed_sets, int threads, int iters) {
  std::vector<std::vector<Value>> expected;
  for (const auto& f : feed_sets) {
    auto r = s.Run(f);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    expected.push_back(std::move(*r));
  }
  std::atomic<int> failures{0};
  std::atomic<bool> go{false};
  std::vector<std::string> first_error(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int it = 0; it < iters; ++it) {
        for (size_t k = 0; k < feed_sets.size(); ++k) {
          size_t j = (k + static_cast<size_t>(t + it)) % feed_sets.size();
          auto r = s.Run(feed_sets[j]);
          std::string why;
          if (!r.ok()) {
            why = r.status().ToString();
          } else if (SameBits(*r, expected[j], &why)) {
            continue;
          }
          if (failures.fetch_add(1) == 0 || first_error[t].empty()) first_error[t] = why;
        }
      }
    });
  }
  go.store(true);
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) EXPECT_TRUE(first_error[t].empty()) << "thread " << t << ": " << first_error[t];
  EXPECT_EQ(failures.load(), 0);
}

int StressIterations(int fallback) {
  const char* e = std::getenv("STRATA_STRESS_ITERS");
  int n = e ? std::atoi(e) : 0;
  return n > 0 ? n : fallback;
}

std::vector<Feeds> DigitsFeeds() {
  auto samples = ReadNpy(std::string(STRATA_SOURCE_DIR) + "/examples/digits_samples.npy");
  EXPECT_TRUE(samples.ok()) << samples.status().ToString();
  if (!samples.ok()) return {};
  const Tensor& all = *samples;  // [8, 1, 8, 8]
  std::vector<Feeds> sets;
  // Batches of 1, 3 and 8 images: different shapes exercise the planner's dynamic path.
  for (int64_t n : {1, 3, 8}) {
    auto t = Tensor::Allocate(DataType::kFloat, {n, 1, 8, 8});
    EXPECT_TRUE(t.ok());
    std::memcpy(t->raw_mutable_data(), all.raw_data(), static_cast<size_t>(n) * 64 * sizeof(float));
    sets.push_back({{"image", *t}});
  }
  return sets;
}

std::vector<Feeds> TransformerFeeds() {
  std::vector<Feeds> sets;
  for (uint32_t seed : {1u, 2u, 3u})
    sets.push_back({{"x", Tensor::FromVector<float>(PseudoRandom(2 * 16 * 32, seed), {2, 16, 32})}});
  return sets;
}

std::vector<Feeds> IfLoopFeeds() {
  std::vector<Feeds> sets;
  for (int k = 0; k < 4; ++k) {
    sets.push_back({{"x", Tensor::FromVector<float>(PseudoRandom(32, 40 + k), {4, 8})},
                    {"c", Tensor::Scalar<bool>(k % 2 == 0)},
                    {"M", Tensor::Scalar<int64_t>(3 + k)}});
  }
  return sets;
}

TEST(Concurrency, DigitsExampleEightThreads) {
  SessionOptions o;
  o.threads = 2;
  auto s = Session::CreateFromFile(std::string(STRATA_SOURCE_DIR) + "/examples/digits.onnx", o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  RunConcurrently(**s, DigitsFeeds(), 8, 10);
}

TEST(Concurrency, TransformerBlockEightThreads) {
  auto s = MustCreate(TransformerBlock(), 2);
  ASSERT_NE(s, nullptr);
  RunConcurrently(*s, TransformerFeeds(), 8, 5);
}

TEST(Concurrency, IfAndLoopEightThreads) {
  auto s = MustCreate(IfLoopModel(), 2);
  ASSERT_NE(s, nullptr);
  // Sanity: the Loop's scan output stacks M partial sums.
  auto r = s->Run(IfLoopFeeds()[1]);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[1].tensor().shape(), (Shape{4, 4, 8}));
  RunConcurrently(*s, IfLoopFeeds(), 8, 10);
}

// More iterations, all three models at once, single-threaded kernels plus an intra-op pool.
// STRATA_STRESS_ITERS scales it (scripts/sanitizers.sh tsan keeps the default).
TEST(ConcurrencyStress, AllModelsManyIterations) {
  const int iters = StressIterations(20);
  SessionOptions o;
  o.threads = 2;
  auto digits = Session::CreateFromFile(std::string(STRATA_SOURCE_DIR) + "/examples/digits.onnx", o);
  ASSERT_TRUE(digits.ok()) << digits.status().ToString();
  auto tf = MustCreate(TransformerBlock(), 1);
  auto il = MustCreate(IfLoopModel(), 2);
  ASSERT_NE(tf, nullptr);
  ASSERT_NE(il, nullptr);
  // Three sessions, each hammered by its own 8 threads, all at the same time.
  std::thread a([&] { RunConcurrently(**digits, DigitsFeeds(), 8, iters); });
  std::thread b([&] { RunConcurrently(*tf, TransformerFeeds(), 8, std::max(1, iters / 4)); });
  std::thread c([&] { RunConcurrently(*il, IfLoopFeeds(), 8, iters); });
  a.join();
  b.join();
  c.join();
}

// Sessions created and destroyed while others run: creation must not race on shared state
// (kernel registry, provider manager, thread pools).
TEST(ConcurrencyStress, CreateAndDestroySessionsWhileRunning) {
  std::vector<std::thread> pool;
  std::atomic<int> errors{0};
  for (int t = 0; t < 4; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < 3; ++i) {
        auto s = MustCreate(i % 2 ? IfLoopModel() : TransformerBlock(), 1 + i % 2);
        if (!s) {
          ++errors;
          continue;
        }
        auto r = s->Run(i % 2 ? IfLoopFeeds()[0] : TransformerFeeds()[0]);
        if (!r.ok()) ++errors;
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(errors.load(), 0);
}

// The thread count a pool asked for `threads` gets: one when the calling thread may run on
// one CPU only (e.g. the tests run under `taskset -c 0`), `threads` otherwise.
int ExpectedPoolThreads(int threads) {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1 ? 1 : threads;
}

// ThreadPool directly. Each region marks every index it covers; a chunk run twice, skipped,
// or run after its region returned shows up as a count other than 1.
// 8 caller threads share one 4-thread pool: one of them holds the region, the others must
// run inline, and none may see another's chunks.
TEST(ConcurrencyThreadPool, ConcurrentRegionsOnOnePool) {
  ThreadPool pool(4);
  ASSERT_EQ(pool.num_threads(), ExpectedPoolThreads(4));
  constexpr int kCallers = 8;
  const int iters = StressIterations(200);
  std::vector<std::string> errors(kCallers);
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      for (int it = 0; it < iters && errors[t].empty(); ++it) {
        const int64_t n = 37 + 13 * t + it % 50;  // sizes differ per caller and per round
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::vector<int64_t> sums(static_cast<size_t>(n), 0);  // plain writes: TSan checks the hand-off
        auto body = [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            hits[static_cast<size_t>(i)].fetch_add(1);
            sums[static_cast<size_t>(i)] = i * (t + 1);
          }
        };
        if (it % 2) {
          pool.Run(n, 3, body);
        } else {
          pool.ParallelFor(n, 3, body);
        }
        ExpectEachOnce(hits, "caller " + std::to_string(t) + " round " + std::to_string(it), &errors[t]);
        for (int64_t i = 0; i < n && errors[t].empty(); ++i)
          if (sums[static_cast<size_t>(i)] != i * (t + 1)) errors[t] = "caller " + std::to_string(t) + ": wrong sum";
      }
    });
  }
  for (auto& c : callers) c.join();
  for (int t = 0; t < kCallers; ++t) EXPECT_EQ(errors[t], "") << "caller " << t;
}

// A region started from inside a chunk (same pool) runs inline, on every thread, without
// deadlocking on the busy pool.
TEST(ConcurrencyThreadPool, NestedRegionsRunInline) {
  ThreadPool pool(3);
  EXPECT_EQ(testing::NestedRegionsError(pool, 24, 40, 4, 50), "");
}

// RunParticipants: each of the n participants runs exactly once, on whichever thread claims
// it; plain writes per participant are visible to the caller afterwards.
TEST(ConcurrencyThreadPool, ParticipantsEachRunOnce) {
  ThreadPool pool(4);
  for (int round = 0; round < 100; ++round) {
    struct Ctx {
      std::vector<std::atomic<int>> hits = std::vector<std::atomic<int>>(4);
      std::vector<int> owner = std::vector<int>(4, -1);
    } ctx;
    pool.RunParticipants(
        4,
        [](void* c, int64_t b, int64_t e) {
          auto* x = static_cast<Ctx*>(c);
          for (int64_t i = b; i < e; ++i) {
            x->hits[static_cast<size_t>(i)].fetch_add(1);
            x->owner[static_cast<size_t>(i)] = static_cast<int>(i);
          }
        },
        &ctx);
    std::string err;
    ExpectEachOnce(ctx.hits, "round " + std::to_string(round), &err);
    ASSERT_EQ(err, "");
    for (int i = 0; i < 4; ++i) ASSERT_EQ(ctx.owner[static_cast<size_t>(i)], i);
  }
}

// Pools created, used once and destroyed at once, while their workers may still be waking
// up for the first time or spinning: teardown must neither hang nor race with them.
TEST(ConcurrencyThreadPool, CreateUseDestroy) {
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        ThreadPool pool(2 + (t + i) % 3);
        if (i % 3 == 0) continue;  // destroyed without ever running a region
        std::vector<std::atomic<int>> hits(100);
        pool.Run(100, 1, [&](int64_t b, int64_t e) {
          for (int64_t k = b; k < e; ++k) hits[static_cast<size_t>(k)].fetch_add(1);
        });
        std::string err;
        ExpectEachOnce(hits, "pool", &err);
        if (!err.empty()) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// The init hook runs once on every worker, each on its own thread, before the first parallel
// region's chunks run (sessions rely on it to make per-thread scratch before the first run);
// the constructor does not wait for it.
std::atomic<int> g_inits{0};
std::atomic<bool> g_init_on_caller{false};
thread_local bool t_inited = false;
std::thread::id g_constructing;

std::atomic<bool> g_release_inits{true};

void HeldCountInit() {
  // Held until the test releases it (10 s at most, so a constructor that waited for the
  // inits fails the test instead of hanging it).
  for (int i = 0; i < 10000 && !g_release_inits.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (std::this_thread::get_id() == g_constructing) g_init_on_caller = true;
  EXPECT_FALSE(t_inited) << "init ran twice on one thread";
  t_inited = true;
  g_inits.fetch_add(1);
}

TEST(ConcurrencyThreadPool, InitRunsOnEveryWorkerBeforeTheFirstRegion) {
  for (int threads : {1, 2, 5}) {
    g_inits = 0;
    g_init_on_caller = false;
    g_constructing = std::this_thread::get_id();
    g_release_inits = false;
    ThreadPool pool(threads, HeldCountInit);
    // The constructor returned while every init was still held.
    EXPECT_EQ(g_inits.load(), 0) << threads << " threads: the constructor waited for the inits";
    EXPECT_EQ(pool.num_threads(), ExpectedPoolThreads(threads));
    g_release_inits = true;
    // Every chunk of the first region sees every worker's init done.
    std::atomic<int> early{0};
    pool.ParallelFor(64, 1, [&](int64_t, int64_t) {
      if (g_inits.load() != ExpectedPoolThreads(threads) - 1) early.fetch_add(1);
    });
    EXPECT_EQ(early.load(), 0) << threads << " threads: chunks ran before every worker's init";
    EXPECT_EQ(g_inits.load(), ExpectedPoolThreads(threads) - 1) << threads << " threads";
    EXPECT_FALSE(g_init_on_caller.load()) << "the calling thread is not a worker";
  }
}

}  // namespace
}  // namespace strata
