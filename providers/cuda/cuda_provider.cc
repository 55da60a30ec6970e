// "cuda": the CUDA provider on the strata provider ABI (include/strata/provider.h).
// Structure mirrors tests/plugins/ref/ref_provider.cc: probe, init, device queries,
// compile (constants uploaded once), buffers, execute on a per-run stream.
#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_layout.h"
#include "cuda_ops.h"
#include "cuda_runtime_state.h"
#include "strata/provider.h"
#include "strata_cuda_ext.h"

using namespace strata_cuda;

struct strata_device_buffer {
  BlockRef block;
  size_t size = 0;
  int device = 0;
};

struct strata_compiled_partition {
  uint32_t device = 0;
  GemmPrecision precision = GemmPrecision::kFp32;  // session option cuda.precision
  std::vector<DTensor> constants;  // by value index
  std::vector<CNode> nodes;
  std::vector<int32_t> inputs, outputs;
};

namespace {

const strata_host_api* g_host = nullptr;

struct Provider {
  void* libcuda = nullptr;
  std::vector<std::unique_ptr<DeviceState>> devices;
  std::string driver, runtime;
};
std::mutex g_mu;
Provider* g_provider = nullptr;
int g_refs = 0;

int32_t Fail(strata_provider_error* err, int32_t code, const std::string& msg) {
  strata_provider_set_error(err, ("cuda: " + msg).c_str());
  return code;
}

void Log(int level, const std::string& msg) {
  if (g_host && g_host->log) g_host->log(g_host->context, level, msg.c_str());
}

// The capabilities compiled in: SASS runs on the same major with minor >= its own; PTX
// is JIT-compiled for any device at or above it.
bool BuildRunsOn(int major, int minor, std::string* built) {
  const std::string sass = STRATA_CUDA_SASS, ptx = STRATA_CUDA_PTX;
  *built = "SASS sm_" + (sass.empty() ? std::string("none") : sass) + ", PTX compute_" +
           (ptx.empty() ? std::string("none") : ptx);
  if (sass == "native") return true;
  const int cc = major * 10 + minor;
  auto each = [](const std::string& list, auto fn) {
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty() && fn(std::stoi(item))) return true;
    return false;
  };
  if (each(sass, [&](int a) { return a / 10 == major && a % 10 <= minor; })) return true;
  return each(ptx, [&](int a) { return a <= cc; });
}

std::string VersionText(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

// Brings up the process-wide state; NO_DEVICE with the reason when unusable.
int32_t StartUp(Provider* p, strata_provider_error* err) {
  // cudart dlopens the driver itself; checking first gives a clearer message than
  // cudaErrorInsufficientDriver when the library is simply not installed.
  p->libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  if (!p->libcuda) p->libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!p->libcuda) {
    const char* why = dlerror();
    return Fail(err, STRATA_PROVIDER_RESULT_NO_DEVICE,
                std::string("libcuda.so.1 (the NVIDIA driver library) cannot be loaded: ") + (why ? why : "not found"));
  }
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return Fail(err, STRATA_PROVIDER_RESULT_NO_DEVICE, "cudaGetDeviceCount: " + CudaErrorText(e));
  }
  if (count == 0) return Fail(err, STRATA_PROVIDER_RESULT_NO_DEVICE, "no CUDA device is visible");
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  p->driver = "CUDA " + VersionText(drv);
  p->runtime = "CUDA runtime " + VersionText(rt);
  std::string rejected;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, d);
    if (e != cudaSuccess) {
      rejected += " device " + std::to_string(d) + ": " + CudaErrorText(e) + ";";
      continue;
    }
    std::string built;
    if (!BuildRunsOn(prop.major, prop.minor, &built)) {
      rejected += " device " + std::to_string(d) + " '" + prop.name + "' has compute capability " +
                  std::to_string(prop.major) + "." + std::to_string(prop.minor) + ", this build contains " + built +
                  ";";
      continue;
    }
    auto s = std::make_unique<DeviceState>(d, prop);
    s->name = prop.name;
    s->driver_version = p->driver;
    s->runtime_version = p->runtime;
    p->devices.push_back(std::move(s));
  }
  if (p->devices.empty())
    return Fail(err, STRATA_PROVIDER_RESULT_NO_DEVICE, "no usable CUDA device:" + rejected);
  if (!rejected.empty()) Log(STRATA_PROVIDER_LOG_WARNING, "cuda: skipping" + rejected);
  return STRATA_PROVIDER_RESULT_OK;
}

