# Release-archive checks (scripts/check-archives.sh, docs/packaging.md): builds the three
# archives, audits them against packaging/policies, runs `strata selftest` and the consumer
# builds from the extracted archives, proves the CPU core runs with every accelerator library
# hidden (mount namespace), and that doctored archives fail the audit. Release builds only
# (the archives ship the release build); needs root. Label `packaging`: `ctest -L packaging`.
if(CMAKE_BUILD_TYPE STREQUAL "Release" AND TARGET strata_cli)
  add_test(NAME PackagingArchives
    COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/check-archives.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(PackagingArchives PROPERTIES
    LABELS packaging
    TIMEOUT 900
    RUN_SERIAL TRUE
    SKIP_RETURN_CODE 77
    FAIL_REGULAR_EXPRESSION "  FAIL  ")
endif()
