// com.microsoft MatMulNBits on the CPU: attribute/input validation, the reference
// kernel (dequantize, then a plain matmul: the test oracle), the one-time repacking and
// the optimized kernel's GEMV/GEMM drivers. The ISA inner loops are in matmul_nbits_avx.cc.
#include "cpu/matmul_nbits.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "core/threadpool.h"
#include "cpu/matmul_nbits_parallel.h"
#include "cpu/register.h"
#include "cpu/xnnpack_util.h"

namespace strata::nbits {

namespace {

bool IsPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

const Attribute* RequiredIntAttr(const Node& node, const char* name, Status* st) {
  const Attribute* a = node.FindAttr(name);
  if (!a) {
    *st = InvalidModel(node.Describe(), ": required attribute '", name, "' is missing");
  } else if (a->type != Attribute::Type::kInt) {
    *st = InvalidModel(node.Describe(), ": attribute '", name, "' must be an int");
    a = nullptr;
  }
  return a;
}

// Code i (0-based within the block) of block b of column n, from ORT's layout.
inline int CodeAt(const uint8_t* b, const Params& p, int64_t n, int64_t blk, int64_t i) {
  const uint8_t* blob = b + (n * p.n_blocks + blk) * p.blob;
  if (p.bits == 8) return blob[i];
  uint8_t byte = blob[i >> 1];
  return (i & 1) ? byte >> 4 : byte & 0x0F;
}

// Zero point of block blk of column n as a float (default 2^(bits-1)).
inline float ZeroPointAt(const Params& p, const Tensor* zp, int64_t n, int64_t blk) {
  if (!zp) return static_cast<float>(1 << (p.bits - 1));
  if (zp->dtype() == DataType::kFloat) return zp->data<float>()[n * p.n_blocks + blk];
  const uint8_t* z = zp->data<uint8_t>();
  if (p.bits == 8) return z[n * p.n_blocks + blk];
  const int64_t row = (p.n_blocks + 1) / 2;
  uint8_t byte = z[n * row + blk / 2];
  return (blk & 1) ? byte >> 4 : byte & 0x0F;
}

}  // namespace

Result<Params> ParseParams(const Node& node) {
  Params p;
  Status st;
  const Attribute* k = RequiredIntAttr(node, "K", &st);
  if (!k) return st;
  const Attribute* n = RequiredIntAttr(node, "N", &st);
  if (!n) return st;
  const Attribute* bs = RequiredIntAttr(node, "block_size", &st);
  if (!bs) return st;
  if (const Attribute* wp = node.FindAttr("weight_prepacked")) {
    std::string layout = wp->type == Attribute::Type::kString ? wp->s : std::to_string(wp->i);
    if (layout.empty() || layout == "0") layout = "an accelerator";
    return Unsupported(node.Describe(), ": attribute 'weight_prepacked': B is prepacked for ", layout,
                       "; the CPU kernel needs the standard layout (quantize the original model again, "
                       "or run it on that provider)");
  }
  p.K = k->i;
  p.N = n->i;
  p.block_size = bs->i;
  p.bits = node.GetInt("bits", 4);
  p.accuracy_level = node.GetInt("accuracy_level", 0);
  if (p.K <= 0) return InvalidModel(node.Describe(), ": attribute 'K' must be positive, got ", p.K);
  if (p.N <= 0) return InvalidModel(node.Describe(), ": attribute 'N' must be positive, got ", p.N);
  if (p.bits != 4 && p.bits != 8)
    return Unsupported(node.Describe(), ": attribute 'bits' must be 4 or 8, got ", p.bits);
  if (p.block_size < 16 || !IsPowerOfTwo(p.block_size))
    return InvalidModel(node.Describe(), ": attribute 'block_size' must be a power of two >= 16, got ", p.block_size);
  if (p.accuracy_level < 0 || p.accuracy_level > 4)
    return InvalidModel(node.Describe(), ": attribute 'accuracy_level' must be in [0, 4], got ", p.accuracy_level);
  if (p.K > (int64_t{1} << 40) || p.N > (int64_t{1} << 40))
    return InvalidModel(node.Describe(), ": attributes 'K'=", p.K, " and 'N'=", p.N, " are too large");
  p.n_blocks = (p.K + p.block_size - 1) / p.block_size;
  p.blob = p.block_size * p.bits / 8;
  return p;
}

Status CheckInputs(const Node& node, const Params& p, const Inputs& in) {
  if (!in.b) return InvalidModel(node.Describe(), ": input 1 (B) is required");
  if (!in.scales) return InvalidModel(node.Describe(), ": input 2 (scales) is required");
  const Tensor& b = *in.b;
  if (b.dtype() != DataType::kUInt8)
    return InvalidModel(node.Describe(), ": B must be uint8, got ", DataTypeName(b.dtype()));
  if (b.rank() != 3)
    return InvalidModel(node.Describe(), ": B must be 3-D [N, n_blocks, blob], got ", ShapeToString(b.shape()));
  if (b.dim(0) != p.N)
    return InvalidModel(node.Describe(), ": attribute 'N'=", p.N, " does not match B of shape ",
                        ShapeToString(b.shape()));
  if (b.dim(1) != p.n_blocks)
    return InvalidModel(node.Describe(), ": attributes 'K'=", p.K, " and 'block_size'=", p.block_size, " need ",
                        p.n_blocks, " blocks per column, but B has shape ", ShapeToString(b.shape()));
  if (b.dim(2) != p.blob)
    return InvalidModel(node.Describe(), ": attribute 'block_size'=", p.block_size, " with 'bits'=", p.bits, " needs ",
                        p.blob, " bytes per block, but B has shape ", ShapeToString(b.shape()));
  const Tensor& s = *in.scales;
  if (s.dtype() != DataType::kFloat)
    return Unsupported(node.Describe(), ": scales must be float32, got ", DataTypeName(s.dtype()));
  const bool s_shape_ok = (s.rank() == 1) || (s.rank() == 2 && s.dim(0) == p.N);
  if (!s_shape_ok || s.num_elements() != p.N * p.n_blocks)
    return InvalidModel(node.Describe(), ": scales must have N*n_blocks = ", p.N, "*", p.n_blocks, " = ",
                        p.N * p.n_blocks, " elements (attributes 'N', 'K', 'block_size'), got shape ",
                        ShapeToString(s.shape()));
  if (in.zero_points) {
    const Tensor& z = *in.zero_points;
    if (z.dtype() == DataType::kUInt8) {
      const int64_t want = p.N * ((p.n_blocks * p.bits + 7) / 8);
      if (z.num_elements() != want)
        return InvalidModel(node.Describe(), ": packed uint8 zero_points must have N*ceil(n_blocks*bits/8) = ", want,
                            " elements, got shape ", ShapeToString(z.shape()));
    } else if (z.dtype() == DataType::kFloat) {
      if (z.num_elements() != p.N * p.n_blocks)
        return InvalidModel(node.Describe(), ": float zero_points must have N*n_blocks = ", p.N * p.n_blocks,
                            " elements, got shape ", ShapeToString(z.shape()));
    } else {
      return InvalidModel(node.Describe(), ": zero_points must be uint8 or float32, got ", DataTypeName(z.dtype()));
    }
  }
  if (in.g_idx) {
    const Tensor& g = *in.g_idx;
    if (g.dtype() != DataType::kInt32 || g.num_elements() != p.K)
      return InvalidModel(node.Describe(), ": g_idx must be int32 with K=", p.K, " elements, got ",
                          DataTypeName(g.dtype()), ShapeToString(g.shape()));
    for (int64_t k = 0; k < p.K; ++k)
      if (g.data<int32_t>()[k] != k / p.block_size)
        return Unsupported(node.Describe(), ": g_idx reorders K (g_idx[", k, "]=", g.data<int32_t>()[k], ", expected ",
                           k / p.block_size, "); only the identity order is supported");
  }
  if (in.bias) {
    if (in.bias->dtype() != DataType::kFloat || in.bias->num_elements() != p.N || in.bias->rank() != 1)
      return InvalidModel(node.Describe(), ": bias must be float32 [N] with N=", p.N, ", got ",
                          DataTypeName(in.bias->dtype()), ShapeToString(in.bias->shape()));
  }
  return Status::Ok();
}

std::vector<float> Dequantize(const Params& p, const Inputs& in) {
  std::vector<float> w(static_cast<size_t>(p.N * p.K));
  const uint8_t* b = in.b->data<uint8_t>();
  const float* s = in.scales->data<float>();
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t k = 0; k < p.K; ++k) {
      const int64_t blk = k / p.block_size;
      const float zp = ZeroPointAt(p, in.zero_points, n, blk);
      w[n * p.K + k] = (static_cast<float>(CodeAt(b, p, n, blk, k % p.block_size)) - zp) * s[n * p.n_blocks + blk];
    }
  return w;
}