DeviceState* Dev(uint32_t index) {
  return g_provider && index < g_provider->devices.size() ? g_provider->devices[index].get() : nullptr;
}

int32_t DeviceCount(void*, uint32_t* count, strata_provider_error*) {
  *count = g_provider ? static_cast<uint32_t>(g_provider->devices.size()) : 0;
  return STRATA_PROVIDER_RESULT_OK;
}

int32_t DeviceInfo(void*, uint32_t index, strata_device_info* out, strata_provider_error* err) {
  DeviceState* d = Dev(index);
  if (!d) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "no device " + std::to_string(index));
  out->name = d->name.c_str();
  out->memory_bytes = d->prop().totalGlobalMem;
  out->compute_units = static_cast<uint32_t>(d->prop().multiProcessorCount);
  out->driver_version = d->driver_version.c_str();
  out->api_version = d->runtime_version.c_str();
  return STRATA_PROVIDER_RESULT_OK;
}

int32_t SupportsNode(void*, uint32_t, const strata_node_desc* node, int32_t* supported, strata_provider_error*) {
  try {
    *supported = node && WhyUnsupported(node).empty() ? 1 : 0;
  } catch (...) {
    *supported = 0;
  }
  return STRATA_PROVIDER_RESULT_OK;
}

// Uploads host bytes into a fresh device block.
bool Upload(DeviceState* d, const void* src, size_t bytes, BlockRef* out, std::string* error, bool* oom) {
  *out = d->allocator().Allocate(bytes, error, oom);
  return *out && d->CopyToDevice((*out)->ptr, src, bytes, error);
}

// MatMulNBits: the node's weights as a device blob in the layout the device prefers,
// packed on the GPU unless `strata pack` already did it on the CPU.
bool PrepareNBits(DeviceState* d, const strata_node_desc& nd, CNode* c, std::string* error, bool* oom) {
  const strata_value_desc* b = strata_node_input(&nd, 1);
  const strata_value_desc* sc = strata_node_input(&nd, 2);
  const strata_value_desc* zp = strata_node_input(&nd, 3);
  const std::string prepacked = strata_node_attr_string(&nd, "weight_prepacked", "");
  if (!prepacked.empty()) {
    std::string tag;
    if (!ReadLayoutHeader(static_cast<const uint8_t*>(b->const_data), b->const_bytes, &c->nbits, &tag, error))
      return false;
    if (tag != prepacked) {
      *error = "weight_prepacked says " + prepacked + " but the blob is " + tag;
      return false;
    }
    return Upload(d, b->const_data, b->const_bytes, &c->packed, error, oom);
  }
  const int bits = static_cast<int>(strata_node_attr_int(&nd, "bits", 4));
  const int64_t n = strata_node_attr_int(&nd, "N", 0), k = strata_node_attr_int(&nd, "K", 0);
  const std::string target = d->prop().major >= 9 ? "cuda-sm90" : "cuda-sm80";
  uint8_t arch = 0;
  const size_t size = LayoutParams(target, bits, n, k, strata_node_attr_int(&nd, "block_size", 0), zp != nullptr,
                                   &c->nbits, &arch, error);
  if (size == 0) return false;
  const NBitsPackParams& p = c->nbits;
  const size_t b_bytes = static_cast<size_t>(p.n * p.n_blocks * p.block * p.bits / 8);
  const size_t zp_bytes = static_cast<size_t>(p.n * ((p.n_blocks * p.bits + 7) / 8));
  if (b->const_bytes != b_bytes || sc->const_bytes != static_cast<size_t>(p.n * p.n_blocks) * 4 ||
      (zp && zp->const_bytes != zp_bytes)) {
    *error = "B, scales or zero_points do not match N=" + std::to_string(n) + " K=" + std::to_string(k) +
             " bits=" + std::to_string(bits);
    return false;
  }
  BlockRef db, ds, dz;
  if (!Upload(d, b->const_data, b_bytes, &db, error, oom) || !Upload(d, sc->const_data, sc->const_bytes, &ds, error, oom) ||
      (zp && !Upload(d, zp->const_data, zp_bytes, &dz, error, oom)))
    return false;
  c->packed = d->allocator().Allocate(size, error, oom);
  if (!c->packed) return false;
  std::vector<uint8_t> header(kLayoutHeaderBytes);
  WriteLayoutHeader(p, arch, header.data());
  cudaSetDevice(d->device());
  cudaError_t e = cudaMemset(c->packed->ptr, 0, size);
  if (e == cudaSuccess)
    e = LaunchPackNBits(static_cast<uint8_t*>(db->ptr), static_cast<float*>(ds->ptr),
                        dz ? static_cast<uint8_t*>(dz->ptr) : nullptr, static_cast<uint8_t*>(c->packed->ptr), p,
                        nullptr);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    *error = "packing weights: " + CudaErrorText(e);
    return false;
  }
  return d->CopyToDevice(c->packed->ptr, header.data(), header.size(), error);
}

