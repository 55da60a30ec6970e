/*
 * provider.h: the C ABI between the strata core and an accelerator provider.
 *
 * A provider is a shared library named libstrata-provider-<name>.so that exports at
 * most two symbols:
 *
 *   const strata_provider_probe_info* strata_provider_probe(void);
 *   int32_t strata_provider_init(const strata_host_api* host, const strata_provider_api** out,
 *                                strata_provider_error* err);
 *
 * Rules (see docs/providers.md):
 *  - Plain C only. Every struct starts with `uint32_t struct_size` (sizeof as the
 *    writer compiled it); fields are only ever appended, so a reader checks
 *    struct_size before touching a field added in a later version.
 *  - Errors cross as a strata_provider_result code plus a message written into the
 *    caller's strata_provider_error buffer. No exception, longjmp or abort may cross.
 *  - STRATA_PROVIDER_ABI_VERSION changes only on an incompatible change; the host
 *    refuses a provider whose probe reports another ABI version.
 *  - Pointers handed to the provider are valid only for the duration of the call,
 *    unless documented otherwise (constant data passed to compile must be copied).
 *  - strata_provider_init may be called more than once in a process (one call per
 *    host environment); each successful init is paired with exactly one shutdown on
 *    the table it returned, so a provider with global state reference-counts it.
 *  - On failure, execute must release any output buffers it already allocated.
 */
#ifndef STRATA_PROVIDER_H_
#define STRATA_PROVIDER_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/** ABI version of this header. */
#define STRATA_PROVIDER_ABI_VERSION 1u
/** Largest tensor rank that crosses the ABI in a strata_device_tensor. Since ABI 1. */
#define STRATA_PROVIDER_MAX_RANK 8

/** Result codes of provider functions. Stable values. Since ABI 1. */
typedef enum strata_provider_result {
  STRATA_PROVIDER_RESULT_OK = 0,
  STRATA_PROVIDER_RESULT_ERROR = 1,         /**< generic failure; see the message */
  STRATA_PROVIDER_RESULT_UNSUPPORTED = 2,   /**< op, dtype, shape or attribute not handled */
  STRATA_PROVIDER_RESULT_OUT_OF_MEMORY = 3, /**< device or host allocation failed */
  STRATA_PROVIDER_RESULT_NO_DEVICE = 4,     /**< no usable device / driver */
  STRATA_PROVIDER_RESULT_INVALID_ARGUMENT = 5
} strata_provider_result;

/** Log levels for strata_host_api.log. Since ABI 1. */
typedef enum strata_provider_log_level {
  STRATA_PROVIDER_LOG_DEBUG = 0,
  STRATA_PROVIDER_LOG_INFO = 1,
  STRATA_PROVIDER_LOG_WARNING = 2,
  STRATA_PROVIDER_LOG_ERROR = 3
} strata_provider_log_level;

/**
 * Error message buffer owned by the caller. A failing function writes a NUL-terminated
 * one-line message of at most capacity-1 bytes into `message` (see strata_provider_set_error).
 * Since ABI 1.
 */
typedef struct strata_provider_error {
  uint32_t struct_size;
  uint32_t capacity; /**< bytes available at message (including the NUL) */
  char* message;
} strata_provider_error;

/** Copies `msg` into err (truncating). Safe with err == NULL. Since ABI 1. */
static inline void strata_provider_set_error(strata_provider_error* err, const char* msg) {
  if (err == NULL || err->message == NULL || err->capacity == 0) return;
  size_t n = msg ? strlen(msg) : 0;
  if (n >= err->capacity) n = err->capacity - 1;
  if (n) memcpy(err->message, msg, n);
  err->message[n] = '\0';
}

/* ------------------------------------------------------------------ probe */

/**
 * What strata_provider_probe returns: a pointer to static, immutable data. The probe
 * must be side-effect free and safe on a machine without the hardware or driver: it
 * must not touch a device, allocate, or load libraries. Since ABI 1.
 */
typedef struct strata_provider_probe_info {
  uint32_t struct_size;
  uint32_t abi_version;         /**< STRATA_PROVIDER_ABI_VERSION the provider was built with */
  const char* name;             /**< "cuda", "vulkan", "ref": [a-z0-9_]+ */
  const char* variant;          /**< build variant, e.g. "cuda13-sm80"; may be "" */
  const char* version;          /**< provider version, e.g. "0.1.0" */
  const char* cpu_features;     /**< comma-separated required host CPU features ("avx2,fma"), or "" */
  const char* needed_libraries; /**< comma-separated sonames it needs ("libcudart.so.13"), or "" */
  const char* min_driver;       /**< minimum driver version as text, or "" */
} strata_provider_probe_info;

