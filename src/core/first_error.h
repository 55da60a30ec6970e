// The first error of a parallel region's tasks: each task reports its own Status, later
// errors are dropped, and the caller returns what Take() gives after the region.
#pragma once

#include <mutex>
#include <utility>

#include "core/status.h"

namespace strata {

class FirstError {
 public:
  // Keeps st if it is the first error; OK statuses are ignored. Thread-safe.
  void Set(Status st) {
    if (st.ok()) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = std::move(st);
  }
  Status Take() { return std::move(status_); }

 private:
  std::mutex mu_;
  Status status_;
};

}  // namespace strata
