# Fuzzing hooks (see docs/hardening.md).
#  * STRATA_BUILD_FUZZ=ON (the `fuzz` preset) builds the libFuzzer targets in fuzz/.
#  * CI fuzzes through scripts/test.sh, which runs scripts/fuzz.sh after the release ctest.
#  * The `fuzz.short` CTest test is the opt-in way to fuzz from ctest (`ctest -L fuzz`). It
#    only does work when STRATA_CI_FUZZ=1 is set (and clang-14 is installed), so that the
#    release ctest run in scripts/test.sh does not build and fuzz twice; otherwise it
#    reports itself skipped.
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