int32_t Compile(void*, uint32_t device, const strata_partition_desc* p, strata_compiled_partition** out,
                strata_provider_error* err) {
  DeviceState* d = Dev(device);
  if (!d) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "no device " + std::to_string(device));
  try {
    auto cp = std::make_unique<strata_compiled_partition>();
    cp->device = device;
    const std::string bad_option = ParseCudaOptions(p, &cp->precision);
    if (!bad_option.empty()) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, bad_option);
    cp->constants.resize(p->value_count);
    std::string error;
    bool oom = false;
    // MatMulNBits weights and zero points are uploaded packed, not as plain constants.
    std::vector<bool> packed_only(p->value_count, false);
    for (size_t k = 0; k < p->node_count; ++k)
      if (p->nodes[k].op_type && std::strcmp(p->nodes[k].op_type, "MatMulNBits") == 0)
        for (size_t i : {1u, 3u})
          if (i < p->nodes[k].input_count && p->nodes[k].inputs[i] >= 0 &&
              static_cast<size_t>(p->nodes[k].inputs[i]) < p->value_count)
            packed_only[p->nodes[k].inputs[i]] = true;
    for (size_t k = 0; k < p->node_count; ++k) {
      if (p->nodes[k].op_type && std::strcmp(p->nodes[k].op_type, "MatMulNBits") == 0) continue;
      for (size_t i = 0; i < p->nodes[k].input_count; ++i)
        if (p->nodes[k].inputs[i] >= 0 && static_cast<size_t>(p->nodes[k].inputs[i]) < p->value_count)
          packed_only[p->nodes[k].inputs[i]] = false;  // also read as a plain tensor elsewhere
    }
    for (size_t v = 0; v < p->value_count; ++v) {
      const strata_value_desc& vd = p->values[v];
      if (!vd.const_data || DtypeSize(vd.dtype) == 0 || packed_only[v]) continue;
      DTensor t;
      t.dtype = vd.dtype;
      t.shape.assign(vd.dims, vd.dims + std::max(vd.rank, 0));
      if (t.bytes() != vd.const_bytes)
        return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT,
                    std::string("constant '") + vd.name + "' has " + std::to_string(vd.const_bytes) +
                        " bytes, its shape implies " + std::to_string(t.bytes()));
      if ((t.dtype == kInt64 || t.dtype == kInt32) && t.numel() <= 4096) {
        auto h = std::make_shared<std::vector<int64_t>>(t.numel());
        for (int64_t i = 0; i < t.numel(); ++i)
          (*h)[i] = t.dtype == kInt64 ? static_cast<const int64_t*>(vd.const_data)[i]
                                      : static_cast<const int32_t*>(vd.const_data)[i];
        t.host_ints = h;
      }
      if (!Upload(d, vd.const_data, vd.const_bytes, &t.block, &error, &oom))
        return Fail(err, oom ? STRATA_PROVIDER_RESULT_OUT_OF_MEMORY : STRATA_PROVIDER_RESULT_ERROR,
                    std::string("uploading constant '") + vd.name + "': " + error);
      t.data = static_cast<char*>(t.block->ptr);
      cp->constants[v] = std::move(t);
    }
    for (size_t k = 0; k < p->node_count; ++k) {
      const strata_node_desc& nd = p->nodes[k];
      CNode c;
      c.name = nd.name ? nd.name : "";
      c.op = nd.op_type ? nd.op_type : "";
      const std::string why = WhyUnsupported(&nd);
      if (!why.empty()) return Fail(err, STRATA_PROVIDER_RESULT_UNSUPPORTED, c.Who() + ": " + why);
      const std::string bad = strata_provider_common::CopyNode(nd, p->value_count, &c);
      if (!bad.empty()) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, c.Who() + ": " + bad);
      if (c.op == "MatMulNBits" && !PrepareNBits(d, nd, &c, &error, &oom))
        return Fail(err, oom ? STRATA_PROVIDER_RESULT_OUT_OF_MEMORY : STRATA_PROVIDER_RESULT_ERROR,
                    c.Who() + ": " + error);
      cp->nodes.push_back(std::move(c));
    }
    cp->inputs.assign(p->inputs, p->inputs + p->input_count);
    cp->outputs.assign(p->outputs, p->outputs + p->output_count);
    *out = cp.release();
    return STRATA_PROVIDER_RESULT_OK;
  } catch (const std::bad_alloc&) {
    return Fail(err, STRATA_PROVIDER_RESULT_OUT_OF_MEMORY, "host out of memory while compiling");
  } catch (const std::exception& ex) {
    return Fail(err, STRATA_PROVIDER_RESULT_ERROR, std::string("compile: ") + ex.what());
  }
}

