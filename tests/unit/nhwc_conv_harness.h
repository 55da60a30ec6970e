// The NHWC conv kernels' test harness, shared by the conv test files: a naive NHWC
// convolution in double, the internal NhwcConv node the layout pass emits, and a run of the
// CPU kernel the registry picks for it (with the fused residual and input scale inputs).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/executor.h"
#include "core/kernel.h"
#include "core/layout_pass.h"
#include "core/tensor.h"
#include "core/threadpool.h"

namespace strata::nhwc_test {

inline Tensor Random(Shape shape, uint32_t seed, float scale = 1.0f) {
  Tensor t = Tensor::Allocate(DataType::kFloat, std::move(shape)).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.mutable_data<float>()[i] = dist(rng);
  return t;
}

struct ConvCase {
  int64_t n = 1, h = 5, w = 5, c = 3, m = 4, kh = 3, kw = 3;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1;
  std::vector<int64_t> pads = {0, 0, 0, 0};  // top, left, bottom, right
  bool bias = true, relu = false, residual = false;
  std::string auto_pad;  // "" = NOTSET
  int64_t group = 1;
  std::string act;  // fused "Silu" / "HardSwish" ("" = none; relu is the clamp)
};

inline int64_t OutSize(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe) {
  return (in + pb + pe - ((k - 1) * d + 1)) / s + 1;
}

// Naive NHWC conv in double: Y[n,oy,ox,o] = B[o] + sum W[o,i,ky,kx] X[n,iy,ix,i] (+ R), Relu.
inline Tensor NaiveConv(const ConvCase& cc, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* r) {
  const int64_t oh = OutSize(cc.h, cc.kh, cc.sh, cc.dh, cc.pads[0], cc.pads[2]);
  const int64_t ow = OutSize(cc.w, cc.kw, cc.sw, cc.dw, cc.pads[1], cc.pads[3]);
  Tensor y = Tensor::Allocate(DataType::kFloat, {cc.n, oh, ow, cc.m}).value();
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  for (int64_t n = 0; n < cc.n; ++n)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox)
        for (int64_t o = 0; o < cc.m; ++o) {
          double acc = b ? b->data<float>()[o] : 0.0;
          const int64_t cg = cc.c / cc.group, gi = o / (cc.m / cc.group);
          for (int64_t i = 0; i < cg; ++i)
            for (int64_t ky = 0; ky < cc.kh; ++ky)
              for (int64_t kx = 0; kx < cc.kw; ++kx) {
                const int64_t iy = oy * cc.sh - cc.pads[0] + ky * cc.dh, ix = ox * cc.sw - cc.pads[1] + kx * cc.dw;
                if (iy < 0 || iy >= cc.h || ix < 0 || ix >= cc.w) continue;
                acc += static_cast<double>(wp[((o * cg + i) * cc.kh + ky) * cc.kw + kx]) *
                       xp[((n * cc.h + iy) * cc.w + ix) * cc.c + gi * cg + i];
              }
          const int64_t at = ((n * oh + oy) * ow + ox) * cc.m + o;
          if (r) acc += r->data<float>()[at];
          if (cc.act == "Silu") acc = acc / (1.0 + std::exp(-acc));
          if (cc.act == "HardSwish") acc = acc * std::clamp(acc / 6.0 + 0.5, 0.0, 1.0);
          if (cc.relu && acc < 0) acc = 0;
          y.mutable_data<float>()[at] = static_cast<float>(acc);
        }
  return y;
}

struct KernelRun {
  Status create, compute;
  Tensor y;
  bool in_place = false;  // y was written over the residual's buffer
  std::string impl;       // the kernel's ImplName
  Tensor pooled;          // output 1 when asked for (pool_keepdims >= 0)
};

// Builds the internal NhwcConv node the layout pass would emit and runs the CPU kernel.
// in_place: the residual goes in as a copy whose buffer output 0 is offered, as the
// executor does for a dying residual (OpKernel::InPlaceInput); out.in_place says if taken.
// The internal NhwcConv node of cc's attributes (no inputs or outputs yet).
inline Node NhwcConvNode(const ConvCase& cc, const std::string& name = "conv0") {
  Node node;
  node.name = name;
  node.op_type = "NhwcConv";
  node.domain = kInternalDomain;
  node.opset = 1;
  node.attrs[kOriginalOpsetAttr] = Attribute::Int(13);
  node.attrs["kernel_shape"] = Attribute::Ints({cc.kh, cc.kw});
  node.attrs["strides"] = Attribute::Ints({cc.sh, cc.sw});
  node.attrs["dilations"] = Attribute::Ints({cc.dh, cc.dw});
  if (cc.auto_pad.empty()) {
    node.attrs["pads"] = Attribute::Ints({cc.pads[0], cc.pads[1], cc.pads[2], cc.pads[3]});
  } else {
    node.attrs["auto_pad"] = Attribute::String(cc.auto_pad);
  }
  if (cc.group != 1) node.attrs["group"] = Attribute::Int(cc.group);
  if (!cc.act.empty()) node.attrs["activation"] = Attribute::String(cc.act);
  if (cc.relu) {
    node.attrs["activation"] = Attribute::String("Relu");
    node.attrs["activation_min"] = Attribute::Float(0.0f);
    node.attrs["activation_max"] = Attribute::Float(INFINITY);
  }
  return node;
}