namespace {

// The int8 kernel's layout (see Packed in matmul_nbits.h).
Packed PackInt8(const Params& p, const Inputs& in, Packed w) {
  constexpr int64_t kGroup = 4;
  const int64_t groups = (p.N + kGroup - 1) / kGroup, bs = p.block_size;
  const int64_t step_bytes = kInt8Step * p.bits / 8;
  w.int8_layout = true;
  w.steps = w.k_pad / kInt8Step;
  w.lane_slots = bs == 16 ? 32 : 16;
  // Blocks of a step or more: one entry per block and column (a step lies in one block).
  const bool wide = bs >= kInt8Step;
  w.group_slots = wide ? w.k_pad / bs * kGroup : w.steps * w.lane_slots;
  w.codes.assign(static_cast<size_t>(groups * w.steps * kGroup * step_bytes), 0);
  const size_t slots = static_cast<size_t>(groups * w.group_slots);
  // Padding slots (past K, past N) get scale 0 and zero point 0: they add nothing.
  w.scale.assign(slots, 0.0f);
  const bool float_zp = in.zero_points && in.zero_points->dtype() == DataType::kFloat;
  if (float_zp) {
    w.zpf.assign(slots, 0.0f);
  } else {
    w.zp8.assign(slots, 0);
  }
  const uint8_t* b = in.b->data<uint8_t>();
  const float* s = in.scales->data<float>();
  for (int64_t n = 0; n < p.N; ++n) {
    const int64_t g = n / kGroup, c = n % kGroup;
    for (int64_t k = 0; k < p.K; ++k) {
      const int code = CodeAt(b, p, n, k / bs, k % bs);
      const int64_t st = k / kInt8Step, r = k % kInt8Step, i = r / 32, h = (r % 32) / 16, t = r % 16;
      uint8_t* dst = w.codes.data() + ((g * w.steps + st) * kGroup + c) * step_bytes;
      if (p.bits == 8) {
        dst[64 * h + 16 * i + t] = static_cast<uint8_t>(code);
      } else {
        dst[16 * i + t] |= static_cast<uint8_t>(h == 0 ? code : code << 4);
      }
    }
    for (int64_t e = 0; e < w.group_slots; e += kGroup) {
      // Wide: entry 4 blk. Otherwise slot 4i (+16h for blocks of 16) of step st covers codes
      // starting at step offset 32i (+16h).
      const int64_t st = e / w.lane_slots, slot = e % w.lane_slots, i = (slot % 16) / 4, h = slot / 16;
      const int64_t blk = wide ? e / kGroup : (st * kInt8Step + 32 * i + 16 * h) / bs;
      if (blk >= p.n_blocks) continue;
      const size_t at = static_cast<size_t>(g * w.group_slots + e + c);
      w.scale[at] = s[n * p.n_blocks + blk];
      const float zp = ZeroPointAt(p, in.zero_points, n, blk);
      if (float_zp) {
        w.zpf[at] = zp;
      } else {
        w.zp8[at] = static_cast<uint8_t>(zp);
      }
    }
  }
  w.gemv_streams = static_cast<int64_t>(w.bytes()) > kGemvStreamsBytes;
  w.gemv_serial = static_cast<int64_t>(w.bytes()) < kGemvParallelMinBytes;
  return w;
}

}  // namespace

