/*
 * strata.h: the public C API of libstrata, and its stable ABI.
 *
 * Conventions
 *  - Every object comes in a create/destroy pair; destroy accepts NULL.
 *  - Every fallible call returns a strata_status*: NULL means success. A non-NULL
 *    status carries a code and a one-line message and must be released with
 *    strata_status_release(). No C++ exception or abort crosses this boundary.
 *  - Strings returned through `const char**` stay valid for the lifetime of the
 *    object they came from, unless documented otherwise.
 *  - Enum values never change; new values and new functions are only ever added.
 */
#ifndef STRATA_STRATA_H_
#define STRATA_STRATA_H_

#include <stddef.h>
#include <stdint.h>

#if defined(STRATA_BUILDING_LIBRARY)
#define STRATA_API __attribute__((visibility("default")))
#else
#define STRATA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** ABI version of this header. Bumped only on incompatible change (never so far). */
#define STRATA_API_VERSION 1

/** Status codes. Stable numeric values. */
typedef enum strata_status_code {
  STRATA_OK = 0,
  STRATA_INVALID_ARGUMENT = 1, /**< bad caller input: a flag, a tensor, a name */
  STRATA_INVALID_MODEL = 2,    /**< the model does not parse or is malformed */
  STRATA_UNSUPPORTED = 3,      /**< unsupported op, dtype or feature */
  STRATA_NOT_FOUND = 4,        /**< a file, input, output or provider is missing */
  STRATA_RUNTIME_ERROR = 5,    /**< a kernel failed while running */
  STRATA_OUT_OF_MEMORY = 6,    /**< allocation failed or a memory cap was hit */
  STRATA_PROVIDER_ERROR = 7,   /**< a requested accelerator provider cannot be used */
  STRATA_IO_ERROR = 8,         /**< reading or writing a file failed */
  STRATA_INTERNAL = 9,         /**< a bug in strata */
  STRATA_CANCELLED = 10        /**< a run was terminated or passed its deadline (appended in API 1) */
} strata_status_code;

/** Element types; values equal ONNX TensorProto.DataType. */
typedef enum strata_dtype {
  STRATA_DTYPE_UNDEFINED = 0,
  STRATA_DTYPE_FLOAT32 = 1,
  STRATA_DTYPE_UINT8 = 2,
  STRATA_DTYPE_INT8 = 3,
  STRATA_DTYPE_UINT16 = 4,
  STRATA_DTYPE_INT16 = 5,
  STRATA_DTYPE_INT32 = 6,
  STRATA_DTYPE_INT64 = 7,
  STRATA_DTYPE_STRING = 8,
  STRATA_DTYPE_BOOL = 9,
  STRATA_DTYPE_FLOAT16 = 10,
  STRATA_DTYPE_FLOAT64 = 11,
  STRATA_DTYPE_UINT32 = 12,
  STRATA_DTYPE_UINT64 = 13,
  STRATA_DTYPE_BFLOAT16 = 16
} strata_dtype;

typedef struct strata_status strata_status;
typedef struct strata_env strata_env;
typedef struct strata_session_options strata_session_options;
typedef struct strata_session strata_session;
typedef struct strata_tensor strata_tensor;
typedef struct strata_io_binding strata_io_binding;
typedef struct strata_run_options strata_run_options;

/* ---------------------------------------------------------------- version */

/** Library version string, e.g. "0.1.0". Since API 1. */
STRATA_API const char* strata_version(void);
/** The STRATA_API_VERSION the library was built with. Since API 1. */
STRATA_API int strata_api_version(void);

/* ---------------------------------------------------------------- status */

/** Code of a status; STRATA_OK for NULL. Since API 1. */
STRATA_API strata_status_code strata_status_get_code(const strata_status* status);
/** One-line message of a status; "" for NULL. Valid until release. Since API 1. */
STRATA_API const char* strata_status_get_message(const strata_status* status);
/** Name of a code: "OK", "INVALID_MODEL", ... Since API 1. */
STRATA_API const char* strata_status_code_name(strata_status_code code);
/** Frees a status. Accepts NULL. Since API 1. */
STRATA_API void strata_status_release(strata_status* status);

/* ---------------------------------------------------------------- environment */

