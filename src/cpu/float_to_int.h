// Float-to-integer conversion defined for every input. A plain static_cast is undefined
// behaviour when the value (NaN, an infinity, 1e30 from a hostile attribute or tensor) does
// not fit the integer type; kernels that turn model-supplied floats into integers use this.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace strata {

// NaN -> 0; values within int64 truncate toward zero and wrap into D through int64 (numpy's
// float->int cast on x86); beyond int64 they go through uint64 for unsigned D when they fit,
// else saturate at D's limits.
template <typename D>
D FloatToInt(double v) {
  static_assert(std::is_integral_v<D>);
  if (std::isnan(v)) return D{0};
  const double t = std::trunc(v);
  if (t >= -9.2e18 && t <= 9.2e18) return static_cast<D>(static_cast<int64_t>(t));
  if constexpr (std::is_unsigned_v<D>) {
    if (t >= 0 && t < 18446744073709551616.0) return static_cast<D>(static_cast<uint64_t>(t));
  }
  return t < 0 ? std::numeric_limits<D>::min() : std::numeric_limits<D>::max();
}

}  // namespace strata