Packed Pack(const Params& p, const Inputs& in, bool int8) {
  Packed w;
  w.p = p;
  // Whole blocks, then whole int8 steps (the padding blocks have zero scale and offset).
  w.k_pad = (p.n_blocks * p.block_size + kInt8Step - 1) / kInt8Step * kInt8Step;
  const int64_t nb_pad = w.k_pad / p.block_size;
  w.col_bytes = w.k_pad * p.bits / 8;
  w.nb_stride = (nb_pad + 15) / 16 * 16;
  w.bias.assign(static_cast<size_t>(p.N), 0.0f);
  if (in.bias) std::memcpy(w.bias.data(), in.bias->data<float>(), p.N * sizeof(float));
  if (int8) return PackInt8(p, in, std::move(w));
  w.codes.assign(static_cast<size_t>(p.N * w.col_bytes), 0);
  w.scale.assign(static_cast<size_t>(p.N * w.nb_stride), 0.0f);
  w.offset.assign(static_cast<size_t>(p.N * w.nb_stride), 0.0f);
  const uint8_t* b = in.b->data<uint8_t>();
  const float* s = in.scales->data<float>();
  for (int64_t n = 0; n < p.N; ++n) {
    uint8_t* col = w.codes.data() + n * w.col_bytes;
    for (int64_t k = 0; k < p.K; ++k) {
      const int code = CodeAt(b, p, n, k / p.block_size, k % p.block_size);
      if (p.bits == 8) {
        col[k] = static_cast<uint8_t>(code);
      } else {
        const int64_t chunk = k / 32, j = k % 32;
        uint8_t& byte = col[chunk * 16 + (j & 15)];
        byte |= static_cast<uint8_t>(j < 16 ? code : code << 4);
      }
    }
    for (int64_t blk = 0; blk < p.n_blocks; ++blk) {
      const float sc = s[n * p.n_blocks + blk];
      w.scale[n * w.nb_stride + blk] = sc;
      w.offset[n * w.nb_stride + blk] = -ZeroPointAt(p, in.zero_points, n, blk) * sc;
    }
  }
  w.gemv_streams = static_cast<int64_t>(w.bytes()) > kGemvStreamsBytes;
  w.gemv_serial = static_cast<int64_t>(w.bytes()) < kGemvParallelMinBytes;
  return w;
}

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    default:
      return "scalar";
  }
}

