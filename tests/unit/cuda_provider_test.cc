// Cuda*: the CUDA weight layout (CPU reference packer, C API, header), the CUDA
// provider's load report and binary hygiene on this machine, and, where a CUDA device
// exists, byte parity between the CPU packer and the provider's GPU packer.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../../providers/cuda/strata_cuda_ext.h"
#include "core/session.h"
#include "cpu/cuda_weight_layout.h"
#include "onnx_builder.h"
#include "plugin/elf_info.h"
#include "plugin/provider_manager.h"
#include "strata/provider.h"
#include "strata/strata.h"

namespace strata {
namespace {

using cpu::NBitsWeights;

const std::string kProvider = std::string(STRATA_BINARY_DIR) + "/lib/strata/providers/libstrata-provider-cuda.so";

bool Exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

uint32_t Word(const std::vector<uint8_t>& blob, size_t index) {
  uint32_t w;
  std::memcpy(&w, blob.data() + 32 + index * 4, 4);
  return w;
}

float Scale(const std::vector<uint8_t>& blob, size_t scales_off, size_t e) {
  float f;
  std::memcpy(&f, blob.data() + scales_off + e * 4, 4);
  return f;
}

NBitsWeights Weights(int bits, int64_t n, int64_t k, int64_t block, const std::vector<uint8_t>& b,
                     const std::vector<float>& s, const std::vector<uint8_t>* zp) {
  NBitsWeights w;
  w.bits = bits;
  w.n = n;
  w.k = k;
  w.block_size = block;
  w.b = b.data();
  w.b_bytes = b.size();
  w.scales = s.data();
  w.scale_count = s.size();
  if (zp) {
    w.zero_points = zp->data();
    w.zp_bytes = zp->size();
  }
  return w;
}

// One column, K = one block of 16 4-bit codes 0..15: every word checked by hand.
TEST(CudaWeightLayout, Int4SingleColumnHandChecked) {
  std::vector<uint8_t> b(8);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>((2 * i) | ((2 * i + 1) << 4));
  std::vector<float> s = {0.5f};
  auto blob = cpu::PackCudaWeights("cuda-sm80", Weights(4, 1, 16, 16, b, s, nullptr));
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  // header 32 + words (1 tile x 2 words x 8 columns) 64 + scales 8*4 + zero points 8.
  ASSERT_EQ(blob->size(), 32u + 64u + 32u + 8u);
  EXPECT_EQ(std::memcmp(blob->data(), "SWL1", 4), 0);
  EXPECT_EQ((*blob)[6], 80);
  EXPECT_EQ((*blob)[7], 4);
  // Interleaved nibbles: even codes in the low nibbles of bytes 0..3, odd in the high ones.
  EXPECT_EQ(Word(*blob, 0), 0x75316420u);
  EXPECT_EQ(Word(*blob, 8), 0xFDB9ECA8u);  // words 0..7 are K-word 0 of columns 0..7
  for (size_t j = 1; j < 8; ++j) {
    EXPECT_EQ(Word(*blob, j), 0u) << "padding column " << j;
    EXPECT_EQ(Word(*blob, 8 + j), 0u) << "padding column " << j;
  }
  EXPECT_EQ(Scale(*blob, 96, 0), 0.5f);
  EXPECT_EQ(Scale(*blob, 96, 1), 0.0f);
  EXPECT_EQ((*blob)[128], 8) << "absent zero points mean 2^(bits-1)";
  EXPECT_EQ((*blob)[129], 0);
}

// 8-bit, N odd (3), K = 20 not a multiple of the block (16), explicit zero points.
TEST(CudaWeightLayout, Int8OddNAndPartialBlock) {
  const int64_t n = 3, k = 20, block = 16, nb = 2;
  std::vector<uint8_t> b(n * nb * block, 0xEE);  // 0xEE marks the tail past K: must not leak
  for (int64_t c = 0; c < n; ++c)
    for (int64_t kk = 0; kk < k; ++kk) b[(c * nb + kk / block) * block + kk % block] = (c * 37 + kk) & 255;
  std::vector<float> s = {1, 2, 3, 4, 5, 6};  // [n][block]
  std::vector<uint8_t> zp = {100, 101, 102, 103, 104, 105};
  auto blob = cpu::PackCudaWeights("cuda-sm80", Weights(8, n, k, block, b, s, &zp));
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  // words: 1 tile x 8 words (32 codes / 4) x 8 columns.
  const size_t words = 8 * 8, entries = 2 * 8, scales_off = 32 + words * 4, zp_off = scales_off + entries * 4;
  ASSERT_EQ(blob->size(), zp_off + entries);
  EXPECT_EQ(Word(*blob, 0 * 8 + 0), 0x03020100u);   // column 0, k 0..3
  EXPECT_EQ(Word(*blob, 4 * 8 + 2), 0x5D5C5B5Au);   // column 2, k 16..19 = 74+16..19
  EXPECT_EQ(Word(*blob, 5 * 8 + 2), 0u);            // k 20..23: past K, zeroed
  EXPECT_EQ(Word(*blob, 0 * 8 + 3), 0u);            // column 3 is padding
  EXPECT_EQ(Scale(*blob, scales_off, 0 * 8 + 1), 3.0f);  // block 0, column 1
  EXPECT_EQ(Scale(*blob, scales_off, 1 * 8 + 2), 6.0f);  // block 1, column 2
  EXPECT_EQ((*blob)[zp_off + 1 * 8 + 0], 101);
  EXPECT_EQ((*blob)[zp_off + 0 * 8 + 2], 104);
  EXPECT_EQ((*blob)[zp_off + 1 * 8 + 3], 0);
}

// 4-bit zero points are packed two per byte (block 0 low nibble); sm90 tiles 16 columns.
TEST(CudaWeightLayout, Int4ZeroPointsAndSm90Tiles) {
  const int64_t n = 5, k = 40, block = 32, nb = 2;
  std::vector<uint8_t> b(n * nb * block / 2, 0);
  // column 4, k = 33 (block 1, second code): high nibble of byte 0 of that block.
  b[(4 * nb + 1) * 16 + 0] = 0x9 << 4;
  std::vector<float> s(n * nb, 1.0f);
  std::vector<uint8_t> zp = {0x21, 0x43, 0x65, 0x87, 0xA9};  // per column: block0 low, block1 high
  auto blob = cpu::PackCudaWeights("cuda-sm90", Weights(4, n, k, block, b, s, &zp));
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  const size_t wpc = nb * block * 4 / 32, words = wpc * 16, entries = nb * 16;
  const size_t scales_off = 32 + words * 4, zp_off = scales_off + entries * 4;
  ASSERT_EQ(blob->size(), zp_off + entries);
  EXPECT_EQ((*blob)[6], 90);
  // k = 33 is word 4 (codes 32..39), code index 1 -> slot 4 (high nibble of byte 0).
  EXPECT_EQ(Word(*blob, 4 * 16 + 4), 0x9u << 16);
  EXPECT_EQ((*blob)[zp_off + 0 * 16 + 4], 0x9);
  EXPECT_EQ((*blob)[zp_off + 1 * 16 + 4], 0xA);
  EXPECT_EQ((*blob)[zp_off + 1 * 16 + 0], 0x2);
  auto info = cpu::ReadCudaPackedHeader(blob->data(), blob->size());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->tag, "cuda-sm90");
  EXPECT_EQ(info->n, 5);
  EXPECT_EQ(info->k, 40);
  EXPECT_EQ(info->tile_n, 16);
  EXPECT_TRUE(info->has_zero_points);
  EXPECT_FALSE(cpu::ReadCudaPackedHeader(blob->data(), blob->size() - 1).ok());
}

TEST(CudaWeightLayout, RefusesOtherTargetsAndBadShapes) {
  std::vector<uint8_t> b(8);
  std::vector<float> s = {1.0f};
  auto r = cpu::PackCudaWeights("cuda-sm75", Weights(4, 1, 16, 16, b, s, nullptr));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("unknown layout target 'cuda-sm75' (known: cuda-sm80, cuda-sm90)"),
            std::string::npos)
      << r.status().message();
  EXPECT_FALSE(cpu::PackCudaWeights("vulkan", Weights(4, 1, 16, 16, b, s, nullptr)).ok());
  auto bits = cpu::PackCudaWeights("cuda-sm80", Weights(3, 1, 16, 16, b, s, nullptr));
  EXPECT_NE(bits.status().message().find("bits must be 4 or 8"), std::string::npos);
  auto size = cpu::PackCudaWeights("cuda-sm80", Weights(4, 1, 32, 16, b, s, nullptr));
  EXPECT_NE(size.status().message().find("B has 8 bytes"), std::string::npos) << size.status().message();
  auto blk = cpu::PackCudaWeights("cuda-sm80", Weights(4, 1, 16, 24, b, s, nullptr));
  EXPECT_NE(blk.status().message().find("block_size"), std::string::npos);
}

