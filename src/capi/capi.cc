// The C API (include/strata/strata.h) over the C++ engine. Every entry point is
// exception-safe: see capi::Guard.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <sstream>

#include "capi/capi_internal.h"
#include "capi/env.h"

using strata::capi::Guard;
using strata::capi::MakeError;
using strata::capi::ParseCount;
using strata::capi::ToC;

namespace strata::capi {

strata_status* MakeError(strata_status_code code, const std::string& msg) {
  auto* s = new (std::nothrow) strata_status{code, msg};
  return s;
}

strata_status* ToC(const Status& st) {
  if (st.ok()) return nullptr;
  return MakeError(static_cast<strata_status_code>(st.code()), st.message());
}

// strtoull took "-1" as 2^64-1, and leading spaces and a '+': from_chars over the whole string.
bool ParseCount(const std::string& v, unsigned long long max, unsigned long long* out) {
  const char* end = v.data() + v.size();
  unsigned long long n = 0;
  const auto [p, ec] = std::from_chars(v.data(), end, n);
  if (ec != std::errc() || p != end || n > max) return false;
  *out = n;
  return true;
}

}  // namespace strata::capi

namespace strata::capi {

bool ValidDType(strata_dtype d) {
  switch (d) {
    case STRATA_DTYPE_FLOAT32:
    case STRATA_DTYPE_UINT8:
    case STRATA_DTYPE_INT8:
    case STRATA_DTYPE_UINT16:
    case STRATA_DTYPE_INT16:
    case STRATA_DTYPE_INT32:
    case STRATA_DTYPE_INT64:
    case STRATA_DTYPE_STRING:
    case STRATA_DTYPE_BOOL:
    case STRATA_DTYPE_FLOAT16:
    case STRATA_DTYPE_FLOAT64:
    case STRATA_DTYPE_UINT32:
    case STRATA_DTYPE_UINT64:
    case STRATA_DTYPE_BFLOAT16:
      return true;
    default:
      return false;
  }
}

}  // namespace strata::capi

namespace {

using strata::capi::ToDType;
using strata::capi::ValidDType;

strata_status* MakeShape(const int64_t* dims, size_t rank, strata::Shape* out) {
  STRATA_CHECK_ARG(rank == 0 || dims, "dims is NULL but rank is nonzero");
  STRATA_CHECK_ARG(rank <= 64, "rank above 64 is not supported");
  out->assign(dims, dims + rank);
  auto n = strata::CheckedNumElements(*out, "tensor");
  if (!n.ok()) return ToC(n.status());
  return nullptr;
}

strata_status* Info(const std::vector<strata::ValueInfo>& infos, size_t index, const char* what, const char** name,
                    strata_dtype* dtype, size_t* rank, int64_t* dims, size_t cap) {
  if (index >= infos.size()) {
    std::ostringstream os;
    os << what << " index " << index << " is out of range (model has " << infos.size() << ")";
    return MakeError(STRATA_INVALID_ARGUMENT, os.str());
  }
  const auto& vi = infos[index];
  if (name) *name = vi.name.c_str();
  if (dtype) *dtype = static_cast<strata_dtype>(vi.type.elem_type);
  if (rank) *rank = vi.type.has_shape ? vi.type.dims.size() : 0;
  if (dims)
    for (size_t i = 0; i < vi.type.dims.size() && i < cap; ++i) dims[i] = vi.type.dims[i].value;
  return nullptr;
}

}  // namespace

extern "C" {

const char* strata_version(void) { return STRATA_VERSION_STRING; }
int strata_api_version(void) { return STRATA_API_VERSION; }

strata_status_code strata_status_get_code(const strata_status* s) { return s ? s->code : STRATA_OK; }
const char* strata_status_get_message(const strata_status* s) { return s ? s->message.c_str() : ""; }
const char* strata_status_code_name(strata_status_code code) {
  return strata::StatusCodeName(static_cast<strata::StatusCode>(code));
}
void strata_status_release(strata_status* s) { delete s; }

strata_status* strata_session_options_create(strata_session_options** out) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(out, "out is NULL");
    *out = new strata_session_options();
    return nullptr;
  });
}
void strata_session_options_destroy(strata_session_options* o) { delete o; }