Isa ResolveIsa(const char* force) {
  __builtin_cpu_init();
  const std::string f = force ? force : "";
  if (f != "avx2" && f != "scalar" && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return Isa::kAvx512;
  if (f != "scalar" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
  return Isa::kScalar;
}

namespace {

constexpr int64_t kKc = 512;  // K chunk of the GEMM: an A block of M x kc stays in L2
// Rows below which the 4-bit AVX-512 GEMM uses table-lookup register tiles, not the SGEMM:
// with few rows, dequantizing and transposing panels for the SGEMM micro-kernel costs more
// than the rows reuse (M = 16: ~25% slower, kernel bench).
constexpr int64_t kTableGemmMaxRows = 32;

using GemvFn = void (*)(const Packed&, const float*, const float*, float*, int64_t, int64_t);
using PanelFn = void (*)(const Packed&, int64_t, int64_t, int64_t, float*);
using TileFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t);

struct IsaFns {
  GemvFn gemv;
  PanelFn panel;
  TileFn tile;
};
IsaFns FnsFor(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return {GemvAvx512, DequantPanelAvx512, DotTileAvx512};
    case Isa::kAvx2:
      return {GemvAvx2, DequantPanelAvx2, DotTileAvx2};
    default:
      return {GemvScalar, DequantPanelScalar, DotTileScalar};
  }
}

}  // namespace