/** Creates an environment: process-level state (provider discovery, logging). Since API 1. */
STRATA_API strata_status* strata_env_create(strata_env** out);
/** Destroys an environment. All sessions made from it must be destroyed first. Since API 1. */
STRATA_API void strata_env_destroy(strata_env* env);
/**
 * Capability query, e.g. "cuda.weight_prepack", "cpu.avx512f", "cpu.avx512_bf16",
 * "provider.vulkan". Returns 1 or 0; never fails, never loads code that could abort.
 * Unknown names answer 0. Since API 1.
 */
STRATA_API int strata_has_capability(strata_env* env, const char* name);

/**
 * Packs the quantized weights of one com.microsoft MatMulNBits node into the device
 * layout `target` ("cuda-sm80" or "cuda-sm90"; docs/cuda-weight-layout.md) on the CPU;
 * needs no GPU and no CUDA library. b: uint8 [n, ceil(k/block_size), block_size*bits/8]
 * (codes packed low bits first along K); scales: float [n * n_blocks]; zero_points: NULL
 * (implicit 2^(bits-1)) or uint8 packed as in MatMulNBits. bits is 4 or 8, block_size a
 * power of two >= 16. With out == NULL only *out_size is set (the packed size); otherwise
 * out_capacity must be at least that size. INVALID_ARGUMENT names the problem (an
 * unknown target lists the known ones). Since API 1.
 */
STRATA_API strata_status* strata_pack_weights(const char* target, int bits, int64_t n, int64_t k, int64_t block_size,
                                              const uint8_t* b, size_t b_bytes, const float* scales,
                                              size_t scale_count, const uint8_t* zero_points, size_t zp_bytes,
                                              void* out, size_t out_capacity, size_t* out_size);

/* ---------------------------------------------------------------- session options */

/** Creates session options with defaults (all cores, full optimization, device "cpu"). Since API 1. */
STRATA_API strata_status* strata_session_options_create(strata_session_options** out);
/** Destroys session options. Accepts NULL. Since API 1. */
STRATA_API void strata_session_options_destroy(strata_session_options* opts);
/** Intra-op threads; 0 = number of online CPUs. Since API 1. */
STRATA_API strata_status* strata_session_options_set_threads(strata_session_options* opts, int threads);
/** Graph optimization level: 0 none, 1 basic, 2 extended, 99 all (default). Since API 1. */
STRATA_API strata_status* strata_session_options_set_optimization_level(strata_session_options* opts, int level);
/**
 * Provider preference, comma separated: "cpu" (default), "auto", or provider names
 * ("cuda,cpu"). A named provider that cannot be used makes session creation fail with
 * STRATA_PROVIDER_ERROR and its load-report line; only "auto" falls back. Since API 1.
 */
STRATA_API strata_status* strata_session_options_set_providers(strata_session_options* opts, const char* list);
/** Adds an explicit provider library path, searched before STRATA_PROVIDER_PATH. Since API 1. */
STRATA_API strata_status* strata_session_options_add_provider_path(strata_session_options* opts, const char* path);
/**
 * Generic key/value option. Keys: "precision" = "fp32" | "bf16" (CPU fast math);
 * "memory_cap_bytes" = N; "reference_kernels" = "0" | "1"; "run_timeout_ms" = N (each run
 * fails with STRATA_CANCELLED once it has run N ms; 0, the default, is no deadline; checked
 * before each node and each Loop/Scan iteration, so one long kernel finishes first); and
 * provider options
 * "<provider>.<key>" (e.g. "cuda.precision" = "fp32" | "fp16"), forwarded to that provider
 * only. A provider refuses keys and values it does not know at session creation
 * (STRATA_INVALID_ARGUMENT naming them), and an option for a provider the session does
 * not use is refused too (under "auto" it applies only if that provider is picked).
 * Setting a key again replaces its value. Unknown plain keys: STRATA_INVALID_ARGUMENT.
 * Since API 1 (provider options appended in API 1).
 */
STRATA_API strata_status* strata_session_options_set(strata_session_options* opts, const char* key,
                                                     const char* value);

/* ---------------------------------------------------------------- sessions */

/** Loads, checks, optimizes and plans a model file. opts may be NULL. Since API 1. */
STRATA_API strata_status* strata_session_create(strata_env* env, const char* model_path,
                                                const strata_session_options* opts, strata_session** out);
