// Run control (core/run_control.h): deadlines (SessionOptions::run_timeout_ms, a run's own
// RunOptions) and terminate calls (Session::TerminateRuns, RunOptions::Terminate) end runs
// that would otherwise go on for ever, between nodes and between Loop iterations, with
// kCancelled naming why; later runs are unaffected.
#include "core/run_control.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/io_binding.h"
#include "core/session.h"
#include "onnx_builder.h"

namespace strata {
namespace {

namespace ob = onnx_builder;

// y = x + trip: a Loop of `trip` iterations carrying v. With empty_body the body has no
// node at all (its outputs are its inputs; y = x), so only the per-iteration check can
// stop it.
std::string CountingLoop(int64_t trip, bool empty_body = false) {
  onnx::ModelProto m = ob::MakeModel(13, "run_control_test");
  onnx::GraphProto* g = m.mutable_graph();
  ob::AddInput(g, "x", {1});
  ob::AddOutput(g, "y", {1});
  ob::AddInt64Scalar(g, "M", trip);
  ob::AddBoolScalar(g, "cond", true);
  ob::AddFloatInit(g, "one", {1}, {1.0f});
  onnx::NodeProto* loop = ob::AddNode(g, "Loop", {"M", "cond", "x"}, {"y"});
  loop->set_name("counting_loop");
  onnx::GraphProto* body = ob::AddGraphAttr(loop, "body");
  ob::AddInput(body, "i", {}, onnx::TensorProto::INT64);
  ob::AddInput(body, "c_in", {}, onnx::TensorProto::BOOL);
  ob::AddInput(body, "v_in", {1});
  if (empty_body) {
    ob::AddOutput(body, "c_in", {}, onnx::TensorProto::BOOL);
    ob::AddOutput(body, "v_in", {1});
  } else {
    ob::AddOutput(body, "c_out", {}, onnx::TensorProto::BOOL);
    ob::AddOutput(body, "v_out", {1});
    ob::AddNode(body, "Identity", {"c_in"}, {"c_out"});
    ob::AddNode(body, "Add", {"v_in", "one"}, {"v_out"});
  }
  return ob::Serialize(m);
}

std::unique_ptr<Session> Make(const std::string& bytes, int64_t timeout_ms) {
  SessionOptions o;
  o.threads = 1;
  o.run_timeout_ms = timeout_ms;
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

std::vector<std::pair<std::string, Value>> Feeds(float x) {
  return {{"x", Value(Tensor::FromVector<float>({x}, {1}))}};
}

const int64_t kForever = std::numeric_limits<int64_t>::max();

// Calls stop() every 5 ms until done(): a terminate call made before a run began does not
// end it, so one call is not enough.
template <typename Done, typename Stop>
void StopUntil(Done done, Stop stop) {
  while (!done()) {
    stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST(RunControl, DeadlineEndsAnEndlessLoop) {
  for (bool empty_body : {false, true}) {
    SCOPED_TRACE(empty_body);
    auto s = Make(CountingLoop(kForever, empty_body), 50);
    ASSERT_NE(s, nullptr);
    auto r = s->Run(Feeds(0));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().ToString();
    const std::string& msg = r.status().message();
    EXPECT_NE(msg.find("counting_loop"), std::string::npos) << msg;
    EXPECT_NE(msg.find("deadline of 50 ms (run_timeout_ms)"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    // The session stays usable: the next run meets the same deadline, not a stale state.
    auto again = s->Run(Feeds(0));
    EXPECT_EQ(again.status().code(), StatusCode::kCancelled) << again.status().ToString();
  }
}

TEST(RunControl, RunsWithinTheDeadlineAreUnaffected) {
  auto s = Make(CountingLoop(1000), 600000);
  ASSERT_NE(s, nullptr);
  auto r = s->Run(Feeds(0.5f));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].tensor().data<float>()[0], 1000.5f);
}

// The core refuses a deadline outside [0, 10^12] ms (past 10^12, start + deadline could leave
// the steady clock's range), whichever front end set it.
TEST(RunControl, TimeoutOutOfRangeIsRefused) {
  const std::string bytes = CountingLoop(3);
  for (int64_t bad : {int64_t{-1}, kMaxRunTimeoutMs + 1, std::numeric_limits<int64_t>::max()}) {
    SessionOptions o;
    o.run_timeout_ms = bad;
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), o);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("run_timeout_ms"), std::string::npos) << s.status().message();
  }
  EXPECT_NE(Make(CountingLoop(3), kMaxRunTimeoutMs), nullptr);
}

// Terminate ends the runs in progress on other threads, and only those.
TEST(RunControl, TerminateEndsRunsInProgressOnly) {
  auto s = Make(CountingLoop(kForever), 0);
  ASSERT_NE(s, nullptr);
  constexpr int kRunners = 2;
  std::vector<Status> got(kRunners);
  std::atomic<int> done{0};
  std::vector<std::thread> runners;
  for (int t = 0; t < kRunners; ++t)
    runners.emplace_back([&, t] {
      auto r = s->Run(Feeds(0));
      got[t] = r.status();
      done.fetch_add(1);
    });
  StopUntil([&] { return done.load() == kRunners; }, [&] { s->TerminateRuns(); });
  for (auto& t : runners) t.join();
  for (const Status& st : got) {
    EXPECT_EQ(st.code(), StatusCode::kCancelled) << st.ToString();
    EXPECT_NE(st.message().find("terminated"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find("counting_loop"), std::string::npos) << st.ToString();
  }
  // A run that starts after the calls is unaffected.
  auto bounded = Make(CountingLoop(3), 0);
  ASSERT_NE(bounded, nullptr);
  bounded->TerminateRuns();
  auto r = bounded->Run(Feeds(1));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].tensor().data<float>()[0], 4.0f);
}

// An io-binding run meets the deadline too, and its binding can run again afterwards.
TEST(RunControl, IoBindingRunsMeetTheDeadline) {
  auto s = Make(CountingLoop(kForever), 30);
  ASSERT_NE(s, nullptr);
  IoBinding b(*s);
  ASSERT_TRUE(b.BindInput("x", Tensor::FromVector<float>({0}, {1})).ok());
  for (int i = 0; i < 2; ++i) {
    Status st = b.Run();
    EXPECT_EQ(st.code(), StatusCode::kCancelled) << st.ToString();
  }
}

// A run's own deadline (RunOptions) ends it without a session deadline; with both, the
// earlier one does, and the message names which option set it.
TEST(RunControl, RunOptionsDeadlineAndTheEarlierWins) {
  struct Case {
    int64_t session_ms, run_ms;
    const char* expect;
  };
  for (const Case& c : {Case{0, 40, "deadline of 40 ms (run option timeout_ms)"},
                        Case{40, 600000, "deadline of 40 ms (run_timeout_ms)"},
                        Case{600000, 40, "deadline of 40 ms (run option timeout_ms)"}}) {
    SCOPED_TRACE(c.expect);
    auto s = Make(CountingLoop(kForever), c.session_ms);
    ASSERT_NE(s, nullptr);
    RunOptions run;
    ASSERT_TRUE(run.SetTimeoutMs(c.run_ms).ok());
    auto r = s->Run(Feeds(0), {}, &run);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().ToString();
  }
  // Runs within the run's deadline are unaffected, and so are runs given no options.
  auto s = Make(CountingLoop(10), 0);
  ASSERT_NE(s, nullptr);
  RunOptions run;
  ASSERT_TRUE(run.SetTimeoutMs(600000).ok());
  auto r = s->Run(Feeds(0), {}, &run);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].tensor().data<float>()[0], 10.0f);
  for (int64_t bad : {int64_t{-1}, kMaxRunTimeoutMs + 1}) {
    Status st = run.SetTimeoutMs(bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("timeout_ms"), std::string::npos) << st.ToString();
  }
  EXPECT_EQ(run.timeout_ms(), 600000);  // a refused value leaves the old one
}