namespace {

enum class Path { kTable, kGemv, kGemmAvx512, kGemm };
// Which fp32 kernel PackedMatMul runs for M rows (M > 0).
Path PathFor(Isa isa, const Packed& w, int64_t M) {
  // Few rows, 4 bits, AVX-512: register tiles dequantize each weight once for all rows
  // (M = 2, 3 included: the GEMV would stream the weights once per row).
  if (isa == Isa::kAvx512 && w.p.bits == 4 && M >= 2 && M < kTableGemmMaxRows) return Path::kTable;
  if (M < 4) return Path::kGemv;
  return isa == Isa::kAvx512 ? Path::kGemmAvx512 : Path::kGemm;
}

// Floats of A rows zero-padded to k_pad (none when K needs no padding).
int64_t PadFloats(const Packed& w, int64_t M) { return w.k_pad != w.p.K ? M * w.k_pad : 0; }

// Rounds a scratch offset up to 64 bytes, so every part of the scratch stays aligned.
int64_t Align16(int64_t floats) { return (floats + 15) / 16 * 16; }

}  // namespace

int64_t ScratchFloats(const Packed& w, Isa isa, int64_t M, bool int8) {
  if (M <= 0) return 0;
  if (int8 && w.int8_layout) return QuantAFloats(w, M);
  const int64_t pad = Align16(PadFloats(w, M));
  switch (PathFor(isa, w, M)) {
    case Path::kGemv:
      return pad + w.nb_stride;  // the row's per-block sums
    case Path::kGemmAvx512:
      return pad + GemmAvx512ScratchFloats(w, M);
    default:
      return pad;
  }
}

void PackedMatMul(Isa isa, const Packed& w, const float* a, int64_t M, float* y, ThreadPool* pool, float* scratch) {
  const Params& p = w.p;
  const IsaFns fns = FnsFor(isa);
  if (M <= 0) return;
  if (M == 1 && w.gemv_serial) pool = nullptr;
  std::vector<float> own;  // callers without scratch (tests, benchmarks)
  if (!scratch) {
    own.resize(static_cast<size_t>(ScratchFloats(w, isa, M, false)));
    scratch = own.data();
  }
  // A rows zero-padded to k_pad: padded codes then multiply zeros.
  const float* ap = a;
  if (w.k_pad != p.K) {
    for (int64_t m = 0; m < M; ++m) {
      float* row = scratch + m * w.k_pad;
      std::memcpy(row, a + m * p.K, p.K * sizeof(float));
      std::fill(row + p.K, row + w.k_pad, 0.0f);
    }
    ap = scratch;
  }
  float* rest = scratch + Align16(PadFloats(w, M));
  const Path path = PathFor(isa, w, M);
  if (path == Path::kTable) return PackedGemmTableAvx512(w, ap, M, y, pool);
  if (path == Path::kGemv) {
    // GEMV per row: stream the codes once per row, dequantize in registers.
    float* asum = rest;
    std::fill_n(asum, w.nb_stride, 0.0f);
    for (int64_t m = 0; m < M; ++m) {
      const float* row = ap + m * w.k_pad;
      for (int64_t blk = 0; blk < p.n_blocks; ++blk) {
        float s = 0;
        for (int64_t k = blk * p.block_size; k < std::min(p.K, (blk + 1) * p.block_size); ++k) s += row[k];
        asum[blk] = s;
      }
      float* yr = y + m * p.N;
      const int64_t groups = (p.N + 3) / 4;
      // Each CPU streams the same columns every run, from its own caches.
      ParallelRangeByCpu(pool, groups, 8, [&](int64_t g0, int64_t g1) {
        const int64_t n1 = std::min(p.N, g1 * 4);
        fns.gemv(w, row, asum, yr, g0 * 4, n1);
        for (int64_t n = g0 * 4; n < n1; ++n) yr[n] += w.bias[n];
      });
    }
    return;
  }
  if (path == Path::kGemmAvx512) return PackedGemmAvx512(w, ap, M, y, pool, rest);
  // GEMM: per group of 4 columns and K chunk, dequantize a small fp32 panel and run
  // register-blocked dot tiles over all rows; threads own disjoint column groups.
  for (int64_t m = 0; m < M; ++m) std::memcpy(y + m * p.N, w.bias.data(), p.N * sizeof(float));
  const int64_t groups = (p.N + 3) / 4;
  ParallelRange(pool, groups, 4, [&](int64_t g0, int64_t g1) {
    alignas(64) float panel[4 * kKc];  // 8 KiB, on the stack: a task allocates nothing
    for (int64_t k0 = 0; k0 < w.k_pad; k0 += kKc) {
      const int64_t kc = std::min(kKc, w.k_pad - k0);
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t n0 = g * 4, cols = std::min<int64_t>(4, p.N - n0);
        fns.panel(w, n0, k0, kc, panel);
        for (int64_t m0 = 0; m0 < M; m0 += 4)
          fns.tile(ap + m0 * w.k_pad + k0, w.k_pad, std::min<int64_t>(4, M - m0), panel, kc, cols, y + m0 * p.N + n0,
                   p.N);
      }
    }
  });
}