TEST(CudaWeightLayout, CApiMatchesTheReferencePacker) {
  std::vector<uint8_t> b(3 * 2 * 16);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 7);
  std::vector<float> s = {1, 2, 3, 4, 5, 6};
  size_t size = 0;
  strata_status* st = strata_pack_weights("cuda-sm80", 4, 3, 64, 32, b.data(), b.size(), s.data(), s.size(), nullptr,
                                          0, nullptr, 0, &size);
  ASSERT_EQ(st, nullptr) << strata_status_get_message(st);
  std::vector<uint8_t> out(size);
  st = strata_pack_weights("cuda-sm80", 4, 3, 64, 32, b.data(), b.size(), s.data(), s.size(), nullptr, 0, out.data(),
                           out.size(), &size);
  ASSERT_EQ(st, nullptr) << strata_status_get_message(st);
  auto ref = cpu::PackCudaWeights("cuda-sm80", Weights(4, 3, 64, 32, b, s, nullptr));
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(out, *ref);
  st = strata_pack_weights("cuda-sm100", 4, 3, 64, 32, b.data(), b.size(), s.data(), s.size(), nullptr, 0, out.data(),
                           out.size(), &size);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(strata_status_get_code(st), STRATA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(strata_status_get_message(st)).find("cuda-sm100"), std::string::npos);
  strata_status_release(st);
  st = strata_pack_weights("cuda-sm80", 4, 3, 64, 32, b.data(), b.size(), s.data(), s.size(), nullptr, 0, out.data(),
                           out.size() - 1, &size);
  ASSERT_NE(st, nullptr);
  EXPECT_NE(std::string(strata_status_get_message(st)).find("out_capacity"), std::string::npos);
  strata_status_release(st);
}