// RunOptions::Terminate ends the runs given those options, not the session's other runs.
TEST(RunControl, RunOptionsTerminateEndsOnlyItsRuns) {
  auto s = Make(CountingLoop(kForever), 0);
  ASSERT_NE(s, nullptr);
  RunOptions first, second;
  Status got_first, got_second;
  std::atomic<bool> first_done{false}, second_done{false};
  std::thread a([&] {
    got_first = s->Run(Feeds(0), {}, &first).status();
    first_done = true;
  });
  std::thread b([&] {
    got_second = s->Run(Feeds(0), {}, &second).status();
    second_done = true;
  });
  StopUntil([&] { return first_done.load(); }, [&] { first.Terminate(); });
  a.join();
  // The other run is still going: give it time to be (wrongly) stopped, then check.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(second_done.load());
  StopUntil([&] { return second_done.load(); }, [&] { s->TerminateRuns(); });
  b.join();
  EXPECT_EQ(got_first.code(), StatusCode::kCancelled) << got_first.ToString();
  EXPECT_NE(got_first.message().find("strata_run_options_terminate"), std::string::npos) << got_first.ToString();
  EXPECT_NE(got_second.message().find("strata_session_terminate_runs"), std::string::npos) << got_second.ToString();
  // The options stay usable: a run started after the calls is unaffected.
  auto bounded = Make(CountingLoop(3), 0);
  ASSERT_NE(bounded, nullptr);
  auto r = bounded->Run(Feeds(1), {}, &first);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].tensor().data<float>()[0], 4.0f);
}