typedef const strata_provider_probe_info* (*strata_provider_probe_fn)(void);

/* ------------------------------------------------------------------ host API */

/**
 * Services the host offers to the provider; valid from init until shutdown returns.
 * Every function may be called from any thread. Since ABI 1.
 */
typedef struct strata_host_api {
  uint32_t struct_size;
  uint32_t abi_version;
  void* context; /**< pass back as the first argument of every function below */
  /** Writes one log line through the host's logger. Since ABI 1. */
  void (*log)(void* context, int32_t level, const char* message);
  /** Host heap allocation (alignment: power of two, <= 4096). NULL on failure. Since ABI 1. */
  void* (*alloc)(void* context, size_t bytes, size_t alignment);
  /** Frees memory from alloc. Accepts NULL. Since ABI 1. */
  void (*free)(void* context, void* ptr);
  /** Reports an asynchronous error (one not tied to a call's return code). Since ABI 1. */
  void (*report_error)(void* context, const char* message);
} strata_host_api;

/* ------------------------------------------------------------------ devices */

/** Properties of one device. Strings stay valid until shutdown. Since ABI 1. */
typedef struct strata_device_info {
  uint32_t struct_size;
  const char* name;           /**< "NVIDIA H100 80GB HBM3" */
  uint64_t memory_bytes;      /**< total device memory, 0 if unknown */
  uint32_t compute_units;     /**< SMs, CUs, cores; 0 if unknown */
  const char* driver_version; /**< "" if unknown */
  const char* api_version;    /**< runtime/API version, "" if unknown */
} strata_device_info;

/* ------------------------------------------------------------------ graph descriptions */

/** Attribute types; values equal ONNX AttributeProto.AttributeType. Since ABI 1. */
typedef enum strata_attr_type {
  STRATA_ATTR_UNDEFINED = 0,
  STRATA_ATTR_FLOAT = 1,
  STRATA_ATTR_INT = 2,
  STRATA_ATTR_STRING = 3,
  STRATA_ATTR_TENSOR = 4,
  STRATA_ATTR_GRAPH = 5, /**< not passed across the ABI (nodes with subgraphs are never offered) */
  STRATA_ATTR_FLOATS = 6,
  STRATA_ATTR_INTS = 7,
  STRATA_ATTR_STRINGS = 8
} strata_attr_type;

/** One node attribute. Only the fields of its type are meaningful. Since ABI 1. */
typedef struct strata_attribute {
  uint32_t struct_size;
  const char* name;
  int32_t type;               /**< strata_attr_type */
  int64_t i;                  /**< INT */
  float f;                    /**< FLOAT */
  const char* s;              /**< STRING (NUL-terminated) */
  size_t count;               /**< element count of FLOATS / INTS / STRINGS */
  const int64_t* ints;        /**< INTS */
  const float* floats;        /**< FLOATS */
  const char* const* strings; /**< STRINGS */
  int32_t tensor_dtype;       /**< TENSOR: strata_dtype value */
  uint32_t tensor_rank;       /**< TENSOR */
  const int64_t* tensor_dims; /**< TENSOR */
  const void* tensor_data;    /**< TENSOR: dense host data */
  size_t tensor_bytes;        /**< TENSOR */
} strata_attribute;

/**
 * A value (tensor) seen by a node or partition. dtype uses strata_dtype values;
 * rank is -1 when unknown and a dim is -1 when unknown. const_data is non-NULL for
 * constant initializers: dense host memory valid only during the call. Since ABI 1.
 */
typedef struct strata_value_desc {
  uint32_t struct_size;
  const char* name;
  int32_t dtype;
  int32_t rank;
  const int64_t* dims;
  const void* const_data;
  size_t const_bytes;
} strata_value_desc;

/**
 * A node. inputs/outputs are indices into `values` (-1 marks an omitted optional
 * input/output). Since ABI 1.
 */
typedef struct strata_node_desc {
  uint32_t struct_size;
  const char* name;
  const char* op_type;
  const char* domain; /**< "" for ai.onnx */
  int32_t opset;      /**< imported opset of the node's domain */
  const strata_value_desc* values;
  size_t value_count;
  const int32_t* inputs;
  size_t input_count;
  const int32_t* outputs;
  size_t output_count;
  const strata_attribute* attributes;
  size_t attribute_count;
} strata_node_desc;