void ReleasePartition(void*, strata_compiled_partition* p) { delete p; }

int32_t BufferAlloc(void*, uint32_t device, size_t bytes, strata_device_buffer** out, strata_provider_error* err) {
  DeviceState* d = Dev(device);
  if (!d) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "no device " + std::to_string(device));
  std::string error;
  bool oom = false;
  BlockRef b = d->allocator().Allocate(bytes, &error, &oom);
  if (!b) return Fail(err, oom ? STRATA_PROVIDER_RESULT_OUT_OF_MEMORY : STRATA_PROVIDER_RESULT_ERROR, error);
  auto* buf = new (std::nothrow) strata_device_buffer;
  if (!buf) return Fail(err, STRATA_PROVIDER_RESULT_OUT_OF_MEMORY, "host out of memory");
  buf->block = std::move(b);
  buf->size = bytes;
  buf->device = static_cast<int>(device);
  *out = buf;
  return STRATA_PROVIDER_RESULT_OK;
}

void BufferFree(void*, strata_device_buffer* b) { delete b; }

int32_t CopyToDevice(void*, strata_device_buffer* dst, size_t offset, const void* src, size_t bytes,
                     strata_provider_error* err) {
  if (!dst || offset > dst->size || bytes > dst->size - offset || (bytes && !src))
    return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "copy_to_device out of the buffer's bounds");
  std::string error;
  if (!Dev(dst->device)->CopyToDevice(static_cast<char*>(dst->block->ptr) + offset, src, bytes, &error))
    return Fail(err, STRATA_PROVIDER_RESULT_ERROR, error);
  return STRATA_PROVIDER_RESULT_OK;
}