strata_status* strata_session_options_set_threads(strata_session_options* o, int threads) {
  STRATA_CHECK_ARG(o, "options is NULL");
  STRATA_CHECK_ARG(threads >= 0 && threads <= 1024, "threads must be between 0 and 1024");
  o->opts.threads = threads;
  return nullptr;
}

strata_status* strata_session_options_set_optimization_level(strata_session_options* o, int level) {
  STRATA_CHECK_ARG(o, "options is NULL");
  STRATA_CHECK_ARG(level >= 0 && level <= 99, "optimization level must be between 0 and 99");
  o->opts.optimization_level = level;
  return nullptr;
}

strata_status* strata_session_options_set_providers(strata_session_options* o, const char* list) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(o && list, "options or list is NULL");
    std::vector<std::string> names;
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ',')) {
      size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
      if (b == std::string::npos) continue;
      names.push_back(item.substr(b, e - b + 1));
    }
    STRATA_CHECK_ARG(!names.empty(), "provider list is empty");
    o->opts.providers = names;
    return nullptr;
  });
}

strata_status* strata_session_options_add_provider_path(strata_session_options* o, const char* path) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(o && path && *path, "options or path is NULL/empty");
    o->opts.provider_paths.emplace_back(path);
    return nullptr;
  });
}

strata_status* strata_session_options_set(strata_session_options* o, const char* key, const char* value) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(o && key && value, "options, key or value is NULL");
    std::string k = key, v = value;
    if (k == "precision") {
      if (v == "fp32") {
        o->opts.kernel.bf16_fast_math = false;
      } else if (v == "bf16") {
        o->opts.kernel.bf16_fast_math = true;
      } else {
        return MakeError(STRATA_INVALID_ARGUMENT, "precision must be 'fp32' or 'bf16', got '" + v + "'");
      }
      return nullptr;
    }
    if (k == "memory_cap_bytes") {
      unsigned long long n = 0;
      if (!ParseCount(v, ~0ULL, &n))
        return MakeError(STRATA_INVALID_ARGUMENT, "memory_cap_bytes must be a non-negative integer, got '" + v + "'");
      o->opts.memory_cap_bytes = static_cast<size_t>(n);
      return nullptr;
    }
    if (k == "run_timeout_ms") {
      unsigned long long n = 0;
      if (!ParseCount(v, strata::kMaxRunTimeoutMs, &n))
        return MakeError(STRATA_INVALID_ARGUMENT,
                         "run_timeout_ms must be an integer from 0 (no deadline) to 10^12, got '" + v + "'");
      o->opts.run_timeout_ms = static_cast<int64_t>(n);
      return nullptr;
    }
    if (k == "reference_kernels") {
      o->opts.kernel.prefer_reference = (v == "1" || v == "true");
      return nullptr;
    }
    if (k.find('.') != std::string::npos) {
      // "<provider>.<key>": forwarded to that provider's compile, which refuses keys it
      // does not know. The name is checked here; the provider is checked at session creation.
      std::string provider, pkey;
      strata::Status st = strata::SplitProviderOption(k, &provider, &pkey);
      if (!st.ok()) return MakeError(STRATA_INVALID_ARGUMENT, st.message());
      for (auto& [ok, ov] : o->opts.provider_options)
        if (ok == k) {
          ov = v;
          return nullptr;
        }
      o->opts.provider_options.emplace_back(k, v);
      return nullptr;
    }
    return MakeError(STRATA_INVALID_ARGUMENT, "unknown session option '" + k + "'");
  });
}

strata_status* strata_session_create(strata_env* env, const char* path, const strata_session_options* o,
                                     strata_session** out) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(out, "out is NULL");
    *out = nullptr;
    STRATA_CHECK_ARG(path, "model path is NULL");
    strata::SessionOptions opts = o ? o->opts : strata::SessionOptions();
    if (env) opts.provider_manager = env->providers.get();
    auto s = strata::Session::CreateFromFile(path, opts);
    if (!s.ok()) return ToC(s.status());
    *out = new strata_session{env, std::move(s).value(), {}, {}};
    strata::capi::FillTypeStrings(*out);
    return nullptr;
  });
}

