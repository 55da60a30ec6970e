/*
 * One source, many broken providers: each is compiled with one FAULT_* macro and named
 * libstrata-provider-<fault>.so (see ../CMakeLists.txt). The load report must classify
 * each of them exactly; none of them may crash the host.
 */
#include <stddef.h>
#include <stdint.h>

#include "strata/provider.h"

#ifndef FAULT_NAME
#error "FAULT_NAME must be defined by the build"
#endif
#ifndef FAULT_ABI
#define FAULT_ABI STRATA_PROVIDER_ABI_VERSION
#endif
#ifndef FAULT_CPU_FEATURES
#define FAULT_CPU_FEATURES ""
#endif

#if defined(FAULT_MISSING_DEP)
/* Defined in a library that the build removes from reach (see CMakeLists.txt). */
extern int strata_test_fake_dependency(void);
#endif

static int32_t DeviceCount(void* self, uint32_t* count, strata_provider_error* err) {
  (void)self;
#if defined(FAULT_NO_DEVICE)
  *count = 0;
  strata_provider_set_error(err, "no compatible device found (simulated: 0 GPUs visible)");
#else
  (void)err;
  *count = 1;
#endif
  return STRATA_PROVIDER_RESULT_OK;
}

static int32_t DeviceInfo(void* self, uint32_t index, strata_device_info* out, strata_provider_error* err) {
  (void)self;
  (void)index;
  (void)err;
  out->name = "fault device";
  out->memory_bytes = 0;
  out->compute_units = 1;
  out->driver_version = "";
  out->api_version = "";
  return STRATA_PROVIDER_RESULT_OK;
}

static int32_t SupportsNode(void* self, uint32_t device, const strata_node_desc* node, int32_t* supported,
                            strata_provider_error* err) {
  (void)self;
  (void)device;
  (void)node;
  (void)err;
  *supported = 0;
  return STRATA_PROVIDER_RESULT_OK;
}

static int32_t Compile(void* self, uint32_t device, const strata_partition_desc* p, strata_compiled_partition** out,
                       strata_provider_error* err) {
  (void)self;
  (void)device;
  (void)p;
  (void)out;
  strata_provider_set_error(err, "fault provider compiles nothing");
  return STRATA_PROVIDER_RESULT_UNSUPPORTED;
}

static void ReleasePartition(void* self, strata_compiled_partition* p) {
  (void)self;
  (void)p;
}

static int32_t BufferAlloc(void* self, uint32_t device, size_t bytes, strata_device_buffer** out,
                           strata_provider_error* err) {
  (void)self;
  (void)device;
  (void)bytes;
  (void)out;
  strata_provider_set_error(err, "fault provider has no memory");
  return STRATA_PROVIDER_RESULT_OUT_OF_MEMORY;
}

static void BufferFree(void* self, strata_device_buffer* b) {
  (void)self;
  (void)b;
}

static int32_t Copy1(void* self, strata_device_buffer* dst, size_t off, const void* src, size_t bytes,
                     strata_provider_error* err) {
  (void)self, (void)dst, (void)off, (void)src, (void)bytes;
  strata_provider_set_error(err, "unsupported");
  return STRATA_PROVIDER_RESULT_ERROR;
}

static int32_t Copy2(void* self, void* dst, const strata_device_buffer* src, size_t off, size_t bytes,
                     strata_provider_error* err) {
  (void)self, (void)dst, (void)off, (void)src, (void)bytes;
  strata_provider_set_error(err, "unsupported");
  return STRATA_PROVIDER_RESULT_ERROR;
}

static int32_t Execute(void* self, strata_compiled_partition* p, const strata_device_tensor* in, size_t nin,
                       strata_device_tensor* out, size_t nout, strata_provider_error* err) {
  (void)self, (void)p, (void)in, (void)nin, (void)out, (void)nout;
  strata_provider_set_error(err, "unsupported");
  return STRATA_PROVIDER_RESULT_ERROR;
}

static int32_t Synchronize(void* self, uint32_t device, strata_provider_error* err) {
  (void)self, (void)device, (void)err;
  return STRATA_PROVIDER_RESULT_OK;
}

static void Shutdown(void* self) { (void)self; }

__attribute__((unused)) static strata_provider_api g_api = {sizeof(strata_provider_api),
                                                            STRATA_PROVIDER_ABI_VERSION,
                                                            NULL,
                                                            DeviceCount,
                                                            DeviceInfo,
                                                            SupportsNode,
                                                            Compile,
                                                            ReleasePartition,
                                                            BufferAlloc,
                                                            BufferFree,
                                                            Copy1,
                                                            Copy2,
                                                            Execute,
                                                            Synchronize,
                                                            Shutdown,
                                                            NULL};

static const strata_provider_probe_info g_probe = {
    sizeof(strata_provider_probe_info), FAULT_ABI, FAULT_NAME, "fault", "0.0.1", FAULT_CPU_FEATURES, "", ""};

#if defined(FAULT_CRASH_IN_PROBE)
/* A broken probe: dereferences NULL. Only ever loaded in an isolated child process. Exempt
   from UBSan, which would otherwise report the store and exit instead of letting it fault
   (the test wants the real SIGSEGV, also in the asan build). */
__attribute__((noinline, no_sanitize("undefined"))) static void CrashOnNull(void) {
  volatile int* volatile p = NULL;
  *p = 1;
}
#endif

__attribute__((visibility("default"))) const strata_provider_probe_info* strata_provider_probe(void) {
#if defined(FAULT_CRASH_IN_PROBE)
  CrashOnNull();
#endif
  return &g_probe;
}

#if !defined(FAULT_NO_INIT)
__attribute__((visibility("default"))) int32_t strata_provider_init(const strata_host_api* host,
                                                                    const strata_provider_api** out,
                                                                    strata_provider_error* err) {
  (void)host;
#if defined(FAULT_MISSING_DEP)
  if (strata_test_fake_dependency() != 42) return STRATA_PROVIDER_RESULT_ERROR;
#endif
#if defined(FAULT_INIT_FAIL)
  (void)out;
  strata_provider_set_error(err, "simulated driver failure: cuInit returned 999");
  return STRATA_PROVIDER_RESULT_ERROR;
#else
  (void)err;
#if defined(FAULT_NULL_FUNCTION)
  g_api.execute = NULL;
#endif
#if defined(FAULT_STRUCT_SIZE)
  g_api.struct_size = 16;
#endif
  *out = &g_api;
  return STRATA_PROVIDER_RESULT_OK;
#endif
}
#endif