bool UseInt8Path(const Params& p, Isa isa) { return p.accuracy_level == 4 && isa == Isa::kAvx512 && HasAvx512Vnni(); }

void PackedMatMulInt8(const Packed& w, const float* a, int64_t M, float* y, ThreadPool* pool, float* scratch) {
  const Params& p = w.p;
  if (M <= 0) return;
  // The fp32 kernels' layout: compute in fp32 rather than misread it.
  if (!w.int8_layout) return PackedMatMul(Isa::kAvx512, w, a, M, y, pool, scratch);
  if (M == 1 && w.gemv_serial) pool = nullptr;
  std::vector<float> own;  // callers without scratch (tests, benchmarks)
  if (!scratch) {
    own.resize(static_cast<size_t>(QuantAFloats(w, M)));
    scratch = own.data();
  }
  QuantA qa;
  QuantizeA(w, a, M, scratch, &qa);
  // Threads own disjoint groups of 4 columns; each group runs over all rows with the
  // group's codes in L1 and A's int8 rows in L2.
  const int64_t groups = (p.N + 3) / 4;
  // Pack's gemv_streams is the one-thread choice. The CPU split keeps each thread's share of
  // the weights in its own CPU's caches, where the 1-group GEMV is the faster one, so with
  // T threads 4 groups go side by side only when a share (bytes / T) is past the threshold.
  // int8 4096^2 GEMV (18.5 MiB), 2 threads, 6 alternating `strata bench` processes: median
  // 0.128 ms (1 group) vs 0.158 (4 groups) with the CPU split; 0.151 before either change.
  const int64_t threads = pool ? pool->num_threads() : 1;
  const bool streams =
      w.gemv_streams && (threads == 1 || static_cast<int64_t>(w.bytes()) / threads > kGemvStreamsBytes);
  const auto run = [&](int64_t g0, int64_t g1) { MatMulInt8Vnni(w, qa, g0 * 4, std::min(p.N, g1 * 4), y, streams); };
  // One row tile (a GEMV, M < 4) streams the weights once: each CPU the same columns every
  // run, from its own caches (matmul_nbits_parallel.h).
  if (M < 4) return ParallelRangeByCpu(pool, groups, 16, run);
  ParallelRange(pool, groups, 2, run);
}