strata_status* strata_session_create_from_memory(strata_env* env, const void* data, size_t size,
                                                 const strata_session_options* o, strata_session** out) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(out, "out is NULL");
    *out = nullptr;
    STRATA_CHECK_ARG(data || size == 0, "model data is NULL");
    strata::SessionOptions opts = o ? o->opts : strata::SessionOptions();
    if (env) opts.provider_manager = env->providers.get();
    auto s = strata::Session::CreateFromBytes(data, size, opts);
    if (!s.ok()) return ToC(s.status());
    *out = new strata_session{env, std::move(s).value(), {}, {}};
    strata::capi::FillTypeStrings(*out);
    return nullptr;
  });
}

void strata_session_destroy(strata_session* s) { delete s; }

void strata_session_terminate_runs(strata_session* s) {
  if (s != nullptr && s->session) s->session->TerminateRuns();
}

size_t strata_session_input_count(const strata_session* s) { return s ? s->session->inputs().size() : 0; }
size_t strata_session_output_count(const strata_session* s) { return s ? s->session->outputs().size() : 0; }

strata_status* strata_session_input_info(const strata_session* s, size_t index, const char** name, strata_dtype* dtype,
                                         size_t* rank, int64_t* dims, size_t cap) {
  STRATA_CHECK_ARG(s, "session is NULL");
  return Info(s->session->inputs(), index, "input", name, dtype, rank, dims, cap);
}
strata_status* strata_session_output_info(const strata_session* s, size_t index, const char** name, strata_dtype* dtype,
                                          size_t* rank, int64_t* dims, size_t cap) {
  STRATA_CHECK_ARG(s, "session is NULL");
  return Info(s->session->outputs(), index, "output", name, dtype, rank, dims, cap);
}
const char* strata_session_input_dim_name(const strata_session* s, size_t index, size_t axis) {
  if (!s || index >= s->session->inputs().size()) return "";
  const auto& dims = s->session->inputs()[index].type.dims;
  return axis < dims.size() ? dims[axis].param.c_str() : "";
}

}  // extern "C"

namespace {

// strata_session_run and strata_session_run_with_options; run may be NULL.
strata_status* RunSession(strata_session* s, const strata_run_options* run, const char* const* input_names,
                          const strata_tensor* const* inputs, size_t input_count, const char* const* output_names,
                          strata_tensor** outputs, size_t output_count) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(s, "session is NULL");
    STRATA_CHECK_ARG(input_count == 0 || (input_names && inputs), "input_names or inputs is NULL");
    STRATA_CHECK_ARG(output_count == 0 || outputs, "outputs is NULL");
    std::vector<std::pair<std::string, strata::Value>> feeds;
    for (size_t i = 0; i < input_count; ++i) {
      STRATA_CHECK_ARG(input_names[i] && inputs[i], "an input name or tensor is NULL");
      feeds.emplace_back(input_names[i], strata::capi::AsValue(*inputs[i]));
    }
    std::vector<std::string> names;
    if (output_names) {
      for (size_t j = 0; j < output_count; ++j) {
        STRATA_CHECK_ARG(output_names[j], "an output name is NULL");
        names.emplace_back(output_names[j]);
      }
    } else if (output_count != s->session->outputs().size()) {
      return MakeError(STRATA_INVALID_ARGUMENT, "output_names is NULL, so output_count must equal the model's " +
                                                    std::to_string(s->session->outputs().size()) + " outputs");
    }
    for (size_t j = 0; j < output_count; ++j) outputs[j] = nullptr;
    auto r = s->session->Run(feeds, names, run ? &run->opts : nullptr);
    if (!r.ok()) return ToC(r.status());
    feeds.clear();  // drop our references to the callers' input buffers before counting owners
    auto fail = [&](strata_status* st) {
      for (size_t k = 0; k < output_count; ++k) {
        delete outputs[k];
        outputs[k] = nullptr;
      }
      return st;
    };
    std::vector<const strata::Buffer*> handed_out;
    for (size_t j = 0; j < output_count; ++j) {
      const strata::Value& v = (*r)[j];
      if (!v.is_tensor()) {
        // Sequences and maps may share items with constants, inputs or each other (ZipMap's
        // maps share their keys): the caller gets its own copy.
        auto copy = strata::capi::DeepCopy(v);
        if (!copy.ok()) return fail(ToC(copy.status()));
        outputs[j] = strata::capi::NewHandle(std::move(copy).value());
        continue;
      }
      // The caller owns each output and may write into it or keep it past the session and
      // the inputs. An output whose memory is also held elsewhere (a model constant, perhaps
      // mapped read-only from the file; an input passed through; another output; a view of
      // a buffer another output uses) is returned as a private copy instead.
      const auto& buf = v.tensor().buffer();
      bool shared = false;
      if (buf) {
        long held_here = 0;
        for (size_t k = 0; k < output_count; ++k)
          if ((*r)[k].is_tensor() && (*r)[k].tensor().buffer() == buf) ++held_here;
        shared = buf.use_count() > held_here ||
                 std::find(handed_out.begin(), handed_out.end(), buf.get()) != handed_out.end();
        handed_out.push_back(buf.get());
      }
      if (shared) {
        auto copy = v.tensor().Clone();
        if (!copy.ok()) return fail(ToC(copy.status()));
        outputs[j] = strata::capi::NewHandle(std::move(copy).value());
      } else {
        outputs[j] = strata::capi::NewHandle(v.tensor());
      }
    }
    return nullptr;
  });
}

}  // namespace