int32_t CopyToHost(void*, void* dst, const strata_device_buffer* src, size_t offset, size_t bytes,
                   strata_provider_error* err) {
  if (!src || offset > src->size || bytes > src->size - offset || (bytes && !dst))
    return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "copy_to_host out of the buffer's bounds");
  std::string error;
  if (!Dev(src->device)->CopyToHost(dst, static_cast<const char*>(src->block->ptr) + offset, bytes, &error))
    return Fail(err, STRATA_PROVIDER_RESULT_ERROR, error);
  return STRATA_PROVIDER_RESULT_OK;
}

int32_t Execute(void*, strata_compiled_partition* p, const strata_device_tensor* inputs, size_t input_count,
                strata_device_tensor* outputs, size_t output_count, strata_provider_error* err) {
  if (!p) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "no partition");
  if (input_count != p->inputs.size() || output_count != p->outputs.size())
    return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT,
                "expected " + std::to_string(p->inputs.size()) + " inputs and " + std::to_string(p->outputs.size()) +
                    " outputs, got " + std::to_string(input_count) + " and " + std::to_string(output_count));
  DeviceState* d = Dev(p->device);
  if (!d) return Fail(err, STRATA_PROVIDER_RESULT_ERROR, "the partition's device is gone");
  RunContext ctx;
  ctx.dev = d;
  ctx.precision = p->precision;
  std::string error;
  ctx.slot = d->AcquireStream(&error);
  if (!ctx.slot) return Fail(err, STRATA_PROVIDER_RESULT_ERROR, error);
  cudaSetDevice(d->device());
  int32_t rc = STRATA_PROVIDER_RESULT_OK;
  std::string msg;
  size_t made = 0;
  try {
    std::vector<DTensor> vals = p->constants;
    for (size_t k = 0; k < input_count && rc == STRATA_PROVIDER_RESULT_OK; ++k) {
      const strata_device_tensor& in = inputs[k];
      DTensor t;
      t.dtype = in.dtype;
      if (in.rank > STRATA_PROVIDER_MAX_RANK) {
        rc = STRATA_PROVIDER_RESULT_INVALID_ARGUMENT;
        msg = "input " + std::to_string(k) + " has rank " + std::to_string(in.rank);
        break;
      }
      t.shape.assign(in.dims, in.dims + in.rank);
      const size_t bytes = t.bytes();
      if (DtypeSize(in.dtype) == 0) {
        rc = STRATA_PROVIDER_RESULT_UNSUPPORTED;
        msg = "input " + std::to_string(k) + " has dtype " + std::to_string(in.dtype) +
              "; cuda handles float32, int32, int64 and uint8";
      } else if (bytes && (!in.buffer || in.byte_offset > in.buffer->size || bytes > in.buffer->size - in.byte_offset)) {
        rc = STRATA_PROVIDER_RESULT_INVALID_ARGUMENT;
        msg = "input " + std::to_string(k) + " does not fit its buffer";
      } else if (in.buffer) {
        t.block = in.buffer->block;
        t.data = static_cast<char*>(in.buffer->block->ptr) + in.byte_offset;
      }
      vals[p->inputs[k]] = std::move(t);
    }
    if (rc == STRATA_PROVIDER_RESULT_OK)
      for (const CNode& n : p->nodes)
        if (!RunNode(n, vals, &ctx)) {
          rc = ctx.oom ? STRATA_PROVIDER_RESULT_OUT_OF_MEMORY : STRATA_PROVIDER_RESULT_ERROR;
          msg = ctx.error;
          break;
        }
    // Asynchronous kernel faults surface here; everything queued must finish before the
    // run's scratch blocks go back to the shared cache.
    const cudaError_t e = cudaStreamSynchronize(ctx.slot->stream);
    if (e != cudaSuccess && rc == STRATA_PROVIDER_RESULT_OK) {
      rc = STRATA_PROVIDER_RESULT_ERROR;
      msg = "running the partition: " + CudaErrorText(e);
    }
    for (size_t k = 0; k < output_count && rc == STRATA_PROVIDER_RESULT_OK; ++k, ++made) {
      const DTensor& t = vals[p->outputs[k]];
      if (!t.valid() || !t.block || t.shape.size() > STRATA_PROVIDER_MAX_RANK) {
        rc = STRATA_PROVIDER_RESULT_ERROR;
        msg = "output " + std::to_string(k) + " was not computed";
        break;
      }
      // The output buffer shares the value's block (no copy); byte_offset locates views.
      auto* buf = new strata_device_buffer;
      buf->block = t.block;
      buf->size = t.block->bytes;
      buf->device = d->device();
      outputs[k].dtype = t.dtype;
      outputs[k].rank = static_cast<uint32_t>(t.shape.size());
      for (size_t j = 0; j < t.shape.size(); ++j) outputs[k].dims[j] = t.shape[j];
      outputs[k].buffer = buf;
      outputs[k].byte_offset = static_cast<size_t>(t.data - static_cast<char*>(t.block->ptr));
    }
  } catch (const std::bad_alloc&) {
    rc = STRATA_PROVIDER_RESULT_OUT_OF_MEMORY;
    msg = "host out of memory while executing";
    cudaStreamSynchronize(ctx.slot->stream);
  }
  if (rc != STRATA_PROVIDER_RESULT_OK)
    for (size_t j = 0; j < made && j < output_count; ++j) {
      delete outputs[j].buffer;
      outputs[j].buffer = nullptr;
    }
  cudaGetLastError();  // a failed run must not poison the next one on this thread
  d->ReturnStream(ctx.slot);
  if (rc != STRATA_PROVIDER_RESULT_OK) return Fail(err, rc, msg);
  return STRATA_PROVIDER_RESULT_OK;
}