// ---- the provider binary ----

#define SKIP_WITHOUT_PROVIDER() \
  if (!Exists(kProvider)) GTEST_SKIP() << "the CUDA provider is not built (STRATA_CUDA=OFF or no nvcc): " << kProvider

TEST(CudaProviderBinary, NeedsCudartAndExportsOnlyTheEntryPoints) {
  SKIP_WITHOUT_PROVIDER();
  auto elf = plugin::ReadElfInfo(kProvider);
  ASSERT_TRUE(elf.ok()) << elf.status().ToString();
  auto needs = [&](const plugin::ElfInfo& e, const std::string& so) {
    return std::find(e.needed.begin(), e.needed.end(), so) != e.needed.end();
  };
  EXPECT_TRUE(needs(*elf, "libcudart.so.13"));
  EXPECT_TRUE(needs(*elf, "libcublas.so.13"));
  for (const auto& n : elf->needed) EXPECT_EQ(n.find("strata"), std::string::npos) << n;
  std::vector<std::string> exported;
  for (const auto& s : elf->exports)
    if (s.rfind("strata_", 0) == 0 || s.find("strata") != std::string::npos) exported.push_back(s);
  EXPECT_EQ(exported.size(), 2u);
  EXPECT_TRUE(elf->Exports("strata_provider_probe"));
  EXPECT_TRUE(elf->Exports("strata_provider_init"));
  // No strata binary but the provider may link the CUDA runtime.
  for (const std::string& other : {std::string(STRATA_BINARY_DIR) + "/lib/libstrata.so",
                                   std::string(STRATA_BINARY_DIR) + "/bin/strata"}) {
    if (!Exists(other)) continue;
    auto o = plugin::ReadElfInfo(other);
    ASSERT_TRUE(o.ok()) << other;
    for (const auto& n : o->needed) EXPECT_EQ(n.find("libcu"), std::string::npos) << other << " needs " << n;
  }
}

