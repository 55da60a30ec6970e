// Shape helpers shared by the provider plugins (header-only, compiled into each plugin;
// nothing here crosses the ABI).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace strata_provider_common {

// "[2,3,4]" for error messages.
inline std::string ShapeStr(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t k = 0; k < s.size(); ++k) {
    if (k) r += ",";
    r += std::to_string(s[k]);
  }
  return r + "]";
}

// Numpy-style broadcast of a and b into *out; false when a dimension pair is neither equal
// nor 1.
inline bool Broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>* out) {
  const size_t r = std::max(a.size(), b.size());
  out->assign(r, 1);
  for (size_t k = 0; k < r; ++k) {
    const int64_t da = k < r - a.size() ? 1 : a[k - (r - a.size())];
    const int64_t db = k < r - b.size() ? 1 : b[k - (r - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    (*out)[k] = da == 1 ? db : da;
  }
  return true;
}

}  // namespace strata_provider_common
