// C++ exceptions inside kernels: a chunk of a parallel region that throws (on the caller or
// on a pool worker) must not end the process or leave the pool's region open; the pool
// rethrows the first on the caller once every chunk has finished, and the executor turns
// it into a Status naming the node (std::bad_alloc: OUT_OF_MEMORY).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/executor.h"
#include "core/threadpool.h"
#include "ir_builder.h"
#include "threadpool_test_util.h"

namespace strata {
namespace {

using testing::IrBuilder;

// Every index of [0, n) ran exactly once, and a region on `pool` after it still does.
void ExpectPoolStillWorks(ThreadPool& pool) {
  std::vector<std::atomic<int>> hits(100);
  pool.ParallelFor(100, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  std::string err;
  testing::ExpectEachOnce(hits, "region after the exception", &err);
  EXPECT_EQ(err, "");
}

TEST(ThreadPoolExceptions, EveryChunkThrowingReachesTheCallerOnce) {
  ThreadPool pool(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.ParallelFor(64, 1,
                                [&](int64_t, int64_t) {
                                  ran.fetch_add(1);
                                  throw std::runtime_error("chunk failed");
                                }),
               std::runtime_error);
  EXPECT_GT(ran.load(), 0);
  ExpectPoolStillWorks(pool);
}

// A chunk that throws on a worker thread (std::terminate before) reaches the caller. Which
// thread runs a chunk is the scheduler's choice: chunks sleep so the worker takes some, and
// only regions in which the worker threw are checked.
TEST(ThreadPoolExceptions, WorkerChunkExceptionReachesTheCaller) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  int worker_regions = 0;
  for (int r = 0; r < 50 && worker_regions < 5; ++r) {
    std::atomic<bool> worker_threw{false};
    bool caught = false;
    try {
      pool.ParallelFor(8, 1, [&](int64_t, int64_t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (std::this_thread::get_id() != caller) {
          worker_threw = true;
          throw std::bad_alloc();
        }
      });
    } catch (const std::bad_alloc&) {
      caught = true;
    }
    EXPECT_EQ(caught, worker_threw.load()) << "region " << r;
    if (worker_threw) ++worker_regions;
  }
  if (worker_regions == 0) GTEST_SKIP() << "the worker took no chunk (it shares the caller's CPU)";
  ExpectPoolStillWorks(pool);
}

// test.Throw: a parallel region whose chunks throw `what_` ("bad_alloc" or a message).
class ThrowingKernel final : public OpKernel {
 public:
  explicit ThrowingKernel(std::string what) : what_(std::move(what)) {}
  Status Compute(KernelContext& ctx) const override {
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {1}));
    y->mutable_data<float>()[0] = 0;
    ctx.pool()->ParallelFor(16, 1, [&](int64_t, int64_t) {
      if (what_ == "bad_alloc") throw std::bad_alloc();
      throw std::runtime_error(what_);
    });
    return Status::Ok();
  }

 private:
  std::string what_;
};

Status RunThrowing(ThreadPool& pool, const std::string& what) {
  IrBuilder b;
  int x = b.Input("x", Tensor::FromVector<float>({1}, {1}));
  int y = b.Out("y");
  Node& n = b.Add("Throw", {x}, {y}, 1);
  n.domain = "test";
  n.name = "thrower";
  b.g.outputs = {y};
  ExecOptions opts;
  opts.custom_factory = [what](const KernelInit& init, std::string* impl) -> Result<std::unique_ptr<OpKernel>> {
    if (init.node.op_type != "Throw") return std::unique_ptr<OpKernel>();
    *impl = "test";
    return std::unique_ptr<OpKernel>(std::make_unique<ThrowingKernel>(what));
  };
  auto ex = Executor::Create(std::make_shared<Graph>(b.g), &pool, opts);
  if (!ex.ok()) return ex.status();
  std::vector<Value> feeds;
  for (int v : b.g.inputs) feeds.push_back(Value(b.feeds.at(v)));
  return (*ex)->Run(feeds).status();
}

TEST(KernelExceptions, BecomeStatusesNamingTheNode) {
  ThreadPool pool(2);
  Status oom = RunThrowing(pool, "bad_alloc");
  EXPECT_EQ(oom.code(), StatusCode::kOutOfMemory) << oom.ToString();
  EXPECT_NE(oom.message().find("Throw node 'thrower'"), std::string::npos) << oom.ToString();
  EXPECT_NE(oom.message().find("out of memory"), std::string::npos) << oom.ToString();
  Status other = RunThrowing(pool, "scratch index past the end");
  EXPECT_EQ(other.code(), StatusCode::kInternal) << other.ToString();
  EXPECT_NE(other.message().find("Throw node 'thrower'"), std::string::npos) << other.ToString();
  EXPECT_NE(other.message().find("scratch index past the end"), std::string::npos) << other.ToString();
  ExpectPoolStillWorks(pool);
}

}  // namespace
}  // namespace strata