TEST(CudaProviderBinary, ProbeReportsSonamesDriverAndArchitectures) {
  SKIP_WITHOUT_PROVIDER();
  // dlopen resolves libcudart/libcublas but runs no CUDA code; the probe touches nothing.
  void* h = dlopen(kProvider.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) GTEST_SKIP() << "cannot dlopen the provider here (CUDA toolkit libraries missing): " << dlerror();
  auto probe = reinterpret_cast<strata_provider_probe_fn>(dlsym(h, STRATA_PROVIDER_PROBE_SYMBOL));
  ASSERT_NE(probe, nullptr);
  const strata_provider_probe_info* info = probe();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->abi_version, STRATA_PROVIDER_ABI_VERSION);
  EXPECT_STREQ(info->name, "cuda");
  EXPECT_STREQ(info->needed_libraries, "libcudart.so.13,libcublas.so.13,libcublasLt.so.13,libcuda.so.1");
  EXPECT_STREQ(info->min_driver, "580");
  EXPECT_EQ(std::string(info->variant).rfind("cuda13-sm", 0), 0u) << info->variant;

  // init, called directly (bypassing the host's static dependency check), still refuses
  // cleanly here: no driver library or no device is NO_DEVICE with the reason.
  auto init = reinterpret_cast<strata_provider_init_fn>(dlsym(h, STRATA_PROVIDER_INIT_SYMBOL));
  ASSERT_NE(init, nullptr);
  char msg[1024] = {0};
  strata_provider_error err{sizeof(err), sizeof(msg), msg};
  const strata_provider_api* api = nullptr;
  const int32_t rc = init(plugin::HostApi(), &api, &err);
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!driver) {
    EXPECT_EQ(rc, STRATA_PROVIDER_RESULT_NO_DEVICE);
    EXPECT_NE(std::string(msg).find("libcuda.so.1 (the NVIDIA driver library) cannot be loaded"), std::string::npos)
        << msg;
  } else {
    dlclose(driver);
    if (rc != STRATA_PROVIDER_RESULT_OK) {
      EXPECT_EQ(rc, STRATA_PROVIDER_RESULT_NO_DEVICE) << msg;
      EXPECT_NE(std::string(msg).find("cuda"), std::string::npos) << msg;
    }
  }
  if (rc == STRATA_PROVIDER_RESULT_OK) api->shutdown(api->self);
  dlclose(h);
}

