// Reading and writing the float element types (float, double, float16, bfloat16) through
// double, for the reference kernels that accumulate in double whatever the tensor's type.
#pragma once

#include <type_traits>

namespace strata {

// v as a double (float16 and bfloat16 through float, which holds them exactly).
template <typename T>
double AsDouble(T v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return static_cast<double>(static_cast<float>(v));
  }
}

// v rounded to T (float16 and bfloat16 through float).
template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    return static_cast<T>(v);
  } else {
    return T(static_cast<float>(v));
  }
}

}  // namespace strata