namespace {

Inputs GatherInputs(const std::function<const Tensor*(size_t)>& get) {
  Inputs in;
  in.b = get(1);
  in.scales = get(2);
  in.zero_points = get(3);
  in.g_idx = get(4);
  in.bias = get(5);
  return in;
}

Result<Inputs> RunInputs(KernelContext& ctx, const Params& p, Shape* out, int64_t* M) {
  const Node& node = ctx.node();
  const Tensor* a = ctx.input(0);
  if (!a) return InvalidArgument(node.Describe(), ": input 0 (A) is required");
  if (a->dtype() != DataType::kFloat)
    return Unsupported(node.Describe(), ": A must be float32, got ", DataTypeName(a->dtype()));
  if (a->rank() < 1 || a->shape().back() != p.K)
    return InvalidArgument(node.Describe(), ": A of shape ", ShapeToString(a->shape()),
                           " does not end in attribute 'K'=", p.K);
  *out = a->shape();
  out->back() = p.N;
  *M = a->num_elements() / p.K;
  Inputs in = GatherInputs([&](size_t i) { return ctx.input(i); });
  RETURN_IF_ERROR(CheckInputs(node, p, in));
  return in;
}

Status ReferenceCompute(KernelContext& ctx, const Params& p) {
  Shape out;
  int64_t M = 0;
  ASSIGN_OR_RETURN(Inputs in, RunInputs(ctx, p, &out, &M));
  const std::vector<float> w = Dequantize(p, in);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, out));
  const float* a = ctx.input(0)->data<float>();
  float* yp = y->mutable_data<float>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < p.N; ++n) {
      float acc = in.bias ? in.bias->data<float>()[n] : 0.0f;
      for (int64_t k = 0; k < p.K; ++k) acc += a[m * p.K + k] * w[n * p.K + k];
      yp[m * p.N + n] = acc;
    }
  return Status::Ok();
}

Result<Params> CreateCheck(const KernelInit& init) {
  ASSIGN_OR_RETURN(Params p, ParseParams(init.node));
  Inputs in = GatherInputs([&](size_t i) { return init.constant_input(i); });
  // Validate every constant now (session creation); run-time inputs are checked per run.
  if (init.has_input(4) && !in.g_idx)
    return Unsupported(init.node.Describe(), ": g_idx must be a constant (only the identity order is supported)");
  // Inputs computed at run time are stood in for by shape-only placeholders here.
  const Tensor dummy_b = Tensor::Wrap(DataType::kUInt8, {p.N, p.n_blocks, p.blob}, nullptr);
  const Tensor dummy_s = Tensor::Wrap(DataType::kFloat, {p.N * p.n_blocks}, nullptr);
  Inputs chk = in;
  if (!chk.b) chk.b = &dummy_b;
  if (!chk.scales) chk.scales = &dummy_s;
  RETURN_IF_ERROR(CheckInputs(init.node, p, chk));
  return p;
}

class RefKernel final : public OpKernel {
 public:
  explicit RefKernel(Params p) : p_(p) {}
  Status Compute(KernelContext& ctx) const override { return ReferenceCompute(ctx, p_); }

 private:
  Params p_;
};