// The status this machine gets: without libcuda.so.1 the static check already answers
// MISSING_DEPENDENCY; with the driver library but no GPU init answers NO_DEVICE with the
// CUDA error text; with a GPU the provider is OK and lists it.
TEST(CudaProviderLoad, ReportMatchesThisMachine) {
  SKIP_WITHOUT_PROVIDER();
  plugin::ProviderManager m;
  ASSERT_TRUE(m.Discover({kProvider}, /*load=*/true).ok());
  const plugin::LoadReportEntry* e = nullptr;
  auto report = m.Report();
  for (const auto& r : report)
    if (r.path == kProvider && !e) e = &r;  // the first: the package folder may list it again
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->name, "cuda");
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!driver) {
    EXPECT_EQ(e->status, plugin::ProviderStatus::kMissingDependency) << e->ToString();
    EXPECT_NE(e->detail.find("libcuda.so.1"), std::string::npos) << e->detail;
  } else if (e->status != plugin::ProviderStatus::kOk) {
    EXPECT_EQ(e->status, plugin::ProviderStatus::kNoDevice) << e->ToString();
    EXPECT_NE(e->detail.find("cuda"), std::string::npos) << e->detail;
  } else {
    EXPECT_FALSE(e->devices.empty());
  }
  if (driver) dlclose(driver);

  // The capability query answers without failing, and only yes with a usable GPU.
  strata_env* env = nullptr;
  ASSERT_EQ(strata_env_create(&env), nullptr);
  const char* paths[] = {kProvider.c_str()};
  strata_status* st = strata_env_discover_providers(env, paths, 1, 1);
  EXPECT_EQ(st, nullptr);
  strata_status_release(st);
  EXPECT_EQ(strata_has_capability(env, "cuda.weight_prepack"), e->status == plugin::ProviderStatus::kOk ? 1 : 0);
  EXPECT_EQ(strata_has_capability(env, "cuda.no_such_capability"), 0);
  strata_env_destroy(env);
}

// CPU reference vs the provider's GPU packer, byte for byte. Needs a CUDA device.
TEST(CudaPackParity, CpuAndGpuPackersAgree) {
  SKIP_WITHOUT_PROVIDER();
  auto mgr = std::make_unique<plugin::ProviderManager>();
  ASSERT_TRUE(mgr->Discover({kProvider}, false).ok());
  auto prov = mgr->Acquire("cuda");
  if (!prov.ok()) GTEST_SKIP() << "no usable CUDA device: " << prov.status().message();
  const strata_provider_api& api = (*prov)->api();
  ASSERT_GE(api.struct_size, offsetof(strata_provider_api, get_extension) + sizeof(void*));
  ASSERT_NE(api.get_extension, nullptr);
  auto pack = reinterpret_cast<strata_cuda_pack_weights_fn>(api.get_extension(api.self, STRATA_CUDA_EXT_PACK_WEIGHTS));
  ASSERT_NE(pack, nullptr);
  EXPECT_EQ(api.get_extension(api.self, "cuda.no_such_extension"), nullptr);
  struct Case {
    const char* target;
    int bits;
    int64_t n, k, block;
    bool zp;
  };
  const Case cases[] = {{"cuda-sm80", 4, 1, 16, 16, false},  {"cuda-sm80", 4, 7, 100, 32, true},
                        {"cuda-sm90", 4, 33, 256, 64, true}, {"cuda-sm80", 8, 5, 40, 16, true},
                        {"cuda-sm90", 8, 17, 300, 128, false}, {"cuda-sm90", 4, 4096, 4096, 128, true}};
  uint32_t seed = 12345;
  auto rnd = [&] { return seed = seed * 1664525u + 1013904223u; };
  for (const Case& c : cases) {
    const int64_t nb = (c.k + c.block - 1) / c.block;
    std::vector<uint8_t> b(c.n * nb * c.block * c.bits / 8), zp(c.n * ((nb * c.bits + 7) / 8));
    std::vector<float> s(c.n * nb);
    for (auto& x : b) x = static_cast<uint8_t>(rnd() >> 24);
    for (auto& x : zp) x = static_cast<uint8_t>(rnd() >> 24);
    for (auto& x : s) x = static_cast<float>(rnd() >> 8) / 16777216.0f;
    auto ref = cpu::PackCudaWeights(c.target, Weights(c.bits, c.n, c.k, c.block, b, s, c.zp ? &zp : nullptr));
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    std::vector<uint8_t> gpu(ref->size(), 0xCD);
    size_t size = 0;
    char msg[512] = {0};
    strata_provider_error err{sizeof(err), sizeof(msg), msg};
    ASSERT_EQ(pack(api.self, 0, c.target, c.bits, c.n, c.k, c.block, b.data(), b.size(), s.data(), s.size(),
                   c.zp ? zp.data() : nullptr, c.zp ? zp.size() : 0, gpu.data(), gpu.size(), &size, &err),
              STRATA_PROVIDER_RESULT_OK)
        << msg;
    EXPECT_EQ(size, ref->size());
    EXPECT_TRUE(gpu == *ref) << c.target << " bits=" << c.bits << " N=" << c.n << " K=" << c.k;
  }
  char msg[512] = {0};
  strata_provider_error err{sizeof(err), sizeof(msg), msg};
  size_t size = 0;
  EXPECT_EQ(pack(api.self, 0, "cuda-sm75", 4, 1, 16, 16, nullptr, 0, nullptr, 0, nullptr, 0, nullptr, 0, &size, &err),
            STRATA_PROVIDER_RESULT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("cuda-sm75"), std::string::npos) << msg;
}