// An io-binding run takes run options too; the next run without them has no deadline.
TEST(RunControl, IoBindingRunsTakeRunOptions) {
  auto s = Make(CountingLoop(kForever), 0);
  ASSERT_NE(s, nullptr);
  IoBinding b(*s);
  ASSERT_TRUE(b.BindInput("x", Tensor::FromVector<float>({0}, {1})).ok());
  RunOptions run;
  ASSERT_TRUE(run.SetTimeoutMs(30).ok());
  Status st = b.Run(&run);
  EXPECT_EQ(st.code(), StatusCode::kCancelled) << st.ToString();
  EXPECT_NE(st.message().find("run option timeout_ms"), std::string::npos) << st.ToString();
  auto bounded = Make(CountingLoop(5), 0);
  ASSERT_NE(bounded, nullptr);
  IoBinding b2(*bounded);
  ASSERT_TRUE(b2.BindInput("x", Tensor::FromVector<float>({0}, {1})).ok());
  run.Terminate();  // before the run: no effect on it
  EXPECT_TRUE(b2.Run(&run).ok());
  EXPECT_TRUE(b2.Run().ok());
}

// An Einsum chain "ab,bc,cd,de,ef,fg->ag" of 64 x 64 inputs sums 64^5 terms per output (10^12
// products in all): one kernel call that would run for hours. The kernel checks the run's
// limits itself, also on pool workers, so the deadline ends it. With constant inputs the
// optimizer's folding gives up after its own time budget, so session creation returns.
std::string EinsumChain(bool constant_inputs) {
  onnx::ModelProto m = ob::MakeModel(13, "run_control_test");
  onnx::GraphProto* g = m.mutable_graph();
  const char* names[] = {"ab", "bc", "cd", "de", "ef", "fg"};
  std::vector<std::string> ins;
  for (int i = 0; i < 6; ++i) {
    if (constant_inputs)
      ob::AddPseudoRandomInit(g, names[i], {64, 64}, static_cast<uint32_t>(i + 1));
    else
      ob::AddInput(g, names[i], {64, 64});
    ins.push_back(names[i]);
  }
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Einsum");
  n->set_name("chain");
  for (const auto& i : ins) n->add_input(i);
  n->add_output("y");
  auto* eq = n->add_attribute();
  eq->set_name("equation");
  eq->set_type(onnx::AttributeProto::STRING);
  eq->set_s("ab,bc,cd,de,ef,fg->ag");
  ob::AddOutput(g, "y", {64, 64});
  return ob::Serialize(m);
}