extern "C" {

strata_status* strata_session_run(strata_session* s, const char* const* input_names, const strata_tensor* const* inputs,
                                  size_t input_count, const char* const* output_names, strata_tensor** outputs,
                                  size_t output_count) {
  return RunSession(s, nullptr, input_names, inputs, input_count, output_names, outputs, output_count);
}

strata_status* strata_session_run_with_options(strata_session* s, const strata_run_options* run_options,
                                               const char* const* input_names, const strata_tensor* const* inputs,
                                               size_t input_count, const char* const* output_names,
                                               strata_tensor** outputs, size_t output_count) {
  return RunSession(s, run_options, input_names, inputs, input_count, output_names, outputs, output_count);
}

strata_status* strata_run_options_create(strata_run_options** out) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(out, "out is NULL");
    *out = new strata_run_options();
    return nullptr;
  });
}

void strata_run_options_destroy(strata_run_options* run_options) { delete run_options; }

strata_status* strata_run_options_set(strata_run_options* r, const char* key, const char* value) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(r && key && value, "run options, key or value is NULL");
    const std::string k = key, v = value;
    if (k == "timeout_ms") {
      unsigned long long n = 0;
      if (!ParseCount(v, strata::kMaxRunTimeoutMs, &n))
        return MakeError(STRATA_INVALID_ARGUMENT,
                         "run option timeout_ms must be an integer from 0 (no deadline) to 10^12, got '" + v + "'");
      return ToC(r->opts.SetTimeoutMs(static_cast<int64_t>(n)));
    }
    return MakeError(STRATA_INVALID_ARGUMENT, "unknown run option '" + k + "' (known: timeout_ms)");
  });
}

void strata_run_options_terminate(strata_run_options* run_options) {
  if (run_options != nullptr) run_options->opts.Terminate();
}

size_t strata_session_node_count(const strata_session* s) { return s ? s->session->assignments().size() : 0; }
strata_status* strata_session_node_info(const strata_session* s, size_t index, const char** node_name,
                                        const char** op_type, const char** provider) {
  STRATA_CHECK_ARG(s, "session is NULL");
  const auto& a = s->session->assignments();
  STRATA_CHECK_ARG(index < a.size(), "node index out of range");
  if (node_name) *node_name = a[index].node_name.c_str();
  if (op_type) *op_type = a[index].op_type.c_str();
  if (provider) *provider = a[index].provider.c_str();
  return nullptr;
}

strata_status* strata_tensor_create(strata_dtype dtype, const int64_t* dims, size_t rank, strata_tensor** out) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(out, "out is NULL");
    *out = nullptr;
    STRATA_CHECK_ARG(ValidDType(dtype), "unknown dtype " + std::to_string(static_cast<int>(dtype)));
    strata::Shape shape;
    if (strata_status* st = MakeShape(dims, rank, &shape)) return st;
    auto t = strata::Tensor::Zeros(ToDType(dtype), shape);
    if (!t.ok()) return ToC(t.status());
    *out = strata::capi::NewHandle(std::move(t).value());
    return nullptr;
  });
}

