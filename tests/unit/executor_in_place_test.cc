// The executor's in-place outputs (OpKernel::InPlaceInput): a node's output 0 takes over
// a dying input's buffer only when nothing else can still see that buffer.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/executor.h"
#include "ir_builder.h"

namespace strata {
namespace {

using testing::IrBuilder;

// test.AddInPlace(a, b) = a + b, declaring that it may write over input `in_place`;
// records whether its output really was that input's buffer.
class AddInPlaceKernel final : public OpKernel {
 public:
  AddInPlaceKernel(int in_place, int* took) : in_place_(in_place), took_(took) {}
  int InPlaceInput() const override { return in_place_; }
  Status Compute(KernelContext& ctx) const override {
    const Tensor* a = ctx.input(0);
    const Tensor* b = ctx.input(1);
    if (!a || !b || a->shape() != b->shape()) return InvalidArgument(ctx.node().Describe(), ": bad inputs");
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, a->shape()));
    const float* pa = a->data<float>();
    const float* pb = b->data<float>();
    float* py = y->mutable_data<float>();
    *took_ = (py == pa || py == pb) ? 1 : 0;
    for (int64_t i = 0; i < y->num_elements(); ++i) py[i] = pa[i] + pb[i];
    return Status::Ok();
  }

 private:
  int in_place_;
  int* took_;
};