int32_t Synchronize(void*, uint32_t device, strata_provider_error* err) {
  DeviceState* d = Dev(device);
  if (!d) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "no device " + std::to_string(device));
  cudaSetDevice(d->device());
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return Fail(err, STRATA_PROVIDER_RESULT_ERROR, "cudaDeviceSynchronize: " + CudaErrorText(e));
  return STRATA_PROVIDER_RESULT_OK;
}

void Shutdown(void*) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (--g_refs > 0) return;
  if (g_provider) {
    g_provider->devices.clear();
    // libcuda stays loaded: cudart keeps using it until the process exits.
    delete g_provider;
    g_provider = nullptr;
  }
  g_host = nullptr;
}

int32_t HasCapability(void*, const char* name) {
  if (!name || !g_provider || g_provider->devices.empty()) return 0;
  return std::strcmp(name, "weight_prepack") == 0 || std::strcmp(name, "streams") == 0;
}

int32_t PackWeights(void*, uint32_t device, const char* target, int32_t bits, int64_t n, int64_t k,
                    int64_t block_size, const uint8_t* b, size_t b_bytes, const float* scales, size_t scale_count,
                    const uint8_t* zero_points, size_t zp_bytes, void* out, size_t out_capacity, size_t* out_size,
                    strata_provider_error* err) {
  try {
    DeviceState* d = Dev(device);
    if (!d) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "no device " + std::to_string(device));
    NBitsPackParams p;
    uint8_t arch = 0;
    std::string error;
    const size_t size =
        LayoutParams(target ? target : "", bits, n, k, block_size, zero_points != nullptr, &p, &arch, &error);
    if (size == 0) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "pack_weights: " + error);
    if (out_size) *out_size = size;
    if (!out) return STRATA_PROVIDER_RESULT_OK;
    const size_t want_b = static_cast<size_t>(p.n * p.n_blocks * p.block * p.bits / 8);
    const size_t want_zp = static_cast<size_t>(p.n * ((p.n_blocks * p.bits + 7) / 8));
    if (!b || b_bytes != want_b || !scales || scale_count != static_cast<size_t>(p.n * p.n_blocks) ||
        (zero_points && zp_bytes != want_zp) || out_capacity < size)
      return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT,
                  "pack_weights: expected " + std::to_string(want_b) + " bytes of B, " +
                      std::to_string(p.n * p.n_blocks) + " scales, " + std::to_string(want_zp) +
                      " zero-point bytes and " + std::to_string(size) + " bytes of output");
    BlockRef db, ds, dz, dout;
    bool oom = false;
    if (!Upload(d, b, b_bytes, &db, &error, &oom) || !Upload(d, scales, scale_count * 4, &ds, &error, &oom) ||
        (zero_points && !Upload(d, zero_points, zp_bytes, &dz, &error, &oom)) ||
        !(dout = d->allocator().Allocate(size, &error, &oom)))
      return Fail(err, oom ? STRATA_PROVIDER_RESULT_OUT_OF_MEMORY : STRATA_PROVIDER_RESULT_ERROR,
                  "pack_weights: " + error);
    cudaSetDevice(d->device());
    cudaError_t e = cudaMemset(dout->ptr, 0, size);
    if (e == cudaSuccess)
      e = LaunchPackNBits(static_cast<uint8_t*>(db->ptr), static_cast<float*>(ds->ptr),
                          dz ? static_cast<uint8_t*>(dz->ptr) : nullptr, static_cast<uint8_t*>(dout->ptr), p, nullptr);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return Fail(err, STRATA_PROVIDER_RESULT_ERROR, "pack_weights: " + CudaErrorText(e));
    if (!d->CopyToHost(out, dout->ptr, size, &error)) return Fail(err, STRATA_PROVIDER_RESULT_ERROR, error);
    WriteLayoutHeader(p, arch, static_cast<uint8_t*>(out));
    return STRATA_PROVIDER_RESULT_OK;
  } catch (...) {
    return Fail(err, STRATA_PROVIDER_RESULT_ERROR, "pack_weights: unexpected exception");
  }
}

