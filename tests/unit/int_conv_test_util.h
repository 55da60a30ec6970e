// Helpers shared by the 8-bit conv kernel tests (int_conv_vnni_test.cc,
// int_conv_depthwise_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "kernel_harness.h"

namespace strata::testing {

// Random uint8 / int8 values over the whole range.
inline Tensor Q8(DataType dt, const Shape& shape, uint64_t seed) {
  return dt == DataType::kUInt8 ? RandomTensor(dt, shape, seed, 0, 255) : RandomTensor(dt, shape, seed, -128, 127);
}

// [N, C, H, W] <-> [N, H, W, C] of 8-bit tensors.
inline Tensor Permute(const Tensor& t, bool to_nhwc) {
  const Shape& s = t.shape();
  const int64_t n = s[0], c = to_nhwc ? s[1] : s[3], h = to_nhwc ? s[2] : s[1], w = to_nhwc ? s[3] : s[2];
  Tensor out = std::move(Tensor::Allocate(t.dtype(), to_nhwc ? Shape{n, h, w, c} : Shape{n, c, h, w})).value();
  const auto* src = static_cast<const uint8_t*>(t.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_mutable_data());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < h * w; ++p) {
        const int64_t nchw = (i * c + ch) * h * w + p, nhwc = (i * h * w + p) * c + ch;
        dst[to_nhwc ? nhwc : nchw] = src[to_nhwc ? nchw : nhwc];
      }
  return out;
}

// Runs the node with the inputs `consts` constant on the optimized entry (impl "avx512_vnni":
// the VNNI GEMM or the depthwise kernel) at 1 and 2 threads and on the reference entry: the
// outputs must be equal.
inline void ExpectSameAsReference(const OpSpec& spec, const std::vector<Tensor>& in, const std::vector<size_t>& consts,
                                  const std::string& what) {
  std::vector<Value> values;
  for (const Tensor& t : in) values.push_back(t.valid() ? Value(t) : Value());
  const KernelDef* fast = FindKernel(spec, values, false);
  ASSERT_TRUE(fast != nullptr);
  ASSERT_EQ(fast->impl, "avx512_vnni") << spec.op_type;
  for (int threads : {1, 2}) {
    RunOptions ro, fo;
    ro.want_reference = true;
    ro.constant_inputs = fo.constant_inputs = consts;
    fo.threads = threads;
    auto want = RunKernel(spec, in, ro);
    auto got = RunKernel(spec, in, fo);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(TensorsEqual((*want)[0], (*got)[0])) << what << " threads " << threads;
  }
}

}  // namespace strata::testing
