/* A library the missingdep fault provider links against. It is built into a private
 * folder that is on no search path, so the provider's NEEDED entry cannot resolve. */
__attribute__((visibility("default"))) int strata_test_fake_dependency(void) { return 42; }
