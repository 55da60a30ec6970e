# OpenBLAS (libopenblas-dev) for run-time-B MatMul (cblas_sgemm). It is always called
# single-threaded (openblas_set_num_threads(1)); strata's pool provides parallelism.
find_path(OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas-pthread openblas REQUIRED)
find_library(OPENBLAS_LIBRARY NAMES openblas REQUIRED)
add_library(strata::blas INTERFACE IMPORTED)
target_include_directories(strata::blas INTERFACE ${OPENBLAS_INCLUDE_DIR})
target_link_libraries(strata::blas INTERFACE ${OPENBLAS_LIBRARY})
