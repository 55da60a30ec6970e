// Stub: replaced by the real C API.
#include "strata/strata.h"

extern "C" const char* strata_version(void) { return STRATA_VERSION_STRING; }
