# Fuzzing hooks (see docs/hardening.md).
#  * STRATA_BUILD_FUZZ=ON (the `fuzz` preset) builds the libFuzzer targets in fuzz/.
#  * The `fuzz` CTest test runs scripts/fuzz.sh briefly. Building the fuzz preset takes a
#    long time on a small machine, so it only does work when STRATA_CI_FUZZ=1 is set in the
#    environment (and clang-14 is installed); otherwise it reports itself skipped.
option(STRATA_BUILD_FUZZ "Build the libFuzzer targets (needs clang; use the fuzz preset)" OFF)
if(STRATA_BUILD_FUZZ)
  add_subdirectory(${CMAKE_SOURCE_DIR}/fuzz ${CMAKE_BINARY_DIR}/fuzz-targets)
endif()

if(NOT STRATA_BUILD_FUZZ)
  add_test(NAME fuzz.short
    COMMAND bash -c [=[
      if [ "${STRATA_CI_FUZZ:-0}" != 1 ]; then echo "STRATA_CI_FUZZ is not 1: fuzzing skipped"; exit 77; fi
      if ! command -v clang++-14 >/dev/null; then echo "clang++-14 not installed: fuzzing skipped"; exit 77; fi
      exec bash scripts/fuzz.sh "${STRATA_CI_FUZZ_SECONDS:-20}"
    ]=]
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(fuzz.short PROPERTIES LABELS fuzz SKIP_RETURN_CODE 77 TIMEOUT 7200)
endif()