/** The attribute called `name`, or NULL. Since ABI 1. */
static inline const strata_attribute* strata_node_find_attr(const strata_node_desc* node, const char* name) {
  size_t i;
  for (i = 0; i < node->attribute_count; ++i) {
    if (strcmp(node->attributes[i].name, name) == 0) return &node->attributes[i];
  }
  return NULL;
}
/** INT attribute `name`, or `def` when absent or of another type. Since ABI 1. */
static inline int64_t strata_node_attr_int(const strata_node_desc* node, const char* name, int64_t def) {
  const strata_attribute* a = strata_node_find_attr(node, name);
  return (a && a->type == STRATA_ATTR_INT) ? a->i : def;
}
/** FLOAT attribute `name`, or `def`. Since ABI 1. */
static inline float strata_node_attr_float(const strata_node_desc* node, const char* name, float def) {
  const strata_attribute* a = strata_node_find_attr(node, name);
  return (a && a->type == STRATA_ATTR_FLOAT) ? a->f : def;
}
/** STRING attribute `name`, or `def`. Since ABI 1. */
static inline const char* strata_node_attr_string(const strata_node_desc* node, const char* name, const char* def) {
  const strata_attribute* a = strata_node_find_attr(node, name);
  return (a && a->type == STRATA_ATTR_STRING) ? a->s : def;
}
/** INTS attribute `name`: its element pointer and count, or NULL and 0. Since ABI 1. */
static inline const int64_t* strata_node_attr_ints(const strata_node_desc* node, const char* name, size_t* count) {
  const strata_attribute* a = strata_node_find_attr(node, name);
  if (a && a->type == STRATA_ATTR_INTS) {
    *count = a->count;
    return a->ints;
  }
  *count = 0;
  return NULL;
}
/** The value desc of input `i`, or NULL when omitted or out of range. Since ABI 1. */
static inline const strata_value_desc* strata_node_input(const strata_node_desc* node, size_t i) {
  if (i >= node->input_count || node->inputs[i] < 0 || (size_t)node->inputs[i] >= node->value_count) return NULL;
  return &node->values[node->inputs[i]];
}
/** The value desc of output `i`, or NULL. Since ABI 1. */
static inline const strata_value_desc* strata_node_output(const strata_node_desc* node, size_t i) {
  if (i >= node->output_count || node->outputs[i] < 0 || (size_t)node->outputs[i] >= node->value_count) return NULL;
  return &node->values[node->outputs[i]];
}

/**
 * A partition to compile: nodes in topological order over one shared value table.
 * `inputs` are the values fed at execute time (in execute's input order), `outputs`
 * the values returned (in order); everything else is either a constant (const_data
 * set) or an intermediate that stays on the device. Since ABI 1.
 */
typedef struct strata_partition_desc {
  uint32_t struct_size;
  const char* name;
  const strata_value_desc* values;
  size_t value_count;
  const strata_node_desc* nodes; /**< each node's `values` points at this same table */
  size_t node_count;
  const int32_t* inputs;
  size_t input_count;
  const int32_t* outputs;
  size_t output_count;
  /**
   * Session options addressed to this provider, with the "<provider>." prefix removed
   * (the session option "cuda.precision"="fp16" arrives as key "precision", value "fp16").
   * Parallel arrays of option_count NUL-terminated strings. A provider must refuse a key
   * it does not know, or a value it cannot honour, with INVALID_ARGUMENT naming both:
   * an option is never ignored silently. Read through strata_partition_option.
   * Appended in ABI 1 (hosts built before it have a smaller struct_size).
   */
  const char* const* option_keys;
  const char* const* option_values;
  size_t option_count;
} strata_partition_desc;

/**
 * Number of provider options the host passed (0 when its struct predates them).
 * Since ABI 1.
 */
static inline size_t strata_partition_option_count(const strata_partition_desc* p) {
  if (!p || p->struct_size < offsetof(strata_partition_desc, option_count) + sizeof(size_t)) return 0;
  return p->option_count;
}

/** Value of provider option `key`, or NULL when it was not set. Since ABI 1. */
static inline const char* strata_partition_option(const strata_partition_desc* p, const char* key) {
  size_t n = strata_partition_option_count(p);
  for (size_t i = 0; i < n; ++i)
    if (p->option_keys[i] && strcmp(p->option_keys[i], key) == 0) return p->option_values[i];
  return NULL;
}

/* ------------------------------------------------------------------ execution objects */

/** Opaque device memory and compiled partition handles, owned by the provider. */
typedef struct strata_device_buffer strata_device_buffer;
typedef struct strata_compiled_partition strata_compiled_partition;

/**
 * A tensor in device memory: dtype, shape, and a byte offset into a buffer. For
 * execute's outputs the provider fills every field and allocates the buffer with its
 * own buffer_alloc; the host frees it with buffer_free. Since ABI 1.
 */
