// strata_env: process-level state behind the C API (provider discovery and reports).
#pragma once

#include <memory>

struct strata_env {
  int reserved = 0;  // provider manager added with the plugin mechanism
};