/** Same, from model bytes in memory (external data is resolved against the cwd-less base ""). Since API 1. */
STRATA_API strata_status* strata_session_create_from_memory(strata_env* env, const void* data, size_t size,
                                                            const strata_session_options* opts,
                                                            strata_session** out);
/** Destroys a session. Accepts NULL. Since API 1. */
STRATA_API void strata_session_destroy(strata_session* session);

/** Number of model inputs / outputs. Since API 1. */
STRATA_API size_t strata_session_input_count(const strata_session* session);
STRATA_API size_t strata_session_output_count(const strata_session* session);
/**
 * Metadata of input/output `index`: name, dtype, rank and dims. Unknown dims are -1;
 * `dims` may be NULL to query the rank only; `dims_capacity` bounds what is written.
 * Since API 1.
 */
STRATA_API strata_status* strata_session_input_info(const strata_session* session, size_t index, const char** name,
                                                    strata_dtype* dtype, size_t* rank, int64_t* dims,
                                                    size_t dims_capacity);
STRATA_API strata_status* strata_session_output_info(const strata_session* session, size_t index,
                                                     const char** name, strata_dtype* dtype, size_t* rank,
                                                     int64_t* dims, size_t dims_capacity);
/** Symbolic name of dim `axis` of input `index` ("" if none). Since API 1. */
STRATA_API const char* strata_session_input_dim_name(const strata_session* session, size_t index, size_t axis);

/**
 * Runs the model. `inputs[i]` feeds the input named `input_names[i]`. On success,
 * outputs[j] receives a new tensor for `output_names[j]` (or for the j-th model output
 * if output_names is NULL and output_count equals the model's output count); the caller
 * destroys them. An output may be a sequence, a map or an empty optional (see
 * strata_value_kind_of); each output's memory is its own, shared with nothing else.
 * Safe to call concurrently on one session. Since API 1.
 */
STRATA_API strata_status* strata_session_run(strata_session* session, const char* const* input_names,
                                             const strata_tensor* const* inputs, size_t input_count,
                                             const char* const* output_names, strata_tensor** outputs,
                                             size_t output_count);
/**
 * Ends every run of this session in progress at the call, on any thread (strata_session_run
 * and strata_session_run_binding): each returns STRATA_CANCELLED at its next check (before
 * a node or a Loop/Scan iteration). Runs started after the call are unaffected. Safe to
 * call from any thread at any time, also while runs are in progress; a NULL session is
 * ignored. Since API 1 (appended).
 */
STRATA_API void strata_session_terminate_runs(strata_session* session);

/**
 * Creates per-run options: limits for the runs they are passed to
 * (strata_session_run_with_options, strata_session_run_binding_with_options), besides the
 * session's. One object may serve many runs at once, on any threads and sessions; it must
 * outlive every run given it. Destroy with strata_run_options_destroy. Since API 1 (appended).
 */
STRATA_API strata_status* strata_run_options_create(strata_run_options** out);
/** Destroys run options. Accepts NULL. No run given them may be in progress. Since API 1 (appended). */
STRATA_API void strata_run_options_destroy(strata_run_options* run_options);
/**
 * Sets a run option by name. Keys: "timeout_ms" = N (0, the default: no deadline of its
 * own; at most 10^12): a run given these options that passes N ms returns STRATA_CANCELLED.
 * With the session's "run_timeout_ms" too, the earlier deadline ends the run. A run reads
 * the value when it starts. An unknown key or a bad value is INVALID_ARGUMENT naming it.
 * Since API 1 (appended).
 */
STRATA_API strata_status* strata_run_options_set(strata_run_options* run_options, const char* key,
                                                 const char* value);
/**
 * Ends the runs given these options that are in progress at the call, and no others: each
 * returns STRATA_CANCELLED at its next check, as with strata_session_terminate_runs. Runs
 * started after the call are unaffected, so the options stay usable with nothing to reset.
 * Safe from any thread at any time; NULL is ignored. Since API 1 (appended).
 */
STRATA_API void strata_run_options_terminate(strata_run_options* run_options);
/**
 * strata_session_run with per-run options (NULL: none, the same as strata_session_run).
 * Since API 1 (appended).
 */