// Creates the registry's NhwcConv kernel for `node` (constants in g) and runs it on `vals`,
// in node.inputs order (an empty Value: absent). `offered`: the residual tensor given as
// input 3, whose buffer output 0 is offered, as the executor does for a dying residual
// (OpKernel::InPlaceInput); out.in_place says if the kernel took it.
inline KernelRun RunNhwcConvNode(const Node& node, const Graph& g, const std::vector<Value>& vals, ThreadPool* pool,
                                 const Tensor* offered = nullptr) {
  KernelRun out;
  const KernelDef* def = CpuKernels().Find(kInternalDomain, "NhwcConv", 1, DataType::kFloat);
  if (!def) {
    out.create = NotFound("no NhwcConv kernel");
    return out;
  }
  // The factory sees the same pool as Compute: the SGEMM conv serves every thread count.
  auto k = def->factory(KernelInit{node, g, pool, {}});
  out.create = k.status();
  if (!k.ok()) return out;
  out.impl = (*k)->ImplName();
  std::vector<const Value*> ptrs;
  for (const Value& v : vals) ptrs.push_back(v.empty() ? nullptr : &v);
  ptrs.resize(node.inputs.size(), nullptr);
  std::vector<Value> outs(node.outputs.size());
  if (offered) {
    EXPECT_EQ((*k)->InPlaceInput(), 3);
    outs[0] = Value(*offered);
    OfferedOutputs() = 1;
  }
  KernelContext ctx(node, ptrs, &outs, pool, DefaultAllocator(), nullptr);
  out.compute = (*k)->Compute(ctx);
  OfferedOutputs() = 0;
  if (out.compute.ok()) out.y = outs[0].tensor();
  if (out.compute.ok() && outs.size() > 1) out.pooled = outs[1].tensor();
  out.in_place = out.compute.ok() && offered && out.y.data<float>() == offered->data<float>();
  return out;
}

inline KernelRun RunNhwcConv(const ConvCase& cc, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* r,
                             ThreadPool* pool, const Tensor* bad_residual = nullptr, bool in_place = false,
                             const Tensor* scale = nullptr, int64_t pool_keepdims = -1) {
  KernelRun out;
  Graph g;
  Node node = NhwcConvNode(cc);
  const int vx = g.AddValue("x"), vw = g.AddValue("w");
  g.initializers[vw] = w;
  node.inputs = {vx, vw};
  std::vector<Value> vals = {Value(x), Value(w)};
  if (b || r || bad_residual || scale) {
    int vb = -1;
    if (b) {
      vb = g.AddValue("b");
      g.initializers[vb] = *b;
    }
    node.inputs.push_back(vb);
    vals.push_back(b ? Value(*b) : Value());
  }
  Tensor r_copy;
  if (r || bad_residual) {
    node.inputs.push_back(g.AddValue("r"));
    if (in_place) r_copy = *(bad_residual ? *bad_residual : *r).Clone();
    vals.push_back(Value(in_place ? r_copy : bad_residual ? *bad_residual : *r));
  } else if (scale) {
    node.inputs.push_back(-1);
    vals.emplace_back();
  }
  if (scale) {  // the fused per-channel input scale (input 4)
    node.inputs.push_back(g.AddValue("s"));
    vals.push_back(Value(*scale));
  }
  node.outputs = {g.AddValue("y")};
  if (pool_keepdims >= 0) {  // the depthwise conv's pooled second output (FuseDepthwiseGlobalPool)
    node.attrs["pool_keepdims"] = Attribute::Int(pool_keepdims);
    node.outputs.push_back(g.AddValue("pooled"));
  }
  return RunNhwcConvNode(node, g, vals, pool, in_place && r_copy.valid() ? &r_copy : nullptr);
}

inline void ExpectNear(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(ShapeToString(got.shape()), ShapeToString(want.shape())) << what;
  double scale = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i)
    scale = std::max(scale, std::fabs(static_cast<double>(want.data<float>()[i])));
  ASSERT_GT(scale, 0.0) << what << ": all-zero reference proves nothing";
  for (int64_t i = 0; i < want.num_elements(); ++i)
    ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 2e-5 * scale) << what << " at element " << i;
}

inline std::string Name(const ConvCase& c) {
  return "n" + std::to_string(c.n) + " " + std::to_string(c.h) + "x" + std::to_string(c.w) + " c" +
         std::to_string(c.c) + " m" + std::to_string(c.m) + " k" + std::to_string(c.kh) + "x" + std::to_string(c.kw) +
         " s" + std::to_string(c.sh) + "," + std::to_string(c.sw) + " d" + std::to_string(c.dh) + "," +
         std::to_string(c.dw) + " pads " + std::to_string(c.pads[0]) + std::to_string(c.pads[1]) +
         std::to_string(c.pads[2]) + std::to_string(c.pads[3]) + (c.relu ? " relu" : "") +
         (c.residual ? " residual" : "") + (c.bias ? "" : " nobias");
}

}  // namespace strata::nhwc_test
