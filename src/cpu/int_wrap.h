// Wrapping integer arithmetic: two's complement, as numpy's integer ops wrap, without the
// undefined behaviour C++ gives signed overflow. The operation runs on an unsigned type at
// least as wide as unsigned int (uint16 * uint16 promoted to int can overflow int too),
// and the result converts back modulo 2^N (defined since C++20). Floating-point and
// other non-integer types use the plain operators, so kernels call these for every type.
#pragma once

#include <type_traits>

namespace strata {

namespace wrap_detail {
template <typename T>
constexpr bool kWraps = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <typename T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
}  // namespace wrap_detail

template <typename T>
inline T WrapAdd(T a, T b) {
  if constexpr (wrap_detail::kWraps<T>) {
    using W = wrap_detail::Wide<T>;
    return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
  } else {
    return static_cast<T>(a + b);
  }
}

template <typename T>
inline T WrapSub(T a, T b) {
  if constexpr (wrap_detail::kWraps<T>) {
    using W = wrap_detail::Wide<T>;
    return static_cast<T>(static_cast<W>(a) - static_cast<W>(b));
  } else {
    return static_cast<T>(a - b);
  }
}

template <typename T>
inline T WrapMul(T a, T b) {
  if constexpr (wrap_detail::kWraps<T>) {
    using W = wrap_detail::Wide<T>;
    return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
  } else {
    return static_cast<T>(a * b);
  }
}

// -x; the most negative value negates to itself.
template <typename T>
inline T WrapNeg(T x) {
  return WrapSub(T(0), x);
}

}  // namespace strata
