// STRATA_TARGET_CLONES(...): GCC function multiversioning (target_clones), except under
// ThreadSanitizer. The clones are picked by an ifunc resolver that runs while the dynamic
// loader relocates the binary, before TSan's runtime is initialised; TSan instruments the
// resolver too, and it crashes there (strata_tests segfaulted before main). Under TSan the
// baseline version is used, which changes speed, not results.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define STRATA_TARGET_CLONES(...)
#else
#define STRATA_TARGET_CLONES(...) __attribute__((target_clones(__VA_ARGS__)))
#endif
