# Install layout and release-archive inputs (included OPTIONAL from the top CMakeLists).
#
#   bin/strata                          RUNPATH $ORIGIN/../lib
#   lib/libstrata.so*                   RUNPATH $ORIGIN
#   lib/<bundled third-party libs>      RUNPATH $ORIGIN (patchelf), see StrataBundleDeps.cmake
#   lib/strata/providers/               providers, only in the variants that ship them
#   lib/cmake/strata/                   strataConfig.cmake, version file, target strata::strata
#   lib/pkgconfig/strata.pc
#   include/strata/                     strata.h, strata.hpp, provider.h
#   share/strata/examples/              digits.onnx + samples + labels
#   share/doc/strata/                   README, docs/*.md, LICENSE
#
# Components: `core` (everything above except providers), `vulkan` and `cuda` (one provider
# each, plus its manifest and README). scripts/package.sh turns them into the three archives.
# Providers are installed here, not by their own CMakeLists, so every variant is assembled
# in one place.
include(CMakePackageConfigHelpers)

set(STRATA_PROVIDER_NAMES vulkan cuda)
set(_strata_pkg_targets strata strata_cli)

# ---- build tree mirrors the install layout for data, so `strata selftest` finds the
# examples at <bin>/../share/strata/examples both in the build tree and in a package.
set(STRATA_EXAMPLE_FILES digits.onnx digits_samples.npy digits_labels.npy README.md)
foreach(f IN LISTS STRATA_EXAMPLE_FILES)
  if(EXISTS ${PROJECT_SOURCE_DIR}/examples/${f})
    configure_file(${PROJECT_SOURCE_DIR}/examples/${f} ${CMAKE_BINARY_DIR}/share/strata/examples/${f} COPYONLY)
    install(FILES ${PROJECT_SOURCE_DIR}/examples/${f} DESTINATION ${CMAKE_INSTALL_DATADIR}/strata/examples
      COMPONENT core)
  endif()
endforeach()

# ---- binaries
install(TARGETS strata
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT core NAMELINK_COMPONENT core)
install(TARGETS strata_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT core)

# ---- the Python binding (pure Python over the C API through ctypes): installed beside the
# library as <libdir>/python3/dist-packages/strata, from where it loads <libdir>/libstrata.so.0;
# the build tree gets the same layout, so PYTHONPATH=<build>/lib/python3/dist-packages works.
file(GLOB _strata_py CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/strata/*.py)
foreach(f IN LISTS _strata_py)
  get_filename_component(_n ${f} NAME)
  configure_file(${f} ${CMAKE_BINARY_DIR}/lib/python3/dist-packages/strata/${_n} COPYONLY)
endforeach()
install(FILES ${_strata_py} DESTINATION ${CMAKE_INSTALL_LIBDIR}/python3/dist-packages/strata COMPONENT core)

# ---- headers (provider.h arrives with the plugin work; install whichever exist)
foreach(h strata.h strata.hpp provider.h)
  if(EXISTS ${PROJECT_SOURCE_DIR}/include/strata/${h})
    install(FILES ${PROJECT_SOURCE_DIR}/include/strata/${h} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/strata
      COMPONENT core)
  endif()
endforeach()

# ---- CMake package: hand-written config (relocatable: paths from its own location)
set(STRATA_SONAME_FILE libstrata.so.${PROJECT_VERSION_MAJOR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/strataConfig.cmake.in
  ${CMAKE_BINARY_DIR}/packaging/strataConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata NO_SET_AND_CHECK_MACRO NO_CHECK_REQUIRED_COMPONENTS_MACRO)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/packaging/strataConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/packaging/strataConfig.cmake ${CMAKE_BINARY_DIR}/packaging/strataConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata COMPONENT core)

# ---- pkg-config: relocatable through ${pcfiledir}; adds an -rpath so consumers need no
# LD_LIBRARY_PATH (libstrata's own RUNPATH $ORIGIN finds the bundled libraries).
configure_file(${PROJECT_SOURCE_DIR}/packaging/strata.pc.in ${CMAKE_BINARY_DIR}/packaging/strata.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/packaging/strata.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT core)

# ---- documentation
file(GLOB _strata_docs ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE ${_strata_docs}
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT core)

# ---- bundled third-party libraries (install time, after the binaries above are in place)
find_program(STRATA_PATCHELF patchelf DOC "patchelf (Debian package patchelf), sets RUNPATH of bundled libraries")
install(CODE "
  set(STRATA_BUNDLE_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(STRATA_BUNDLE_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
  set(STRATA_BUNDLE_SONAME_FILE \"${STRATA_SONAME_FILE}\")
  set(STRATA_BUNDLE_CLI \"$<TARGET_FILE_NAME:strata_cli>\")
  set(STRATA_PATCHELF \"${STRATA_PATCHELF}\")
  include(\"${CMAKE_CURRENT_LIST_DIR}/StrataBundleDeps.cmake\")
" COMPONENT core)

# ---- providers: one component each, only when its target exists in this build
set(_strata_built_providers "")
foreach(p IN LISTS STRATA_PROVIDER_NAMES)
  if(TARGET strata_provider_${p})
    list(APPEND _strata_built_providers ${p})
    list(APPEND _strata_pkg_targets strata_provider_${p})
    install(TARGETS strata_provider_${p}
      LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/strata/providers COMPONENT ${p}
      RUNTIME DESTINATION ${CMAKE_INSTALL_LIBDIR}/strata/providers COMPONENT ${p})
    # The optional sidecar manifest the provider build writes next to the library.
    install(FILES ${CMAKE_BINARY_DIR}/lib/strata/providers/libstrata-provider-${p}.json
      DESTINATION ${CMAKE_INSTALL_LIBDIR}/strata/providers COMPONENT ${p} OPTIONAL)
  endif()
  # What a user of this variant must have; shipped even when the provider is absent
  # so the archive explains itself.
  if(EXISTS ${PROJECT_SOURCE_DIR}/packaging/README-${p}.md)
    install(FILES ${PROJECT_SOURCE_DIR}/packaging/README-${p}.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT ${p})
  endif()
endforeach()

# `ninja strata_package_inputs` builds exactly what the archives contain.
add_custom_target(strata_package_inputs DEPENDS ${_strata_pkg_targets})

# Facts scripts/package.sh needs, without parsing CMakeCache.txt.
list(JOIN _strata_built_providers " " _strata_built_providers_str)
file(WRITE ${CMAKE_BINARY_DIR}/packaging/package.env
  "STRATA_VERSION=${PROJECT_VERSION}\n"
  "STRATA_BUILT_PROVIDERS=\"${_strata_built_providers_str}\"\n"
  "STRATA_SOURCE_DIR=\"${PROJECT_SOURCE_DIR}\"\n")