strata_status* strata_tensor_wrap(strata_dtype dtype, const int64_t* dims, size_t rank, void* data, size_t byte_size,
                                  strata_tensor** out) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(out, "out is NULL");
    *out = nullptr;
    STRATA_CHECK_ARG(ValidDType(dtype), "unknown dtype " + std::to_string(static_cast<int>(dtype)));
    STRATA_CHECK_ARG(dtype != STRATA_DTYPE_STRING, "string tensors cannot wrap caller memory");
    strata::Shape shape;
    if (strata_status* st = MakeShape(dims, rank, &shape)) return st;
    int64_t n = strata::NumElements(shape);
    size_t es = strata::DataTypeSize(ToDType(dtype));
    if (static_cast<uint64_t>(n) > SIZE_MAX / es || static_cast<size_t>(n) * es != byte_size) {
      return MakeError(STRATA_INVALID_ARGUMENT, "byte_size " + std::to_string(byte_size) + " does not match shape " +
                                                    strata::ShapeToString(shape) + " of " +
                                                    strata::DataTypeName(ToDType(dtype)));
    }
    STRATA_CHECK_ARG(data || byte_size == 0, "data is NULL");
    *out = strata::capi::NewHandle(strata::Tensor::Wrap(ToDType(dtype), shape, data));
    return nullptr;
  });
}

void strata_tensor_destroy(strata_tensor* t) { delete t; }
strata_dtype strata_tensor_dtype(const strata_tensor* t) {
  return t ? static_cast<strata_dtype>(t->tensor.dtype()) : STRATA_DTYPE_UNDEFINED;
}
size_t strata_tensor_rank(const strata_tensor* t) { return t ? t->tensor.rank() : 0; }
const int64_t* strata_tensor_dims(const strata_tensor* t) { return t ? t->tensor.shape().data() : nullptr; }
int64_t strata_tensor_element_count(const strata_tensor* t) {
  return t && t->tensor.valid() ? t->tensor.num_elements() : 0;
}
size_t strata_tensor_byte_size(const strata_tensor* t) {
  return t && t->tensor.dtype() != strata::DataType::kString ? t->tensor.byte_size() : 0;
}
void* strata_tensor_data(strata_tensor* t) {
  if (!t || t->tensor.dtype() == strata::DataType::kString) return nullptr;
  return t->tensor.raw_mutable_data();
}
const char* strata_tensor_string_at(const strata_tensor* t, size_t i) {
  if (!t || t->tensor.dtype() != strata::DataType::kString || i >= static_cast<size_t>(t->tensor.num_elements()))
    return nullptr;
  return t->tensor.data<std::string>()[i].c_str();
}
strata_status* strata_tensor_set_string(strata_tensor* t, size_t i, const char* data, size_t size) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(t, "tensor is NULL");
    STRATA_CHECK_ARG(t->tensor.dtype() == strata::DataType::kString,
                     std::string("strata_tensor_set_string: the tensor is ") + strata::DataTypeName(t->tensor.dtype()) +
                         ", not string");
    const auto n = static_cast<size_t>(t->tensor.num_elements());
    STRATA_CHECK_ARG(i < n, "string index " + std::to_string(i) + " is out of range (the tensor has " +
                                std::to_string(n) + " elements)");
    STRATA_CHECK_ARG(data || size == 0, "data is NULL");
    t->tensor.mutable_data<std::string>()[i].assign(data ? data : "", size);
    return nullptr;
  });
}
strata_status* strata_tensor_get_string(const strata_tensor* t, size_t i, const char** data, size_t* size) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(t, "tensor is NULL");
    STRATA_CHECK_ARG(data && size, "data or size is NULL");
    STRATA_CHECK_ARG(t->tensor.dtype() == strata::DataType::kString,
                     std::string("strata_tensor_get_string: the tensor is ") + strata::DataTypeName(t->tensor.dtype()) +
                         ", not string");
    const auto n = static_cast<size_t>(t->tensor.num_elements());
    STRATA_CHECK_ARG(i < n, "string index " + std::to_string(i) + " is out of range (the tensor has " +
                                std::to_string(n) + " elements)");
    const std::string& s = t->tensor.data<std::string>()[i];
    *data = s.data();
    *size = s.size();
    return nullptr;
  });
}
size_t strata_dtype_size(strata_dtype d) {
  if (!ValidDType(d) || d == STRATA_DTYPE_STRING) return 0;
  return strata::DataTypeSize(ToDType(d));
}
const char* strata_dtype_name(strata_dtype d) { return strata::DataTypeName(ToDType(d)); }

}  // extern "C"
