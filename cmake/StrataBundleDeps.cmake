# Install-time script (included from an install(CODE) in StrataInstall.cmake): copies every
# non-system shared library that the installed libstrata.so and strata CLI need into
# <prefix>/lib and sets its RUNPATH to $ORIGIN, so a package runs on a machine without the
# Debian -dev/runtime packages it was built against.
#
# Never bundled: glibc, libstdc++, libgcc_s (the "system" every Linux x86-64 has; the audit's
# allowlist), and never anything on the accelerator deny list; finding one of those in the
# closure is an error, not something to ship.
#
# Inputs: STRATA_BUNDLE_LIBDIR, STRATA_BUNDLE_BINDIR, STRATA_BUNDLE_SONAME_FILE,
# STRATA_BUNDLE_CLI, STRATA_PATCHELF; CMAKE_INSTALL_PREFIX and DESTDIR from cmake --install.
cmake_minimum_required(VERSION 3.25)

set(_prefix "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(_libdir "${_prefix}/${STRATA_BUNDLE_LIBDIR}")
set(_lib "${_libdir}/${STRATA_BUNDLE_SONAME_FILE}")
set(_cli "${_prefix}/${STRATA_BUNDLE_BINDIR}/${STRATA_BUNDLE_CLI}")
foreach(f "${_lib}" "${_cli}")
  if(NOT EXISTS "${f}")
    message(FATAL_ERROR "strata bundle: ${f} is not installed; install the core component first")
  endif()
endforeach()
if(NOT STRATA_PATCHELF OR NOT EXISTS "${STRATA_PATCHELF}")
  message(FATAL_ERROR "strata bundle: patchelf not found (apt-get install patchelf), needed to set the "
    "RUNPATH of bundled libraries; re-run cmake after installing it")
endif()

# glibc, the C++ runtime and the vDSO: provided by every target system.
set(_system_regexes
  "^ld-linux-x86-64\\.so" "^linux-vdso\\.so" "^libc\\.so" "^libm\\.so" "^libdl\\.so" "^libpthread\\.so"
  "^librt\\.so" "^libresolv\\.so" "^libutil\\.so" "^libstdc\\+\\+\\.so" "^libgcc_s\\.so")
# Accelerator runtimes (kept in step with the audit's deny list, docs/audit.md).
set(_deny_regexes
  "^libcuda\\.so" "^libcudart\\.so" "^libcublas\\.so" "^libcublasLt\\.so" "^libcudnn" "^libnvrtc\\.so"
  "^libnccl\\.so" "^libcurand\\.so" "^libcufft\\.so" "^libcusparse\\.so" "^libcusolver\\.so"
  "^libnvinfer\\.so" "^libnvToolsExt\\.so" "^libvulkan\\.so" "^libOpenCL\\.so" "^libamdhip64\\.so"
  "^librocm" "^libhsa-runtime64\\.so" "^libMIOpen\\.so" "^librocblas\\.so" "^libze_loader\\.so"
  "^libze_intel_gpu\\.so" "^libmetal")

# The package's own lib/ is searched first ($ORIGIN), so a re-install into the same prefix
# finds the copies it made last time; those are reported and skipped below.
file(GET_RUNTIME_DEPENDENCIES
  RESOLVED_DEPENDENCIES_VAR _resolved
  UNRESOLVED_DEPENDENCIES_VAR _unresolved
  CONFLICTING_DEPENDENCIES_PREFIX _conflict
  LIBRARIES "${_lib}"
  EXECUTABLES "${_cli}"
  PRE_EXCLUDE_REGEXES ${_system_regexes})

set(_problems "")
foreach(dep IN LISTS _resolved _unresolved)
  get_filename_component(_name "${dep}" NAME)
  foreach(re IN LISTS _deny_regexes)
    if(_name MATCHES "${re}")
      string(APPEND _problems "\n  ${_name} (${dep}) is an accelerator runtime: the core must never depend on it")
    endif()
  endforeach()
endforeach()
foreach(dep IN LISTS _unresolved)
  string(APPEND _problems "\n  ${dep}: needed but not found on this system")
endforeach()
foreach(name IN LISTS _conflict_FILENAMES)
  string(APPEND _problems "\n  ${name}: resolves to several files (${_conflict_${name}})")
endforeach()
if(_problems)
  message(FATAL_ERROR "strata bundle: cannot bundle the core's dependencies:${_problems}")
endif()

list(SORT _resolved)
set(_bundled "")
foreach(dep IN LISTS _resolved)
  # The file name the loader asks for (the NEEDED name, which is the SONAME); symlinks are
  # resolved so the real file lands under that name.
  get_filename_component(_name "${dep}" NAME)
  file(REAL_PATH "${dep}" _real)
  get_filename_component(_real_dir "${_real}" DIRECTORY)
  file(REAL_PATH "${_libdir}" _libdir_real)
  set(_dest "${_libdir}/${_name}")
  if(_real_dir STREQUAL _libdir_real)
    list(APPEND _bundled "${_name}")  # already bundled by an earlier install into this prefix
    continue()
  endif()
  file(REMOVE "${_dest}")
  file(COPY_FILE "${_real}" "${_dest}")
  file(CHMOD "${_dest}" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  execute_process(COMMAND "${STRATA_PATCHELF}" --set-rpath "$ORIGIN" "${_dest}"
    RESULT_VARIABLE _rc ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "strata bundle: patchelf --set-rpath '$ORIGIN' ${_dest} failed: ${_err}")
  endif()
  list(APPEND _bundled "${_name}")
  message(STATUS "Bundled: ${_dest} (from ${_real})")
endforeach()
list(JOIN _bundled " " _bundled_str)
message(STATUS "strata bundle: ${_bundled_str}")