TEST(RunControl, LongEinsumKernelMeetsTheDeadline) {
  for (bool constant_inputs : {false, true}) {
    SCOPED_TRACE(constant_inputs);
    const std::string bytes = EinsumChain(constant_inputs);
    SessionOptions o;
    o.threads = 2;  // the products run on a pool worker too
    o.run_timeout_ms = 100;
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    std::vector<std::pair<std::string, Value>> feeds;
    if (!constant_inputs)
      for (const char* name : {"ab", "bc", "cd", "de", "ef", "fg"})
        feeds.emplace_back(name, Value(Tensor::FromVector<float>(std::vector<float>(64 * 64, 0.5f), {64, 64})));
    auto r = (*s)->Run(feeds);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().ToString();
    const std::string& msg = r.status().message();
    EXPECT_NE(msg.find("deadline of 100 ms"), std::string::npos) << msg;
    EXPECT_NE(msg.find("in Einsum node 'chain'"), std::string::npos) << msg;
  }
}

// Greedy NonMaxSuppression over 2^17 boxes that do not overlap compares each with all kept
// before it (2^33 IoUs, tens of seconds): it checks the run's limits as it goes.
TEST(RunControl, QuadraticNmsMeetsTheDeadline) {
  constexpr int64_t n = int64_t{1} << 17;
  onnx::ModelProto m = ob::MakeModel(11, "run_control_test");
  onnx::GraphProto* g = m.mutable_graph();
  ob::AddInput(g, "boxes", {1, n, 4});
  ob::AddInput(g, "scores", {1, 1, n});
  ob::AddInt64Scalar(g, "max_out", n);
  ob::AddNode(g, "NonMaxSuppression", {"boxes", "scores", "max_out"}, {"selected"}, "nms");
  ob::AddOutput(g, "selected", {-1, 3}, onnx::TensorProto::INT64);
  const std::string bytes = ob::Serialize(m);
  std::vector<float> boxes(static_cast<size_t>(n * 4)), scores(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float y = static_cast<float>(2 * i);
    boxes[i * 4] = y;  // [y1, x1, y2, x2]: unit boxes two apart
    boxes[i * 4 + 1] = 0;
    boxes[i * 4 + 2] = y + 1;
    boxes[i * 4 + 3] = 1;
    scores[i] = 1.0f - static_cast<float>(i) / static_cast<float>(n);
  }
  auto s = Make(bytes, 50);
  ASSERT_NE(s, nullptr);
  auto r = s->Run({{"boxes", Value(Tensor::FromVector<float>(boxes, {1, n, 4}))},
                   {"scores", Value(Tensor::FromVector<float>(scores, {1, 1, n}))}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().ToString();
  EXPECT_NE(r.status().message().find("in NonMaxSuppression node 'nms'"), std::string::npos) << r.status().ToString();
}

// Without an installed scope (work on a pool thread, or no run at all) the check passes;
// nested scopes restore the outer one.
TEST(RunControl, CheckOutsideARunPasses) {
  EXPECT_TRUE(CheckRunControl().ok());
  RunTerminator t;
  {
    RunControlScope outer(&t, 0);
    EXPECT_TRUE(CheckRunControl().ok());
    t.Terminate();
    EXPECT_EQ(CheckRunControl().code(), StatusCode::kCancelled);
    {
      RunControlScope inner(&t, 0);  // began after the call: unaffected
      EXPECT_TRUE(CheckRunControl().ok());
    }
    EXPECT_EQ(CheckRunControl().code(), StatusCode::kCancelled);
  }
  EXPECT_TRUE(CheckRunControl().ok());
}

}  // namespace
}  // namespace strata
