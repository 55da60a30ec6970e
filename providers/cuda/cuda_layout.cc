// Packed MatMulNBits layout parameters and header (see cuda_layout.h).
#include "cuda_layout.h"

#include <cstring>

namespace strata_cuda {
namespace {

template <typename T>
void Put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));  // x86-64 and every CUDA host are little-endian
}
template <typename T>
T Get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

size_t Finish(NBitsPackParams* p) {
  p->n_blocks = (p->k + p->block - 1) / p->block;
  p->words_per_col = p->n_blocks * p->block * p->bits / 32;
  p->tiles = (p->n + p->tile_n - 1) / p->tile_n;
  const int64_t entries = p->tiles * p->n_blocks * p->tile_n;
  p->words_off = kLayoutHeaderBytes;
  p->scales_off = p->words_off + p->tiles * p->words_per_col * p->tile_n * 4;
  p->zp_off = p->scales_off + entries * 4;
  return static_cast<size_t>(p->zp_off + (entries + 3) / 4 * 4);
}

}  // namespace

size_t LayoutParams(const std::string& target, int bits, int64_t n, int64_t k, int64_t block, bool has_zp,
                    NBitsPackParams* p, uint8_t* arch, std::string* error) {
  if (target == "cuda-sm80") {
    *arch = 80;
    p->tile_n = 8;
  } else if (target == "cuda-sm90") {
    *arch = 90;
    p->tile_n = 16;
  } else {
    *error = "unknown weight layout target '" + target + "' (known: cuda-sm80, cuda-sm90)";
    return 0;
  }
  if (bits != 4 && bits != 8) {
    *error = "bits must be 4 or 8, got " + std::to_string(bits);
    return 0;
  }
  if (n <= 0 || k <= 0 || n > (int64_t{1} << 31) || k > (int64_t{1} << 31)) {
    *error = "N and K must be in [1, 2^31], got N=" + std::to_string(n) + " K=" + std::to_string(k);
    return 0;
  }
  if (block < 16 || block > 4096 || (block & (block - 1)) != 0) {
    *error = "block_size must be a power of two in [16, 4096], got " + std::to_string(block);
    return 0;
  }
  p->bits = bits;
  p->n = n;
  p->k = k;
  p->block = block;
  p->interleave = bits == 4;
  p->has_zp = has_zp;
  return Finish(p);
}

void WriteLayoutHeader(const NBitsPackParams& p, uint8_t arch, uint8_t* out) {
  std::memset(out, 0, kLayoutHeaderBytes);
  std::memcpy(out, "SWL1", 4);
  Put<uint16_t>(out + 4, kLayoutVersion);
  out[6] = arch;
  out[7] = static_cast<uint8_t>(p.bits);
  Put<uint16_t>(out + 8, static_cast<uint16_t>(p.tile_n));
  Put<uint16_t>(out + 10, static_cast<uint16_t>((p.interleave ? 1 : 0) | (p.has_zp ? 2 : 0)));
  Put<uint32_t>(out + 12, static_cast<uint32_t>(p.block));
  Put<int64_t>(out + 16, p.n);
  Put<int64_t>(out + 24, p.k);
}

bool ReadLayoutHeader(const uint8_t* blob, size_t bytes, NBitsPackParams* p, std::string* tag, std::string* error) {
  if (bytes < kLayoutHeaderBytes || std::memcmp(blob, "SWL1", 4) != 0) {
    *error = "the prepacked weights do not start with a strata layout header";
    return false;
  }
  if (Get<uint16_t>(blob + 4) != kLayoutVersion) {
    *error = "prepacked layout version " + std::to_string(Get<uint16_t>(blob + 4)) + " is not supported (want " +
             std::to_string(kLayoutVersion) + ")";
    return false;
  }
  *tag = "cuda-sm" + std::to_string(blob[6]);
  uint8_t arch = 0;
  const size_t want = LayoutParams(*tag, blob[7], Get<int64_t>(blob + 16), Get<int64_t>(blob + 24),
                                   Get<uint32_t>(blob + 12), (Get<uint16_t>(blob + 10) & 2) != 0, p, &arch, error);
  if (want == 0) return false;
  if (want != bytes || Get<uint16_t>(blob + 8) != p->tile_n) {
    *error = "prepacked weights have " + std::to_string(bytes) + " bytes, the header implies " + std::to_string(want);
    return false;
  }
  return true;
}

}  // namespace strata_cuda
