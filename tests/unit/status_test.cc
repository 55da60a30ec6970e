#include "core/status.h"

#include <gtest/gtest.h>

#include "core/tensor.h"

namespace strata {
namespace {

Result<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd value ", x);
  return x / 2;
}

Status UseHalf(int x, int* out) {
  ASSIGN_OR_RETURN(int h, Half(x));
  *out = h;
  return Status::Ok();
}

TEST(Status, ResultPropagates) {
  int out = 0;
  EXPECT_TRUE(UseHalf(4, &out).ok());
  EXPECT_EQ(out, 2);
  Status st = UseHalf(3, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.ToString(), "INVALID_ARGUMENT: odd value 3");
}

TEST(Tensor, CheckedElementCountOverflow) {
  EXPECT_FALSE(CheckedNumElements({1LL << 40, 1LL << 40}).ok());
  EXPECT_FALSE(CheckedNumElements({-1, 3}).ok());
  EXPECT_EQ(*CheckedNumElements({2, 0, 7}), 0);
}

TEST(Tensor, ReshapeSharesBuffer) {
  Tensor t = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor r = t.Reshaped({3, 2});
  EXPECT_EQ(r.data<float>(), t.data<float>());
  EXPECT_EQ(r.dim(0), 3);
  auto c = t.Clone();
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->data<float>(), t.data<float>());
  EXPECT_EQ(c->data<float>()[5], 6.0f);
}

TEST(DType, HalfAndBFloat16RoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f) << f;
  }
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(1.0f)), 1.0f);
  // 1 + 2^-8 is halfway between two bf16 values: ties to even rounds down to 1.
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(1.00390625f)), 1.0f);
}

}  // namespace
}  // namespace strata