STRATA_API strata_status* strata_session_run_with_options(strata_session* session,
                                                          const strata_run_options* run_options,
                                                          const char* const* input_names,
                                                          const strata_tensor* const* inputs, size_t input_count,
                                                          const char* const* output_names, strata_tensor** outputs,
                                                          size_t output_count);
/** Provider that ran node `index` after partitioning ("cpu", "cuda", ...), and the node name. Since API 1. */
STRATA_API size_t strata_session_node_count(const strata_session* session);
STRATA_API strata_status* strata_session_node_info(const strata_session* session, size_t index,
                                                   const char** node_name, const char** op_type,
                                                   const char** provider);

/* ---------------------------------------------------------------- tensors */

/** Allocates a tensor (zero-filled). dims may be NULL when rank is 0. Since API 1. */
STRATA_API strata_status* strata_tensor_create(strata_dtype dtype, const int64_t* dims, size_t rank,
                                               strata_tensor** out);
/**
 * Wraps caller memory without copying; the caller keeps `data` alive and unchanged while
 * the tensor is used. `byte_size` must equal the element count times the element size.
 * String tensors cannot be wrapped. Since API 1.
 */
STRATA_API strata_status* strata_tensor_wrap(strata_dtype dtype, const int64_t* dims, size_t rank, void* data,
                                             size_t byte_size, strata_tensor** out);
/** Destroys a tensor. Accepts NULL. Since API 1. */
STRATA_API void strata_tensor_destroy(strata_tensor* tensor);
STRATA_API strata_dtype strata_tensor_dtype(const strata_tensor* tensor);
STRATA_API size_t strata_tensor_rank(const strata_tensor* tensor);
/** Pointer to the dims array (rank entries). Since API 1. */
STRATA_API const int64_t* strata_tensor_dims(const strata_tensor* tensor);
STRATA_API int64_t strata_tensor_element_count(const strata_tensor* tensor);
STRATA_API size_t strata_tensor_byte_size(const strata_tensor* tensor);
/** Element data (not valid for string tensors; use strata_tensor_string_at). Since API 1. */
STRATA_API void* strata_tensor_data(strata_tensor* tensor);
/** The i-th string of a string tensor, NUL-terminated, or NULL. Since API 1. */
STRATA_API const char* strata_tensor_string_at(const strata_tensor* tensor, size_t i);
/**
 * Sets string `i` of a string tensor (made with strata_tensor_create) to the `size` bytes
 * at `data`, copied; they may contain NUL bytes and need not end with one (data may be
 * NULL when size is 0). INVALID_ARGUMENT for a non-string tensor or `i` out of range.
 * This is how string inputs are fed. Since API 1 (appended).
 */
STRATA_API strata_status* strata_tensor_set_string(strata_tensor* tensor, size_t i, const char* data, size_t size);
/**
 * String `i` of a string tensor and its length in bytes (a string may contain NUL bytes,
 * which strata_tensor_string_at cannot show). *data stays valid until the tensor is
 * destroyed or the string is set again. INVALID_ARGUMENT for a non-string tensor or `i`
 * out of range. Since API 1 (appended).
 */
STRATA_API strata_status* strata_tensor_get_string(const strata_tensor* tensor, size_t i, const char** data,
                                                   size_t* size);
/** Size in bytes of one element of `dtype` (0 for undefined/string). Since API 1. */
STRATA_API size_t strata_dtype_size(strata_dtype dtype);
/** "float32", "int64", ... Since API 1. */
STRATA_API const char* strata_dtype_name(strata_dtype dtype);

/* ---------------------------------------------------------------- non-tensor values */

/*
 * Model inputs and outputs may be sequences, maps (the ai.onnx.ml map types: ZipMap's
 * output is a sequence of maps) or optionals. A strata_tensor handle holds any of them; the
 * strata_tensor_* accessors describe a non-tensor handle as empty (dtype UNDEFINED, rank 0,
 * no elements, NULL data). All of this section is appended in API 1.
 */

