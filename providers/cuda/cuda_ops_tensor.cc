// Shape and data-movement ops (Transpose, Concat, Slice, Gather, Cast, the metadata-only
// reshapes) and MatMulNBits over the prepacked weight blob.
#include <algorithm>
#include <limits>

#include "../common/shape_util.h"
#include "cuda_ops.h"

namespace strata_cuda {
namespace {

using strata_provider_common::ShapeStr;

const DTensor* In(const CNode& n, std::vector<DTensor>& vals, size_t k) {
  if (k >= n.inputs.size() || n.inputs[k] < 0 || !vals[n.inputs[k]].valid()) return nullptr;
  return &vals[n.inputs[k]];
}

bool Norm(int64_t axis, int64_t rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

// A view sharing x's memory with another shape (Reshape & co. never copy).
void View(const DTensor& x, std::vector<int64_t> shape, DTensor* out) {
  *out = x;
  out->shape = std::move(shape);
}

bool RunReshape(const CNode& n, const DTensor& x, std::vector<DTensor>& vals, DTensor* out, RunContext* ctx) {
  std::vector<int64_t> shape;
  if (n.op == "Identity") {
    shape = x.shape;
  } else if (n.op == "Flatten") {
    const int64_t r = static_cast<int64_t>(x.shape.size());
    int64_t axis = n.Int("axis", 1);
    if (axis < -r || axis > r) return ctx->Fail(n, "axis " + std::to_string(axis) + " is out of range");
    if (axis < 0) axis += r;
    int64_t a = 1, b = 1;
    for (int64_t d = 0; d < r; ++d) (d < axis ? a : b) *= x.shape[d];
    shape = {a, b};
  } else if (n.op == "Reshape") {
    const DTensor* s = In(n, vals, 1);
    if (!s) return ctx->Fail(n, "the shape input is missing");
    if (!ctx->HostInts(n, *s, "shape", &shape)) return false;
    int64_t known = 1, infer = -1;
    for (size_t k = 0; k < shape.size(); ++k) {
      if (shape[k] == 0) {
        if (k >= x.shape.size()) return ctx->Fail(n, "shape entry 0 at " + std::to_string(k) + " has no input dim");
        shape[k] = x.shape[k];
      }
      if (shape[k] == -1) {
        if (infer >= 0) return ctx->Fail(n, "more than one -1 in shape");
        infer = static_cast<int64_t>(k);
      } else if (shape[k] < 0) {
        return ctx->Fail(n, "negative dimension in shape");
      } else {
        known *= shape[k];
      }
    }
    if (infer >= 0) shape[infer] = known ? x.numel() / known : 0;
  } else {  // Squeeze / Unsqueeze: axes from the attribute (opset < 13) or input 1
    std::vector<int64_t> axes = n.Ints("axes");
    if (const DTensor* a = In(n, vals, 1); a && !ctx->HostInts(n, *a, "axes", &axes)) return false;
    const bool unsq = n.op == "Unsqueeze";
    const int64_t r = static_cast<int64_t>(x.shape.size()) + (unsq ? static_cast<int64_t>(axes.size()) : 0);
    std::vector<bool> mark(r, false);
    for (int64_t a : axes) {
      int64_t ax;
      if (!Norm(a, r, &ax) || mark[ax]) return ctx->Fail(n, "axes are out of range or repeated");
      mark[ax] = true;
    }
    if (unsq) {
      size_t src = 0;
      for (int64_t d = 0; d < r; ++d) shape.push_back(mark[d] ? 1 : x.shape[src++]);
    } else {
      for (int64_t d = 0; d < r; ++d) {
        if (axes.empty() ? x.shape[d] == 1 : mark[d]) {
          if (x.shape[d] != 1)
            return ctx->Fail(n, "cannot squeeze axis " + std::to_string(d) + " of size " + std::to_string(x.shape[d]));
          continue;
        }
        shape.push_back(x.shape[d]);
      }
    }
  }
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  if (total != x.numel() || shape.size() > kMaxRank)
    return ctx->Fail(n, "cannot reshape " + ShapeStr(x.shape) + " to " + ShapeStr(shape));
  View(x, shape, out);
  return true;
}

bool RunTranspose(const CNode& n, const DTensor& x, DTensor* out, RunContext* ctx) {
  const int r = static_cast<int>(x.shape.size());
  std::vector<int64_t> perm = n.Ints("perm");
  if (perm.empty())
    for (int d = r - 1; d >= 0; --d) perm.push_back(d);
  if (static_cast<int>(perm.size()) != r || r > kMaxRank) return ctx->Fail(n, "perm does not match the rank");
  std::vector<int64_t> in_strides(r, 1), shape(r);
  for (int d = r - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * x.shape[d + 1];
  StridedShape src;
  src.rank = r;
  std::vector<bool> seen(r, false);
  for (int d = 0; d < r; ++d) {
    if (perm[d] < 0 || perm[d] >= r || seen[perm[d]]) return ctx->Fail(n, "perm is not a permutation");
    seen[perm[d]] = true;
    shape[d] = src.dims[d] = x.shape[perm[d]];
    src.strides[d] = in_strides[perm[d]];
  }
  if (!ctx->Alloc(x.dtype, shape, out)) return false;
  return ctx->Cuda(
      LaunchStridedCopy(x.data, 0, src, out->data, static_cast<int>(DtypeSize(x.dtype)), ctx->slot->stream), n,
      "transpose");
}

bool RunSlice(const CNode& n, const DTensor& x, std::vector<DTensor>& vals, DTensor* out, RunContext* ctx) {
  const int64_t r = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.opset < 10) {
    starts = n.Ints("starts");
    ends = n.Ints("ends");
    axes = n.Ints("axes");
  } else {
    const DTensor* t[4] = {In(n, vals, 1), In(n, vals, 2), In(n, vals, 3), In(n, vals, 4)};
    std::vector<int64_t>* dst[4] = {&starts, &ends, &axes, &steps};
    const char* what[4] = {"starts", "ends", "axes", "steps"};
    for (int k = 0; k < 4; ++k)
      if (t[k] && !ctx->HostInts(n, *t[k], what[k], dst[k])) return false;
  }
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return ctx->Fail(n, "starts, ends, axes and steps must have the same length");
  std::vector<int64_t> begin(r, 0), step(r, 1), shape = x.shape;
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a;
    if (!Norm(axes[k], r, &a)) return ctx->Fail(n, "axis " + std::to_string(axes[k]) + " is out of range");
    const int64_t dim = x.shape[a], st = steps[k];
    if (st == 0) return ctx->Fail(n, "steps must not be 0");
    int64_t s = starts[k] < 0 ? starts[k] + dim : starts[k], e = ends[k] < 0 ? ends[k] + dim : ends[k];
    if (ends[k] <= std::numeric_limits<int64_t>::min() / 2) e = -1;  // INT64_MIN means "to the start"
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      shape[a] = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      shape[a] = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
    begin[a] = s;
    step[a] = st;
  }
  if (r > kMaxRank) return ctx->Fail(n, "rank above 8 is not handled");
  StridedShape src;
  src.rank = static_cast<int>(r);
  int64_t stride = 1, offset = 0;
  for (int64_t d = r - 1; d >= 0; --d) {
    src.dims[d] = shape[d];
    src.strides[d] = stride * step[d];
    offset += begin[d] * stride;
    stride *= x.shape[d];
  }
  if (!ctx->Alloc(x.dtype, shape, out)) return false;
  return ctx->Cuda(
      LaunchStridedCopy(x.data, offset, src, out->data, static_cast<int>(DtypeSize(x.dtype)), ctx->slot->stream), n,
      "slice");
}

bool RunConcat(const CNode& n, std::vector<DTensor>& vals, DTensor* out, RunContext* ctx) {
  std::vector<const DTensor*> ins;
  for (size_t k = 0; k < n.inputs.size(); ++k)
    if (const DTensor* t = In(n, vals, k)) ins.push_back(t);
  if (ins.empty()) return ctx->Fail(n, "no inputs");
  const int64_t r = static_cast<int64_t>(ins[0]->shape.size());
  int64_t axis;
  if (!Norm(n.Int("axis", 0), r, &axis)) return ctx->Fail(n, "axis is out of range");
  std::vector<int64_t> shape = ins[0]->shape;
  shape[axis] = 0;
  for (const DTensor* t : ins) {
    if (t->dtype != ins[0]->dtype || static_cast<int64_t>(t->shape.size()) != r)
      return ctx->Fail(n, "inputs differ in dtype or rank");
    for (int64_t d = 0; d < r; ++d)
      if (d != axis && t->shape[d] != ins[0]->shape[d])
        return ctx->Fail(n, "shapes " + ShapeStr(ins[0]->shape) + " and " + ShapeStr(t->shape) + " differ off axis");
    shape[axis] += t->shape[axis];
  }
  if (!ctx->Alloc(ins[0]->dtype, shape, out)) return false;
  const size_t es = DtypeSize(out->dtype);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (int64_t d = axis + 1; d < r; ++d) inner *= shape[d];
  size_t col = 0;
  const size_t row_bytes = static_cast<size_t>(shape[axis] * inner) * es;
  for (const DTensor* t : ins) {
    const size_t w = static_cast<size_t>(t->shape[axis] * inner) * es;
    if (w && outer) {
      // One 2-D copy per input: `outer` rows of its chunk into the output's rows.
      cudaError_t e = cudaMemcpy2DAsync(out->data + col, row_bytes, t->data, w, w, static_cast<size_t>(outer),
                                        cudaMemcpyDeviceToDevice, ctx->slot->stream);
      if (!ctx->Cuda(e, n, "concat copy")) return false;
    }
    col += w;
  }
  return true;
}

bool RunGather(const CNode& n, const DTensor& x, const DTensor* idx, DTensor* out, RunContext* ctx) {
  if (!idx || (idx->dtype != kInt64 && idx->dtype != kInt32)) return ctx->Fail(n, "indices must be int32 or int64");
  const int64_t r = static_cast<int64_t>(x.shape.size());
  int64_t axis;
  if (!Norm(n.Int("axis", 0), r, &axis)) return ctx->Fail(n, "axis is out of range");
  std::vector<int64_t> shape(x.shape.begin(), x.shape.begin() + axis);
  shape.insert(shape.end(), idx->shape.begin(), idx->shape.end());
  shape.insert(shape.end(), x.shape.begin() + axis + 1, x.shape.end());
  if (shape.size() > kMaxRank) return ctx->Fail(n, "output rank above 8 is not handled");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (int64_t d = axis + 1; d < r; ++d) inner *= x.shape[d];
  if (!ctx->Alloc(x.dtype, shape, out)) return false;
  int* flag = static_cast<int*>(ctx->slot->workspace_flag);
  cudaStream_t s = ctx->slot->stream;
  if (!ctx->Cuda(cudaMemsetAsync(flag, 0, sizeof(int), s), n, "gather") ||
      !ctx->Cuda(LaunchGather(x.data, static_cast<int>(DtypeSize(x.dtype)), outer, x.shape[axis], inner, idx->data,
                              idx->dtype == kInt32, idx->numel(), out->data, flag, s),
                 n, "gather"))
    return false;
  int bad = 0;
  cudaError_t e = cudaMemcpyAsync(&bad, flag, sizeof(int), cudaMemcpyDeviceToHost, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (!ctx->Cuda(e, n, "gather")) return false;
  if (bad) return ctx->Fail(n, "an index is out of range for axis size " + std::to_string(x.shape[axis]));
  return true;
}

}  // namespace

bool RunTensorOp(const CNode& n, std::vector<DTensor>& vals, DTensor* out, RunContext* ctx) {
  const DTensor* x = In(n, vals, 0);
  if (!x) return ctx->Fail(n, "input 0 is missing");
  if (DtypeSize(x->dtype) == 0 || x->dtype == kUint8) return ctx->Fail(n, "dtype is not handled");
  if (n.op == "Reshape" || n.op == "Flatten" || n.op == "Squeeze" || n.op == "Unsqueeze" || n.op == "Identity")
    return RunReshape(n, *x, vals, out, ctx);
  if (n.op == "Transpose") return RunTranspose(n, *x, out, ctx);
  if (n.op == "Slice") return RunSlice(n, *x, vals, out, ctx);
  if (n.op == "Concat") return RunConcat(n, vals, out, ctx);
  if (n.op == "Gather") return RunGather(n, *x, In(n, vals, 1), out, ctx);
  if (n.op == "Cast") {
    const int to = static_cast<int>(n.Int("to", 0));
    if (!ctx->Alloc(to, x->shape, out)) return false;
    return ctx->Cuda(LaunchCast(x->data, x->dtype, out->data, to, x->numel(), ctx->slot->stream), n, "cast");
  }
  return ctx->Fail(n, "op is not handled");
}

bool RunMatMulNBits(const CNode& n, std::vector<DTensor>& vals, DTensor* out, RunContext* ctx) {
  const DTensor* a = In(n, vals, 0);
  if (!a || a->dtype != kFloat) return ctx->Fail(n, "input A is missing or not float32");
  const NBitsPackParams& p = n.nbits;
  if (!n.packed) return ctx->Fail(n, "the packed weights are missing");
  if (a->shape.empty() || a->shape.back() != p.k)
    return ctx->Fail(n, "A " + ShapeStr(a->shape) + " does not end in K=" + std::to_string(p.k));
  // Dequantize into a scratch [K, N] per run (the resident copy stays 4/8-bit), then GEMM.
  DTensor w;
  if (!ctx->Alloc(kFloat, {p.k, p.n}, &w)) return false;
  if (!ctx->Cuda(LaunchDequantNBits(static_cast<const uint8_t*>(n.packed->ptr), p, reinterpret_cast<float*>(w.data),
                                    ctx->slot->stream),
                 n, "dequantize"))
    return false;
  std::vector<int64_t> shape = a->shape;
  shape.back() = p.n;
  if (!ctx->Alloc(kFloat, shape, out)) return false;
  const int64_t rows = a->numel() / p.k;
  if (rows > std::numeric_limits<int>::max() || p.n > std::numeric_limits<int>::max())
    return ctx->Fail(n, "dimensions exceed cuBLAS's 32-bit limits");
  if (rows == 0) return true;
  const float one = 1.0f, zero = 0.0f;
  cublasStatus_t s = cublasSgemm(
      ctx->slot->cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(p.n), static_cast<int>(rows), static_cast<int>(p.k),
      &one, reinterpret_cast<const float*>(w.data), static_cast<int>(p.n), reinterpret_cast<const float*>(a->data),
      static_cast<int>(p.k), &zero, reinterpret_cast<float*>(out->data), static_cast<int>(p.n));
  if (s != CUBLAS_STATUS_SUCCESS) return ctx->Fail(n, "cublasSgemm: " + CublasErrorText(s));
  return true;
}

}  // namespace strata_cuda