class PackedKernel final : public OpKernel {
 public:
  PackedKernel(Packed w, Isa isa, bool int8) : w_(std::move(w)), isa_(isa), int8_(int8) {}
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a = ctx.input(0);
    if (!a) return InvalidArgument(node.Describe(), ": input 0 (A) is required");
    if (a->dtype() != DataType::kFloat)
      return Unsupported(node.Describe(), ": A must be float32, got ", DataTypeName(a->dtype()));
    if (a->rank() < 1 || a->shape().back() != w_.p.K)
      return InvalidArgument(node.Describe(), ": A of shape ", ShapeToString(a->shape()),
                             " does not end in attribute 'K'=", w_.p.K);
    Shape out = a->shape();
    out.back() = w_.p.N;
    const int64_t M = a->num_elements() / w_.p.K;
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, out));
    // From the session allocator: the same buffer again on every run of this M once warm.
    Tensor scratch;
    const int64_t scratch_floats = ScratchFloats(w_, isa_, M, int8_);
    if (scratch_floats > 0) {
      ASSIGN_OR_RETURN(scratch, AllocateScratch(scratch_floats, ctx.allocator(), node));
    }
    float* sp = scratch.valid() ? scratch.mutable_data<float>() : nullptr;
    // A long prompt's rows (M x N x K: 16384 x 4096 x 4096 took 3 s) run in chunks of about
    // 2^34 multiply-adds (~0.1 s), with the run's deadline and terminate calls read between
    // chunks. Each row's result is the same whatever the chunk: A is quantized per row and
    // block, and chunks have at least 1024 rows, so they take the same path as the whole
    // (every path for 32 rows or more is the GEMM, whose rows do not depend on each other).
    // Each chunk dequantizes the weights' panels again: 256-row chunks cost 7% at 1024 x 4096
    // x 4096 (fp32, 2 threads), 1024-row ones keep that under 2%.
    const int64_t rows = StopChunkRows(M);
    KernelStop stop(node);
    for (int64_t m0 = 0, mc = 0; m0 < M; m0 += mc) {
      if (m0 > 0 && !stop.CheckNow()) return stop.status();
      mc = M - m0 < 2 * rows ? M - m0 : rows;  // the last chunk takes the remainder
      const float* ap = a->data<float>() + m0 * w_.p.K;
      float* yp = y->mutable_data<float>() + m0 * w_.p.N;
      if (int8_) {
        PackedMatMulInt8(w_, ap, mc, yp, ctx.pool(), sp);
      } else {
        PackedMatMul(isa_, w_, ap, mc, yp, ctx.pool(), sp);
      }
    }
    return Status::Ok();
  }

  // Rows per chunk: all of M unless the product passes 2^34 multiply-adds with at least
  // 2048 rows; then about 2^34 multiply-adds' worth, at least 1024 rows (the last chunk takes
  // the remainder, so it has one to two chunks' rows).
  int64_t StopChunkRows(int64_t M) const {
    constexpr int64_t kChunkMacs = int64_t{1} << 34, kMinRows = 1024;
    const double macs = static_cast<double>(M) * static_cast<double>(w_.p.N) * static_cast<double>(w_.p.K);
    if (M < 2 * kMinRows || macs <= static_cast<double>(kChunkMacs)) return std::max<int64_t>(M, 1);
    const int64_t per_row = std::max<int64_t>(1, w_.p.N * w_.p.K);
    return std::max<int64_t>(kMinRows, kChunkMacs / per_row);
  }

 private:
  Packed w_;
  Isa isa_;
  bool int8_;
};

Result<std::unique_ptr<OpKernel>> MakeRef(const KernelInit& init) {
  ASSIGN_OR_RETURN(Params p, CreateCheck(init));
  return std::unique_ptr<OpKernel>(std::make_unique<RefKernel>(p));
}

Result<std::unique_ptr<OpKernel>> MakeOptimized(const KernelInit& init) {
  ASSIGN_OR_RETURN(Params p, CreateCheck(init));
  Inputs in = GatherInputs([&](size_t i) { return init.constant_input(i); });
  const bool zp_ok = !init.has_input(3) || in.zero_points;
  const bool bias_ok = !init.has_input(5) || in.bias;
  // Weights computed at run time cannot be repacked once: dequantize per run instead.
  if (!in.b || !in.scales || !zp_ok || !bias_ok) return std::unique_ptr<OpKernel>(std::make_unique<RefKernel>(p));
  const Isa isa = ResolveIsa(std::getenv("STRATA_FORCE_ISA"));
  // accuracy_level 4 allows int8 activations; only AVX-512 VNNI has the int8 path
  // (otherwise, or when STRATA_FORCE_ISA caps the ISA, level 4 computes in fp32).
  const bool int8 = UseInt8Path(p, isa);
  return std::unique_ptr<OpKernel>(std::make_unique<PackedKernel>(Pack(p, in, int8), isa, int8));
}

}  // namespace
}  // namespace strata::nbits

namespace strata {

void RegisterQuantWeightKernels(KernelRegistry& r) {
  // type_input -1: A's type is often unknown (libonnx cannot infer com.microsoft ops), and
  // the factory must still run at session creation so bad weights fail early.
  r.Register({.domain = "com.microsoft",
              .op_type = "MatMulNBits",
              .since_version = 1,
              .types = {},
              .type_input = -1,
              .factory = nbits::MakeRef});
  r.Register({.domain = "com.microsoft",
              .op_type = "MatMulNBits",
              .since_version = 1,
              .types = {},
              .type_input = -1,
              .factory = nbits::MakeOptimized,
              .reference = false,
              .impl = nbits::IsaName(nbits::ResolveIsa(std::getenv("STRATA_FORCE_ISA")))});
}

}  // namespace strata
