// Loop and Scan outputs accumulated across iterations count against
// SessionOptions::memory_cap_bytes: a huge trip count fails with a clear error naming
// the node once the accumulated bytes pass the cap, instead of exhausting memory.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "core/session.h"
#include "onnx_builder.h"

namespace strata {
namespace {

namespace ob = onnx_builder;
constexpr int64_t kRow = 256;  // floats per scan item: 1 KiB

// Loop(M=trip, cond=true) whose body emits the outer-scope `row` (`len` floats) as a scan
// output each iteration; the model output stacks them to [trip, len].
std::string LoopModel(int64_t trip, int64_t len = kRow) {
  onnx::ModelProto m = ob::MakeModel(13, "loop_cap_test");
  onnx::GraphProto* g = m.mutable_graph();
  ob::AddOutput(g, "rows", {-1, len});
  auto* row = g->add_initializer();
  row->set_name("row");
  row->set_data_type(onnx::TensorProto::FLOAT);
  row->add_dims(len);
  for (int64_t i = 0; i < len; ++i) row->add_float_data(static_cast<float>(i));
  ob::AddInt64Scalar(g, "M", trip);
  ob::AddBoolScalar(g, "cond", true);

  onnx::NodeProto* loop = ob::AddNode(g, "Loop", {"M", "cond"}, {"rows"});
  loop->set_name("big_loop");
  onnx::GraphProto* body = ob::AddGraphAttr(loop, "body");
  ob::AddInput(body, "i", {}, onnx::TensorProto::INT64);
  ob::AddInput(body, "c_in", {}, onnx::TensorProto::BOOL);
  ob::AddOutput(body, "c_out", {}, onnx::TensorProto::BOOL);
  ob::AddOutput(body, "item", {len});
  ob::AddNode(body, "Identity", {"c_in"}, {"c_out"});
  ob::AddNode(body, "Identity", {"row"}, {"item"});
  return ob::Serialize(m);
}

Result<std::vector<Value>> RunLoop(int64_t trip, size_t cap, int64_t len = kRow) {
  std::string bytes = LoopModel(trip, len);
  SessionOptions o;
  o.threads = 1;
  o.memory_cap_bytes = cap;
  ASSIGN_OR_RETURN(auto s, Session::CreateFromBytes(bytes.data(), bytes.size(), o));
  return s->Run({});
}

TEST(LoopCap, HugeTripCountStopsAtTheCap) {
  // 10^12 iterations would never finish; the cap (1 MiB = 1024 items) stops it early.
  auto r = RunLoop(1000000000000LL, 1 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfMemory) << r.status().ToString();
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("big_loop"), std::string::npos) << msg;
  EXPECT_NE(msg.find("memory cap of 1048576 bytes"), std::string::npos) << msg;
  // 1 KiB of data per item plus its bookkeeping: the cap is passed within 1025 items.
  const size_t at = msg.find("accumulated over ");
  ASSERT_NE(at, std::string::npos) << msg;
  const int64_t iterations = std::stoll(msg.substr(at + 17));
  EXPECT_GT(iterations, 800) << msg;
  EXPECT_LE(iterations, 1025) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(LoopCap, TinyItemsCountTheirBookkeeping) {
  // One float per item: by data alone 1 MiB would hold 262144 of them, and every held item
  // costs a Tensor and a buffer besides (a fuzzed Loop of scalars grew past 2 GiB under a
  // 4 MiB cap). Counting that, the cap stops it within a few thousand.
  auto r = RunLoop(1000000000000LL, 1 << 20, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfMemory) << r.status().ToString();
  const std::string& msg = r.status().message();
  const size_t at = msg.find("accumulated over ");
  ASSERT_NE(at, std::string::npos) << msg;
  EXPECT_LT(std::stoll(msg.substr(at + 17)), 20000) << msg;
}

TEST(LoopCap, WithinTheCapRuns) {
  auto r = RunLoop(16, 1 << 20);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  const Tensor& t = (*r)[0].tensor();
  EXPECT_EQ(t.shape(), (Shape{16, kRow}));
  EXPECT_EQ(t.data<float>()[15 * kRow + 7], 7.0f);
}

TEST(LoopCap, NoCapMeansNoLimit) {
  auto r = RunLoop(2048, 0);  // 2 MiB of scan output, no cap set
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].tensor().shape(), (Shape{2048, kRow}));
}

}  // namespace
}  // namespace strata