/** What a handle holds. Stable numeric values. */
typedef enum strata_value_kind {
  STRATA_VALUE_TENSOR = 0,
  STRATA_VALUE_SEQUENCE = 1, /**< a sequence of tensors, or of maps */
  STRATA_VALUE_MAP = 2,      /**< a map: int64 or string keys, each with one value */
  STRATA_VALUE_NONE = 3      /**< an optional without a value */
} strata_value_kind;

/** What `value` holds (STRATA_VALUE_TENSOR for NULL). Since API 1 (appended). */
STRATA_API strata_value_kind strata_value_kind_of(const strata_tensor* value);
/**
 * Element dtype: a tensor's dtype, a sequence's item dtype (a sequence of maps: the maps'
 * value dtype), a map's value dtype, an optional's declared dtype if known. Since API 1 (appended).
 */
STRATA_API strata_dtype strata_value_elem_dtype(const strata_tensor* value);
/** Number of items of a sequence; INVALID_ARGUMENT for other kinds. Since API 1 (appended). */
STRATA_API strata_status* strata_value_sequence_length(const strata_tensor* value, size_t* length);
/**
 * Item `i` of a sequence as a new handle (a tensor or a map) that the caller destroys. It
 * shares memory with the sequence: writing through one shows in the other. INVALID_ARGUMENT
 * for a non-sequence or `i` out of range. Since API 1 (appended).
 */
STRATA_API strata_status* strata_value_sequence_item(const strata_tensor* value, size_t i, strata_tensor** out);
/**
 * A map's keys (1-D int64 or string, ascending and unique) and its values (1-D, the same
 * length; entry i's value is values[i]) as new tensors that the caller destroys, sharing the
 * map's memory. Either out pointer may be NULL. INVALID_ARGUMENT for other kinds.
 * Since API 1 (appended).
 */
STRATA_API strata_status* strata_value_map_entries(const strata_tensor* value, strata_tensor** keys,
                                                   strata_tensor** values);
/**
 * Creates a sequence of `count` items, all tensors of one dtype or all maps of one key and
 * value dtype. `elem_dtype` is the items' dtype (for maps, their value dtype); it may be
 * UNDEFINED when count > 0, and is required for an empty sequence (of tensors). The sequence
 * refers to the items' memory, as strata_tensor_wrap does: the item handles may be destroyed,
 * but memory they wrap must stay alive. Since API 1 (appended).
 */
STRATA_API strata_status* strata_value_create_sequence(const strata_tensor* const* items, size_t count,
                                                       strata_dtype elem_dtype, strata_tensor** out);
/**
 * Creates a map from 1-D `keys` (int64 or string) and 1-D `values` of the same length, in
 * any order: entries are sorted by key, and a repeated key is INVALID_ARGUMENT naming it.
 * The map refers to the tensors' memory when no reordering is needed. Since API 1 (appended).
 */
STRATA_API strata_status* strata_value_create_map(const strata_tensor* keys, const strata_tensor* values,
                                                  strata_tensor** out);
/** Creates an optional without a value, to feed an optional input. Since API 1 (appended). */
STRATA_API strata_status* strata_value_create_none(strata_tensor** out);
/**
 * The ONNX type of input/output `index`, as ONNX Runtime writes it: "tensor(float)",
 * "seq(tensor(int64))", "map(int64,tensor(float))", "seq(map(string,tensor(float)))",
 * "optional(tensor(float))"; "unknown" when the model does not say. Valid for the session's
 * lifetime. Since API 1 (appended).
 */
STRATA_API strata_status* strata_session_input_type(const strata_session* session, size_t index, const char** type);
STRATA_API strata_status* strata_session_output_type(const strata_session* session, size_t index, const char** type);

/* ---------------------------------------------------------------- io binding (real-time runs) */

/**
 * Creates an io binding for `session`: a reusable set of caller-owned input and output
 * buffers plus the session's per-run state, for repeated runs without per-run setup
 * (docs/hardening.md, "Real-time use"). The session must outlive the binding. A binding
 * is used by one thread at a time; make one per thread to run a session concurrently.
 * Since API 1.
 */
