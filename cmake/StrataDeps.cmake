# Third-party dependencies, all from Debian 12 packages (see README).
find_package(Threads REQUIRED)
find_package(ONNX CONFIG REQUIRED)          # libonnx-dev: parser, checker, shape inference
find_package(Protobuf REQUIRED)             # libprotobuf-dev
find_package(nlohmann_json 3 REQUIRED)      # nlohmann-json3-dev
find_package(CLI11 CONFIG REQUIRED)         # libcli11-dev

add_library(strata::onnx INTERFACE IMPORTED)
target_link_libraries(strata::onnx INTERFACE onnx onnx_proto protobuf::libprotobuf)

# XNNPACK + pthreadpool + cpuinfo (libxnnpack-dev): CPU-only kernel library.
find_path(XNNPACK_INCLUDE_DIR xnnpack.h REQUIRED)
find_library(XNNPACK_LIBRARY XNNPACK REQUIRED)
find_path(PTHREADPOOL_INCLUDE_DIR pthreadpool.h REQUIRED)
find_library(PTHREADPOOL_LIBRARY pthreadpool REQUIRED)
find_library(CPUINFO_LIBRARY cpuinfo REQUIRED)
add_library(strata::xnnpack INTERFACE IMPORTED)
target_include_directories(strata::xnnpack INTERFACE ${XNNPACK_INCLUDE_DIR} ${PTHREADPOOL_INCLUDE_DIR})
target_link_libraries(strata::xnnpack INTERFACE ${XNNPACK_LIBRARY} ${PTHREADPOOL_LIBRARY} ${CPUINFO_LIBRARY})

# RE2 (libre2-dev): the regular expressions of com.microsoft Tokenizer, the engine ONNX Runtime
# uses for it (leftmost-longest matching, RE2 syntax), so converted text pipelines tokenize alike.
find_path(RE2_INCLUDE_DIR re2/re2.h REQUIRED)
find_library(RE2_LIBRARY re2 REQUIRED)
add_library(strata::re2 INTERFACE IMPORTED)
target_include_directories(strata::re2 INTERFACE ${RE2_INCLUDE_DIR})
target_link_libraries(strata::re2 INTERFACE ${RE2_LIBRARY} Threads::Threads)
