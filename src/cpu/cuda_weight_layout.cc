// CPU reference packer for the CUDA MatMulNBits layout; see cuda_weight_layout.h and
// docs/cuda-weight-layout.md (the doc is the specification, this file the reference).
#include "cpu/cuda_weight_layout.h"

#include <cstring>

namespace strata::cpu {
namespace {

struct Geometry {
  int64_t n_blocks, words_per_col, tiles, entries;
  size_t words_off, scales_off, zp_off, total;
};

Geometry Geom(const CudaWeightLayout& l, int bits, int64_t n, int64_t k, int64_t block) {
  Geometry g;
  g.n_blocks = (k + block - 1) / block;
  g.words_per_col = g.n_blocks * block * bits / 32;
  g.tiles = (n + l.tile_n - 1) / l.tile_n;
  g.entries = g.tiles * g.n_blocks * l.tile_n;
  g.words_off = CudaWeightLayout::kHeaderBytes;
  g.scales_off = g.words_off + static_cast<size_t>(g.tiles * g.words_per_col * l.tile_n) * 4;
  g.zp_off = g.scales_off + static_cast<size_t>(g.entries) * 4;
  g.total = g.zp_off + static_cast<size_t>((g.entries + 3) / 4 * 4);
  return g;
}

Status CheckShape(int bits, int64_t n, int64_t k, int64_t block) {
  if (bits != 4 && bits != 8) return InvalidArgument("pack weights: bits must be 4 or 8, got ", bits);
  if (n <= 0 || k <= 0 || n > (int64_t{1} << 31) || k > (int64_t{1} << 31))
    return InvalidArgument("pack weights: N and K must be in [1, 2^31], got N=", n, " K=", k);
  if (block < 16 || block > 4096 || (block & (block - 1)) != 0)
    return InvalidArgument("pack weights: block_size must be a power of two in [16, 4096], got ", block);
  return Status::Ok();
}

// Slot of the s-th code of a word of 4-bit codes: even codes in the low nibbles of bytes
// 0..3, odd codes in the high nibbles. This lets the kernel turn one word into 8 fp16
// values with two mask+shift pairs (the "interleaved" order of the doc).
int Slot4(int s) { return (s >> 1) + (s & 1) * 4; }

template <typename T>
void Put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
}
template <typename T>
T Get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

Result<CudaWeightLayout> CudaLayoutForTarget(const std::string& target) {
  CudaWeightLayout l;
  l.tag = target;
  if (target == "cuda-sm80") {
    l.arch = 80;
    l.tile_n = 8;
  } else if (target == "cuda-sm90") {
    l.arch = 90;
    l.tile_n = 16;
  } else {
    return InvalidArgument("pack weights: unknown layout target '", target, "' (known: cuda-sm80, cuda-sm90)");
  }
  return l;
}

Result<size_t> CudaPackedSize(const CudaWeightLayout& l, const NBitsWeights& w) {
  RETURN_IF_ERROR(CheckShape(w.bits, w.n, w.k, w.block_size));
  const Geometry g = Geom(l, w.bits, w.n, w.k, w.block_size);
  const size_t want_b = static_cast<size_t>(w.n * g.n_blocks * w.block_size * w.bits / 8);
  if (w.b_bytes != want_b)
    return InvalidArgument("pack weights: B has ", w.b_bytes, " bytes, N=", w.n, " K=", w.k, " block_size=",
                           w.block_size, " bits=", w.bits, " need ", want_b);
  if (w.scale_count != static_cast<size_t>(w.n * g.n_blocks))
    return InvalidArgument("pack weights: scales has ", w.scale_count, " values, need N*n_blocks = ", w.n * g.n_blocks);
  const size_t want_zp = static_cast<size_t>(w.n * ((g.n_blocks * w.bits + 7) / 8));
  if (w.zero_points && w.zp_bytes != want_zp)
    return InvalidArgument("pack weights: zero_points has ", w.zp_bytes, " bytes, need ", want_zp);
  return g.total;
}

Status PackCudaWeights(const CudaWeightLayout& l, const NBitsWeights& w, uint8_t* out, size_t out_size) {
  ASSIGN_OR_RETURN(size_t total, CudaPackedSize(l, w));
  if (!w.b || !w.scales) return InvalidArgument("pack weights: B or scales is NULL");
  if (!out || out_size != total) return InvalidArgument("pack weights: output needs ", total, " bytes, got ", out_size);
  const Geometry g = Geom(l, w.bits, w.n, w.k, w.block_size);
  std::memset(out, 0, total);
  std::memcpy(out, "SWL1", 4);
  Put<uint16_t>(out + 4, CudaWeightLayout::kVersion);
  out[6] = l.arch;
  out[7] = static_cast<uint8_t>(w.bits);
  Put<uint16_t>(out + 8, static_cast<uint16_t>(l.tile_n));
  Put<uint16_t>(out + 10, static_cast<uint16_t>((w.bits == 4 ? 1 : 0) | (w.zero_points ? 2 : 0)));
  Put<uint32_t>(out + 12, static_cast<uint32_t>(w.block_size));
  Put<int64_t>(out + 16, w.n);
  Put<int64_t>(out + 24, w.k);

  const int64_t blob = w.block_size * w.bits / 8, per_word = 32 / w.bits;
  auto code = [&](int64_t n, int64_t k) -> uint32_t {
    if (n >= w.n || k >= w.k) return 0;  // padding columns and the tail of the last block
    const uint8_t byte = w.b[(n * g.n_blocks + k / w.block_size) * blob + (k % w.block_size) * w.bits / 8];
    if (w.bits == 8) return byte;
    return (k & 1) ? (byte >> 4) : (byte & 15);
  };
  uint8_t* words = out + g.words_off;
  for (int64_t t = 0; t < g.tiles; ++t)
    for (int64_t kw = 0; kw < g.words_per_col; ++kw)
      for (int64_t j = 0; j < l.tile_n; ++j) {
        uint32_t word = 0;
        for (int64_t s = 0; s < per_word; ++s) {
          const int slot = w.bits == 4 ? Slot4(static_cast<int>(s)) : static_cast<int>(s);
          word |= code(t * l.tile_n + j, kw * per_word + s) << (slot * w.bits);
        }
        Put<uint32_t>(words + ((t * g.words_per_col + kw) * l.tile_n + j) * 4, word);
      }
  const int64_t zp_row = (g.n_blocks * w.bits + 7) / 8;
  for (int64_t t = 0; t < g.tiles; ++t)
    for (int64_t b = 0; b < g.n_blocks; ++b)
      for (int64_t j = 0; j < l.tile_n; ++j) {
        const int64_t n = t * l.tile_n + j, e = (t * g.n_blocks + b) * l.tile_n + j;
        float s = 0.0f;
        uint8_t z = 0;
        if (n < w.n) {
          s = w.scales[n * g.n_blocks + b];
          if (!w.zero_points) {
            z = static_cast<uint8_t>(1u << (w.bits - 1));
          } else if (w.bits == 8) {
            z = w.zero_points[n * zp_row + b];
          } else {
            const uint8_t byte = w.zero_points[n * zp_row + b / 2];
            z = (b & 1) ? (byte >> 4) : (byte & 15);
          }
        }
        Put<float>(out + g.scales_off + e * 4, s);
        out[g.zp_off + e] = z;
      }
  return Status::Ok();
}

Result<std::vector<uint8_t>> PackCudaWeights(const std::string& target, const NBitsWeights& w) {
  ASSIGN_OR_RETURN(CudaWeightLayout l, CudaLayoutForTarget(target));
  ASSIGN_OR_RETURN(size_t total, CudaPackedSize(l, w));
  std::vector<uint8_t> out(total);
  RETURN_IF_ERROR(PackCudaWeights(l, w, out.data(), out.size()));
  return out;
}

Result<CudaPackedInfo> ReadCudaPackedHeader(const uint8_t* blob, size_t bytes) {
  if (!blob || bytes < CudaWeightLayout::kHeaderBytes || std::memcmp(blob, "SWL1", 4) != 0)
    return InvalidArgument("packed weights: no strata layout header (SWL1)");
  if (Get<uint16_t>(blob + 4) != CudaWeightLayout::kVersion)
    return InvalidArgument("packed weights: layout version ", Get<uint16_t>(blob + 4), " is not supported (want ",
                           CudaWeightLayout::kVersion, ")");
  CudaPackedInfo info;
  info.tag = "cuda-sm" + std::to_string(blob[6]);
  ASSIGN_OR_RETURN(CudaWeightLayout l, CudaLayoutForTarget(info.tag));
  info.bits = blob[7];
  info.tile_n = Get<uint16_t>(blob + 8);
  info.has_zero_points = (Get<uint16_t>(blob + 10) & 2) != 0;
  info.block_size = Get<uint32_t>(blob + 12);
  info.n = Get<int64_t>(blob + 16);
  info.k = Get<int64_t>(blob + 24);
  RETURN_IF_ERROR(CheckShape(info.bits, info.n, info.k, info.block_size));
  if (info.tile_n != l.tile_n) return InvalidArgument("packed weights: tile_n ", info.tile_n, " does not match ", l.tag);
  const size_t want = Geom(l, info.bits, info.n, info.k, info.block_size).total;
  if (want != bytes) return InvalidArgument("packed weights: ", bytes, " bytes, the header implies ", want);
  return info;
}

}  // namespace strata::cpu