// Device memory running out mid-run is an OUT_OF_MEMORY error naming the node, and the session
// stays usable: a [n,1] x [1,n] product of n = 300000 needs 360 GB on the device (the
// H200 has 141), reduced on the device to n floats so that the host never holds it.
TEST(CudaSession, OutOfDeviceMemoryIsAnErrorAndTheSessionStaysUsable) {
  SKIP_WITHOUT_PROVIDER();
  plugin::ProviderManager pm;
  ASSERT_TRUE(pm.Discover({kProvider}, false).ok());
  auto prov = pm.Acquire("cuda");
  if (!prov.ok()) GTEST_SKIP() << "no usable CUDA device: " << prov.status().message();

  using namespace onnx_builder;
  auto m = MakeModel(13, "cuda_oom");
  auto* g = m.mutable_graph();
  auto declare = [](onnx::ValueInfoProto* v, const char* name, std::vector<std::string> dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (const auto& d : dims) tt->mutable_shape()->add_dim()->set_dim_param(d);
  };
  declare(g->add_input(), "a", {"n", "one"});
  declare(g->add_input(), "b", {"one", "n"});
  AddNode(g, "MatMul", {"a", "b"}, {"ab"}, "outer");
  auto* mean = AddNode(g, "ReduceMean", {"ab"}, {"y"}, "rowmean");
  SetInts(mean, "axes", {-1});
  SetInt(mean, "keepdims", 0);
  declare(g->add_output(), "y", {"n"});
  const std::string bytes = Serialize(m);

  SessionOptions o;
  o.threads = 1;
  o.providers = {"cuda"};
  o.provider_paths = {kProvider};
  o.provider_manager = &pm;
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto run = [&](int64_t n) {
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) a[i] = static_cast<float>(i % 7), b[i] = 0.5f;
    return (*s)->Run(
        {{"a", Value(Tensor::FromVector<float>(a, {n, 1}))}, {"b", Value(Tensor::FromVector<float>(b, {1, n}))}});
  };
  auto check_small = [&] {
    auto r = run(5);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Tensor& y = r->at(0).tensor();
    ASSERT_EQ(y.shape(), (Shape{5}));
    for (int64_t i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(y.data<float>()[i], static_cast<float>(i % 7) * 0.5f) << i;
  };
  check_small();
  auto big = run(300000);
  ASSERT_FALSE(big.ok()) << "a 360 GB product fit on the device?";
  EXPECT_EQ(big.status().code(), StatusCode::kOutOfMemory) << big.status().ToString();
  EXPECT_NE(big.status().message().find("outer"), std::string::npos) << big.status().ToString();
  EXPECT_EQ(big.status().message().find('\n'), std::string::npos) << big.status().ToString();
  check_small();  // the session (and the device allocator's cache) survived
}

}  // namespace
}  // namespace strata