Tensor Filled(const Shape& shape, float start) {
  Tensor t = *Tensor::Allocate(DataType::kFloat, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.mutable_data<float>()[i] = start + static_cast<float>(i);
  return t;
}

struct Built {
  std::unique_ptr<Executor> ex;
  std::vector<Value> feeds;
};

Built Build(IrBuilder& b, ThreadPool* pool, int in_place, int* took) {
  ExecOptions opts;
  opts.custom_factory = [in_place, took](const KernelInit& init,
                                         std::string* impl) -> Result<std::unique_ptr<OpKernel>> {
    if (init.node.op_type != "AddInPlace") return std::unique_ptr<OpKernel>();
    *impl = "test";
    return std::unique_ptr<OpKernel>(std::make_unique<AddInPlaceKernel>(in_place, took));
  };
  Built out;
  for (int v : b.g.inputs) out.feeds.push_back(Value(b.feeds.at(v)));
  auto ex = Executor::Create(std::make_shared<Graph>(b.g), pool, opts);
  EXPECT_TRUE(ex.ok()) << ex.status().ToString();
  if (ex.ok()) out.ex = std::move(*ex);
  return out;
}

Node& AddInPlace(IrBuilder& b, std::vector<int> ins, int out) {
  Node& n = b.Add("AddInPlace", std::move(ins), {out}, 1);
  n.domain = "test";
  return n;
}

void ExpectValues(const Tensor& t, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(t.num_elements(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(t.data<float>()[i], want[i]) << what << " at " << i;
}

TEST(ExecutorInPlace, DyingComputedInputIsWrittenOver) {
  ThreadPool pool(1);
  IrBuilder b;
  const int a = b.Input("a", Filled({2, 3}, 1.0f)), x = b.Input("x", Filled({2, 3}, -2.0f));
  const int r = b.Value("r", {2, 3}), y = b.Value("y", {2, 3});
  b.Add("Relu", {x}, {r});  // r = max(x, 0) = 0 0 0 1 2 3
  AddInPlace(b, {a, r}, y);
  b.g.outputs = {y};
  int took = -1;
  Built bt = Build(b, &pool, 1, &took);
  ASSERT_TRUE(bt.ex);
  EXPECT_EQ(bt.ex->in_place_value(1), r);
  EXPECT_EQ(bt.ex->in_place_value(0), -1) << "Relu declares no in-place input";
  for (int rep = 0; rep < 2; ++rep) {
    auto got = bt.ex->Run(bt.feeds);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(took, 1) << "run " << rep << ": the sum did not take over r's buffer";
    ExpectValues((*got)[0].tensor(), {1, 2, 3, 5, 7, 9}, "y");
  }
  // The feeds were never written.
  ExpectValues(bt.feeds[1].tensor(), {-2, -1, 0, 1, 2, 3}, "x");
}

TEST(ExecutorInPlace, InputsStillSeenElsewhereAreNotOffered) {
  ThreadPool pool(1);
  struct Case {
    std::string what;
    // Builds the graph around y = AddInPlace(a, operand); returns the values to check.
    std::function<void(IrBuilder&, int a, int r, int y)> extra;
    bool operand_is_input = false;
    bool twice = false;
  };
  const std::vector<float> relu = {0, 0, 0, 1, 2, 3}, sum = {1, 2, 3, 5, 7, 9};
  const std::vector<Case> cases = {
      {"r is also a graph output",
       [](IrBuilder& b, int, int r, int y) {
         b.g.outputs = {y, r};
       }},
      {"r is read by a later node",
       [](IrBuilder& b, int, int r, int y) {
         const int z = b.Value("z", {2, 3});
         b.Add("Relu", {r}, {z});
         b.g.outputs = {y, z};
       }},
      {"r has a live alias (Identity output kept as a graph output)",
       [](IrBuilder& b, int, int r, int y) {
         const int z = b.Value("z", {2, 3});
         // The alias is made before the sum, so r's buffer has two holders when it runs.
         Node id = b.g.nodes.back();
         b.g.nodes.pop_back();
         b.Add("Identity", {r}, {z});
         b.g.nodes.push_back(id);
         b.g.outputs = {y, z};
       }},
      {"the operand is a graph input", [](IrBuilder& b, int, int, int y) { b.g.outputs = {y}; }, true},
      {"the operand feeds the node twice", [](IrBuilder& b, int, int, int y) { b.g.outputs = {y}; }, false, true},
  };
  for (const Case& c : cases) {
    IrBuilder b;
    const int a = b.Input("a", Filled({2, 3}, 1.0f)), x = b.Input("x", Filled({2, 3}, -2.0f));
    const int r = b.Value("r", {2, 3}), y = b.Value("y", {2, 3});
    b.Add("Relu", {x}, {r});
    const int operand = c.operand_is_input ? x : r;
    AddInPlace(b, {c.twice ? operand : a, operand}, y);
    c.extra(b, a, r, y);
    int took = -1;
    Built bt = Build(b, &pool, 1, &took);
    ASSERT_TRUE(bt.ex) << c.what;
    auto got = bt.ex->Run(bt.feeds);
    ASSERT_TRUE(got.ok()) << c.what << ": " << got.status().ToString();
    EXPECT_EQ(took, 0) << c.what << ": the output was written over a buffer someone else sees";
    if (c.twice) {
      ExpectValues((*got)[0].tensor(), {0, 0, 0, 2, 4, 6}, c.what);
    } else if (c.operand_is_input) {
      ExpectValues((*got)[0].tensor(), {-1, 1, 3, 5, 7, 9}, c.what);
      ExpectValues(bt.feeds[1].tensor(), {-2, -1, 0, 1, 2, 3}, c.what + ": the caller's input");
    } else {
      ExpectValues((*got)[0].tensor(), sum, c.what);
      // The other reader (graph output, later node or alias) still sees relu(x) (+ Relu).
      ExpectValues((*got)[1].tensor(), relu, c.what + ": the other reader");
    }
  }
}

TEST(ExecutorInPlace, OutOfRangeDeclarationIsIgnored) {
  ThreadPool pool(1);
  for (int decl : {5, -3}) {
    IrBuilder b;
    const int a = b.Input("a", Filled({2, 3}, 1.0f)), x = b.Input("x", Filled({2, 3}, -2.0f));
    const int r = b.Value("r", {2, 3}), y = b.Value("y", {2, 3});
    b.Add("Relu", {x}, {r});
    AddInPlace(b, {a, r}, y);
    b.g.outputs = {y};
    int took = -1;
    Built bt = Build(b, &pool, decl, &took);
    ASSERT_TRUE(bt.ex);
    EXPECT_EQ(bt.ex->in_place_value(1), -1) << decl;
    auto got = bt.ex->Run(bt.feeds);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(took, 0) << decl;
    ExpectValues((*got)[0].tensor(), {1, 2, 3, 5, 7, 9}, "y");
  }
}

}  // namespace
}  // namespace strata