void* GetExtension(void*, const char* name) {
  if (name && std::strcmp(name, STRATA_CUDA_EXT_PACK_WEIGHTS) == 0) {
    strata_cuda_pack_weights_fn fn = PackWeights;
    return reinterpret_cast<void*>(fn);
  }
  return nullptr;
}

const strata_provider_api kApi = {sizeof(strata_provider_api),
                                  STRATA_PROVIDER_ABI_VERSION,
                                  nullptr,
                                  DeviceCount,
                                  DeviceInfo,
                                  SupportsNode,
                                  Compile,
                                  ReleasePartition,
                                  BufferAlloc,
                                  BufferFree,
                                  CopyToDevice,
                                  CopyToHost,
                                  Execute,
                                  Synchronize,
                                  Shutdown,
                                  HasCapability,
                                  GetExtension};

// Needed sonames: cudart/cuBLAS are NEEDED entries; libcuda.so.1 is what cudart dlopens.
const strata_provider_probe_info kProbe = {sizeof(strata_provider_probe_info),
                                           STRATA_PROVIDER_ABI_VERSION,
                                           "cuda",
                                           STRATA_CUDA_VARIANT,
                                           STRATA_CUDA_VERSION,
                                           "",
                                           "libcudart.so.13,libcublas.so.13,libcublasLt.so.13,libcuda.so.1",
                                           "580"};

}  // namespace

extern "C" __attribute__((visibility("default"))) const strata_provider_probe_info* strata_provider_probe(void) {
  return &kProbe;
}

extern "C" __attribute__((visibility("default"))) int32_t strata_provider_init(const strata_host_api* host,
                                                                               const strata_provider_api** out,
                                                                               strata_provider_error* err) {
  try {
    if (!host || host->struct_size < sizeof(uint32_t) * 2 || !out)
      return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "bad host API table");
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_provider) {
      auto p = std::make_unique<Provider>();
      const int32_t rc = StartUp(p.get(), err);
      if (rc != STRATA_PROVIDER_RESULT_OK) return rc;
      g_provider = p.release();
    }
    ++g_refs;
    g_host = host;
    *out = &kApi;
    return STRATA_PROVIDER_RESULT_OK;
  } catch (...) {
    return Fail(err, STRATA_PROVIDER_RESULT_ERROR, "init: unexpected exception");
  }
}
