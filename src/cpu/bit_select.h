// Branch-free float selection for loops GCC should vectorize without AVX-512 masking.
#pragma once

#include <cstdint>

namespace strata {

inline __attribute__((always_inline)) float FromBits(int32_t i) { return __builtin_bit_cast(float, i); }
inline __attribute__((always_inline)) int32_t ToBits(float f) { return __builtin_bit_cast(int32_t, f); }

// c ? a : b as a bit blend. With a plain ?: GCC sinks FP arithmetic into the arms or
// duplicates code for a constant arm (jump threading); with -ftrapping-math it then
// cannot if-convert the loop, which stays scalar unless the ISA has masking (AVX-512).
inline __attribute__((always_inline)) float Select(bool c, float a, float b) {
  const int32_t m = -static_cast<int32_t>(c);
  return FromBits((ToBits(a) & m) | (ToBits(b) & ~m));
}

}  // namespace strata