typedef struct strata_device_tensor {
  uint32_t struct_size;
  int32_t dtype;
  uint32_t rank;
  int64_t dims[STRATA_PROVIDER_MAX_RANK];
  strata_device_buffer* buffer;
  size_t byte_offset;
} strata_device_tensor;

/* ------------------------------------------------------------------ provider vtable */

/**
 * What strata_provider_init returns. Every function takes `self` first. All functions
 * marked "required" must be non-NULL; the host refuses the provider otherwise. Functions
 * returning int32_t return a strata_provider_result and, on failure, write `err`.
 * Since ABI 1.
 */
typedef struct strata_provider_api {
  uint32_t struct_size;
  uint32_t abi_version;
  void* self;

  /** Required. Number of usable devices. 0 (or NO_DEVICE with a reason) means none. Since ABI 1. */
  int32_t (*device_count)(void* self, uint32_t* count, strata_provider_error* err);
  /** Required. Properties of device `index`. The host sets out->struct_size. Since ABI 1. */
  int32_t (*device_info)(void* self, uint32_t index, strata_device_info* out, strata_provider_error* err);
  /**
   * Required. Sets *supported to 1 if the provider can run `node` on `device` as
   * described (dtypes, shapes, attributes), 0 otherwise. Must not fail for an unknown op:
   * it answers 0. Since ABI 1.
   */
  int32_t (*supports_node)(void* self, uint32_t device, const strata_node_desc* node, int32_t* supported,
                           strata_provider_error* err);
  /** Required. Compiles/prepares a partition; constants must be copied. Since ABI 1. */
  int32_t (*compile)(void* self, uint32_t device, const strata_partition_desc* partition,
                     strata_compiled_partition** out, strata_provider_error* err);
  /** Required. Releases a compiled partition. Accepts NULL. Since ABI 1. */
  void (*release_partition)(void* self, strata_compiled_partition* partition);
  /** Required. Allocates `bytes` of device memory (bytes may be 0). Since ABI 1. */
  int32_t (*buffer_alloc)(void* self, uint32_t device, size_t bytes, strata_device_buffer** out,
                          strata_provider_error* err);
  /** Required. Frees a buffer. Accepts NULL. Since ABI 1. */
  void (*buffer_free)(void* self, strata_device_buffer* buffer);
  /** Required. Copies host memory into buffer at `offset`. Since ABI 1. */
  int32_t (*copy_to_device)(void* self, strata_device_buffer* dst, size_t offset, const void* src, size_t bytes,
                            strata_provider_error* err);
  /** Required. Copies from buffer at `offset` into host memory. Completes before returning. Since ABI 1. */
  int32_t (*copy_to_host)(void* self, void* dst, const strata_device_buffer* src, size_t offset, size_t bytes,
                          strata_provider_error* err);
  /**
   * Required. Runs a compiled partition. `inputs` follow the partition's input order;
   * the provider fills `outputs` (output_count entries, struct_size set by the host),
   * allocating each output buffer. May run asynchronously; synchronize or copy_to_host
   * waits. Safe to call concurrently on the same compiled partition. Since ABI 1.
   */
  int32_t (*execute)(void* self, strata_compiled_partition* partition, const strata_device_tensor* inputs,
                     size_t input_count, strata_device_tensor* outputs, size_t output_count,
                     strata_provider_error* err);
  /** Required. Waits for all queued work on `device`. Since ABI 1. */
  int32_t (*synchronize)(void* self, uint32_t device, strata_provider_error* err);
  /** Required. Releases everything; no call follows. Since ABI 1. */
  void (*shutdown)(void* self);
  /**
   * Optional (may be NULL). 1 if the provider has the named capability ("weight_prepack",
   * ...), else 0. Since ABI 1.
   */
  int32_t (*has_capability)(void* self, const char* name);
  /**
   * Optional (may be NULL; read it only when struct_size covers it). The provider-specific
   * extension function called `name` (e.g. "cuda.pack_weights.v1", see the provider's
   * documentation for its signature), or NULL when the provider has none by that name.
   * The pointer stays valid until shutdown. A name never changes signature: a new
   * signature gets a new name, so callers cast the result to the documented type.
   * Appended in ABI 1 (providers built before it have a smaller struct_size).
   */
  void* (*get_extension)(void* self, const char* name);
} strata_provider_api;

/** Signature of strata_provider_init. Since ABI 1. */
typedef int32_t (*strata_provider_init_fn)(const strata_host_api* host, const strata_provider_api** out,
                                           strata_provider_error* err);

/** The exported symbol names. Since ABI 1. */
#define STRATA_PROVIDER_PROBE_SYMBOL "strata_provider_probe"
#define STRATA_PROVIDER_INIT_SYMBOL "strata_provider_init"

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STRATA_PROVIDER_H_ */