STRATA_API strata_status* strata_io_binding_create(strata_session* session, strata_io_binding** out);
/** Destroys a binding. Accepts NULL. The bound tensors' memory is the caller's and is not freed. Since API 1. */
STRATA_API void strata_io_binding_destroy(strata_io_binding* binding);
/**
 * Binds `tensor` to the model input `name`. The tensor's memory (typically made with
 * strata_tensor_wrap) is read in place on every run, never copied: the caller keeps it
 * alive while bound and may change its contents between runs. The tensor object itself
 * may be destroyed after this call. dtype and shape are checked against the model now;
 * INVALID_ARGUMENT names the input. Binding a name again replaces the earlier tensor.
 * Since API 1.
 */
STRATA_API strata_status* strata_io_binding_bind_input(strata_io_binding* binding, const char* name,
                                                       const strata_tensor* tensor);
/**
 * Binds a caller-owned buffer (`tensor`, e.g. from strata_tensor_wrap) that receives the
 * model output `name` on every run. Its dtype and the model's known dims are checked now,
 * and its exact shape after each run; a mismatch is INVALID_ARGUMENT naming the output.
 * The buffer must not overlap a bound input. Unbound outputs are computed and discarded.
 * Since API 1.
 */
STRATA_API strata_status* strata_io_binding_bind_output(strata_io_binding* binding, const char* name,
                                                        strata_tensor* tensor);
/** Removes all input and output bindings (a no-op while the binding is running). Since API 1. */
STRATA_API void strata_io_binding_clear(strata_io_binding* binding);
/**
 * Runs `session` with the inputs and outputs of `binding` (which must have been created
 * for this session). Every input without an initializer must be bound. After one warm-up
 * run with the same shapes, the runtime's own per-run state is reused rather than
 * reallocated and the only locks taken belong to this session; see docs/hardening.md for
 * what exactly is allocation-free. A second thread running the same binding at the same
 * time gets INVALID_ARGUMENT; the running call is unaffected. Since API 1.
 */
STRATA_API strata_status* strata_session_run_binding(strata_session* session, strata_io_binding* binding);
/**
 * strata_session_run_binding with per-run options (NULL: none). Since API 1 (appended).
 */
STRATA_API strata_status* strata_session_run_binding_with_options(strata_session* session,
                                                                  strata_io_binding* binding,
                                                                  const strata_run_options* run_options);
/**
 * 1 if the last successful run of `binding` wrote every bound output directly into its
 * buffer (no copy), 0 otherwise or before the first run. Since API 1.
 */
STRATA_API int strata_io_binding_outputs_in_place(const strata_io_binding* binding);

/* ---------------------------------------------------------------- providers */

/** Load-report status of a provider candidate. Stable values. */
typedef enum strata_provider_status {
  STRATA_PROVIDER_OK = 0,
  STRATA_PROVIDER_NOT_FOUND = 1,
  STRATA_PROVIDER_MISSING_DEPENDENCY = 2,
  STRATA_PROVIDER_ABI_MISMATCH = 3,
  STRATA_PROVIDER_UNSUPPORTED_CPU = 4,
  STRATA_PROVIDER_NO_DEVICE = 5,
  STRATA_PROVIDER_INIT_FAILED = 6,
  STRATA_PROVIDER_INVALID = 7, /**< not an ELF, corrupt, malformed tables, duplicate name */
  STRATA_PROVIDER_CRASHED = 8  /**< crashed while probed in a child process (--isolate) */
} strata_provider_status;

/**
 * Discovers providers (explicit paths, STRATA_PROVIDER_PATH, the package folder) and
 * fills the environment's load report. Reading the report does not run provider code
 * unless `load` is nonzero, in which case each provider is initialised to check for
 * devices. Since API 1.
 */
STRATA_API strata_status* strata_env_discover_providers(strata_env* env, const char* const* extra_paths,
                                                        size_t extra_count, int load);
/** Number of entries in the load report. Since API 1. */
STRATA_API size_t strata_env_provider_count(const strata_env* env);
/**
 * Entry `index` of the load report: provider name, library path, status, and a one-line
 * detail (the missing soname, the ABI versions, the missing CPU features, ...). Since API 1.
 */
STRATA_API strata_status* strata_env_provider_info(const strata_env* env, size_t index, const char** name,
                                                   const char** path, strata_provider_status* status,
                                                   const char** detail);
/** "OK", "MISSING_DEPENDENCY", ... Since API 1. */
STRATA_API const char* strata_provider_status_name(strata_provider_status status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STRATA_STRATA_H_ */
