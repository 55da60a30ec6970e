// Provider plugins: discovery, load report, C API, partitioning and execution through
// the reference provider. The test providers live in STRATA_TEST_PROVIDER_DIR
// (<build>/lib/strata/test-providers, built by tests/plugins/CMakeLists.txt).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "capi/env.h"
#include "core/kernel.h"
#include "ir_builder.h"
#include "plugin/cpu_features.h"
#include "plugin/elf_info.h"
#include "plugin/partition.h"
#include "plugin/provider_manager.h"

namespace strata::plugin {
namespace {

#ifndef STRATA_TEST_PROVIDER_DIR
#define STRATA_TEST_PROVIDER_DIR STRATA_BINARY_DIR "/lib/strata/test-providers"
#endif
const std::string kDir = STRATA_TEST_PROVIDER_DIR;
std::string Lib(const std::string& name) { return kDir + "/libstrata-provider-" + name + ".so"; }

// Sets (or, with a null value, clears) one environment variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_.c_str(), old_.c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

// Sets (or clears) STRATA_PROVIDER_PATH for one test.
class EnvPath : public ScopedEnv {
 public:
  explicit EnvPath(const char* value) : ScopedEnv("STRATA_PROVIDER_PATH", value) {}
};

// Makes the plugin CPU checks treat some features as absent for one test, so that the
// "needscpu" test provider (it requires avx512_fp16 and amx_tile) is refused on any CPU.
class HideCpu : public ScopedEnv {
 public:
  explicit HideCpu(const char* features) : ScopedEnv("STRATA_CPU_HIDE", features) {}
};

const LoadReportEntry* ByPath(const std::vector<LoadReportEntry>& r, const std::string& path) {
  for (const auto& e : r)
    if (e.path == path) return &e;
  return nullptr;
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

#define EXPECT_ENTRY(report, file, st, detail_part)                                                       \
  do {                                                                                                    \
    const LoadReportEntry* e_ = ByPath(report, Lib(file));                                                \
    ASSERT_NE(e_, nullptr) << "no report entry for " << file;                                             \
    EXPECT_EQ(e_->status, st) << e_->ToString();                                                          \
    EXPECT_TRUE(Contains(e_->detail, detail_part)) << e_->ToString() << " lacks '" << detail_part << "'"; \
  } while (0)

TEST(PluginDiscovery, ListingReadsFilesWithoutRunningProviderCode) {
  EnvPath env(nullptr);
  ProviderManager m;
  ASSERT_TRUE(m.Discover({kDir}, /*load=*/false).ok());
  auto r = m.Report();
  EXPECT_ENTRY(r, "ref", ProviderStatus::kOk, "");
  EXPECT_ENTRY(r, "notelf", ProviderStatus::kInvalid, "is not an ELF file");
  EXPECT_ENTRY(r, "truncated", ProviderStatus::kInvalid, "beyond the end of the file");
  EXPECT_ENTRY(r, "noinit", ProviderStatus::kInvalid, "does not export strata_provider_init");
  EXPECT_ENTRY(r, "missingdep", ProviderStatus::kMissingDependency, "needs libstrata-test-fakedep.so,");
  EXPECT_ENTRY(r, "refdup", ProviderStatus::kInvalid,
               "duplicate provider name 'ref': already provided by " + Lib("ref"));
  EXPECT_ENTRY(r, "badmanifest", ProviderStatus::kInvalid, "malformed manifest");
  const LoadReportEntry* ref = ByPath(r, Lib("ref"));
  ASSERT_NE(ref, nullptr);
  EXPECT_EQ(ref->name, "ref");
  EXPECT_EQ(ref->variant, "reference-cpu");  // from the sidecar manifest
  EXPECT_EQ(ref->origin, "explicit");
  for (const auto& e : r) {
    EXPECT_FALSE(e.loaded) << e.ToString();
    // Not even mapped into the process: listing never dlopens a provider.
    void* h = dlopen(e.path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    EXPECT_EQ(h, nullptr) << e.path << " was loaded by listing";
    if (h) dlclose(h);
  }
}

TEST(PluginLoadReport, EachFaultGetsItsExactStatusAndMessage) {
  EnvPath env(nullptr);
  HideCpu hide("avx512_fp16,amx_tile");
  ProviderManager m;
  ASSERT_TRUE(m.Discover({kDir}, /*load=*/true).ok());
  auto r = m.Report();
  EXPECT_ENTRY(r, "ref", ProviderStatus::kOk, "");
  EXPECT_ENTRY(r, "badabi", ProviderStatus::kAbiMismatch, "provider ABI 99, host wants 1");
  EXPECT_ENTRY(r, "initfail", ProviderStatus::kInitFailed, "simulated driver failure: cuInit returned 999");
  EXPECT_ENTRY(r, "nodevice", ProviderStatus::kNoDevice, "no compatible device found");
  EXPECT_ENTRY(r, "nullfn", ProviderStatus::kInvalid, "null required function 'execute'");
  EXPECT_ENTRY(r, "badsize", ProviderStatus::kInvalid, "wrong struct size (16 bytes");
  EXPECT_ENTRY(r, "noinit", ProviderStatus::kInvalid, "does not export strata_provider_init");
  EXPECT_ENTRY(r, "missingdep", ProviderStatus::kMissingDependency, "libstrata-test-fakedep.so");
  EXPECT_ENTRY(r, "notelf", ProviderStatus::kInvalid, "is not an ELF file");
  EXPECT_ENTRY(r, "truncated", ProviderStatus::kInvalid, "corrupt ELF file");
  EXPECT_ENTRY(r, "refdup", ProviderStatus::kInvalid, "duplicate provider name 'ref'");
  EXPECT_ENTRY(r, "needscpu", ProviderStatus::kUnsupportedCpu, "this CPU lacks avx512_fp16, amx_tile");
  const LoadReportEntry* ref = ByPath(r, Lib("ref"));
  ASSERT_NE(ref, nullptr);
  EXPECT_TRUE(ref->loaded);
  ASSERT_EQ(ref->devices.size(), 1u);
  EXPECT_EQ(ref->devices[0].name, "strata reference device (host memory)");
  EXPECT_GT(ref->devices[0].memory_bytes, 0u);
  EXPECT_EQ(ref->version, "1.0.0");
  // ToString is the one-line form used by errors and the CLI.
  EXPECT_EQ(ByPath(r, Lib("badabi"))->ToString(),
            "badabi: ABI_MISMATCH: provider ABI 99, host wants 1 (" + Lib("badabi") + ")");
}

TEST(PluginLoadReport, IsolatedLoadingReportsACrashingProviderAsCrashed) {
  EnvPath env(nullptr);
  ProviderManager m;
  const std::string crash = std::string(STRATA_TEST_CRASH_PROVIDER_DIR) + "/libstrata-provider-crashprobe.so";
  ASSERT_TRUE(m.Discover({crash, Lib("ref"), Lib("initfail")}, /*load=*/true, /*isolate=*/true).ok());
  // Only the explicitly named candidates: the build's package folder may hold real providers.
  std::vector<LoadReportEntry> r;
  for (const auto& e : m.Report())
    if (e.origin == "explicit") r.push_back(e);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].status, ProviderStatus::kCrashed) << r[0].ToString();
  EXPECT_TRUE(Contains(r[0].detail, "crashed with signal 11")) << r[0].detail;
  EXPECT_EQ(r[1].status, ProviderStatus::kOk) << r[1].ToString();
  ASSERT_EQ(r[1].devices.size(), 1u);  // devices come back from the child
  EXPECT_EQ(r[1].devices[0].name, "strata reference device (host memory)");
  EXPECT_EQ(r[2].status, ProviderStatus::kInitFailed);
  EXPECT_TRUE(Contains(r[2].detail, "simulated driver failure")) << r[2].detail;
  // Nothing was loaded into this process; Acquire loads the OK one here, never the crashed one.
  void* h = dlopen(crash.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  EXPECT_EQ(h, nullptr);
  auto c = m.Acquire("crashprobe");
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(Contains(c.status().message(), "CRASHED")) << c.status().message();
  auto ok = m.Acquire("ref");
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(PluginDiscovery, DuplicateNameFirstWinsWhenLoading) {
  EnvPath env(nullptr);
  ProviderManager m;
  // The duplicate comes first here, so it wins and the real "ref" is the one reported.
  ASSERT_TRUE(m.Discover({Lib("ref"), Lib("refdup")}, true).ok());
  auto r = m.Report();
  EXPECT_ENTRY(r, "ref", ProviderStatus::kOk, "");
  EXPECT_ENTRY(r, "refdup", ProviderStatus::kInvalid, "duplicate provider name 'ref'");
  auto p = m.Acquire("ref");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)->path(), Lib("ref"));
}

TEST(PluginDiscovery, EnvironmentPathFilesAndFoldersAndNoRelativeEntries) {
  EnvPath env(("relative/providers::" + Lib("ref") + ":/nonexistent/strata-providers").c_str());
  ProviderManager m;
  ASSERT_TRUE(m.Discover({}).ok());
  auto r = m.Report();
  const LoadReportEntry* ref = ByPath(r, Lib("ref"));
  ASSERT_NE(ref, nullptr);
  EXPECT_EQ(ref->origin, "STRATA_PROVIDER_PATH");
  EXPECT_EQ(ref->status, ProviderStatus::kOk);
  bool saw_relative = false, saw_missing = false;
  for (const auto& e : r) {
    if (e.path == "relative/providers") {
      saw_relative = true;
      EXPECT_EQ(e.status, ProviderStatus::kNotFound);
      EXPECT_TRUE(Contains(e.detail, "never searched relative to the current directory")) << e.detail;
    }
    if (e.path == "/nonexistent/strata-providers") {
      saw_missing = true;
      EXPECT_EQ(e.status, ProviderStatus::kNotFound);
      EXPECT_EQ(e.detail, "no such file or folder");
    }
  }
  EXPECT_TRUE(saw_relative);
  EXPECT_TRUE(saw_missing);
}

TEST(PluginDiscovery, ExplicitPathsComeBeforeTheEnvironment) {
  EnvPath env(kDir.c_str());
  ProviderManager m;
  ASSERT_TRUE(m.Discover({Lib("ref")}).ok());
  auto r = m.Report();
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r[0].path, Lib("ref"));
  EXPECT_EQ(r[0].origin, "explicit");
  int ref_entries = 0;
  for (const auto& e : r) ref_entries += e.path == Lib("ref");
  EXPECT_EQ(ref_entries, 1);  // the same file reached again through the folder is listed once
}

TEST(PluginDiscovery, NeverSearchesTheCurrentDirectory) {
  EnvPath env(nullptr);
  char old[PATH_MAX];
  ASSERT_NE(::getcwd(old, sizeof(old)), nullptr);
  ASSERT_EQ(::chdir(kDir.c_str()), 0);
  ProviderManager m;
  Status st = m.Discover({});
  ASSERT_EQ(::chdir(old), 0);
  ASSERT_TRUE(st.ok());
  for (const auto& e : m.Report()) EXPECT_FALSE(Contains(e.path, "test-providers")) << e.ToString();
}

TEST(PluginDiscovery, PackageFolderIsDerivedFromTheBinaryLocation) {
  std::string dir = ProviderManager::PackageProviderDir();
  char real[PATH_MAX];
  ASSERT_NE(::realpath(STRATA_BINARY_DIR, real), nullptr);
  // The test binary lives in <build>/bin, so the folder is <build>/lib/strata/providers.
  EXPECT_EQ(dir, std::string(real) + "/lib/strata/providers");
}

TEST(PluginDiscovery, MissingExplicitPathIsNotFound) {
  EnvPath env(nullptr);
  ProviderManager m;
  ASSERT_TRUE(m.Discover({kDir + "/libstrata-provider-absent.so"}).ok());
  auto r = m.Report();
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r[0].status, ProviderStatus::kNotFound);
  EXPECT_EQ(r[0].name, "absent");
}

TEST(PluginAcquire, ErrorsNameTheProblem) {
  EnvPath env(nullptr);
  HideCpu hide("avx512_fp16,amx_tile");
  ProviderManager m;
  ASSERT_TRUE(m.Discover({kDir}).ok());
  auto none = m.Acquire("nosuchprovider");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(none.status().message(), "no provider named 'nosuchprovider'")) << none.status().message();
  auto bad = m.Acquire("initfail");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kProviderError);
  EXPECT_TRUE(
      Contains(bad.status().message(), "INIT_FAILED: strata_provider_init returned 1: simulated driver failure"))
      << bad.status().message();
  auto dep = m.Acquire("missingdep");
  ASSERT_FALSE(dep.ok());
  EXPECT_TRUE(Contains(dep.status().message(), "MISSING_DEPENDENCY: needs libstrata-test-fakedep.so"));
  auto ok = m.Acquire("ref");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->name(), "ref");
  EXPECT_TRUE((*ok)->HasCapability("reference"));
  EXPECT_FALSE((*ok)->HasCapability("weight_prepack"));
  // Providers of the build's package folder (e.g. vulkan on lavapipe) may be usable too;
  // of the test tree, only "ref" is.
  std::vector<std::string> from_test_tree;
  for (const auto& p : m.AutoCandidates())
    if (p->path().rfind(kDir, 0) == 0) from_test_tree.push_back(p->name());
  ASSERT_EQ(from_test_tree.size(), 1u);
  EXPECT_EQ(from_test_tree[0], "ref");
}

TEST(PluginElf, ReadsNeededAndExports) {
  auto info = ReadElfInfo(Lib("ref"));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_TRUE(info->Exports("strata_provider_probe"));
  EXPECT_TRUE(info->Exports("strata_provider_init"));
  EXPECT_EQ(info->exports.size(), 2u);  // the version script hides everything else
  EXPECT_EQ(FirstMissingDependency(*info, Lib("ref")), "");
  auto missing = ReadElfInfo(Lib("missingdep"));
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(FirstMissingDependency(*missing, Lib("missingdep")), "libstrata-test-fakedep.so");
  auto nofile = ReadElfInfo(kDir + "/does-not-exist.so");
  EXPECT_EQ(nofile.status().code(), StatusCode::kIOError);
  auto dir = ReadElfInfo(kDir);
  ASSERT_FALSE(dir.ok());
  EXPECT_TRUE(Contains(dir.status().message(), "is not a regular file")) << dir.status().message();
}

TEST(PluginCpu, FeatureChecks) {
  EXPECT_FALSE(CpuSupports("no_such_feature"));
  {
    // Hidden from provider checks only: the kernels' CpuSupports still sees the hardware.
    HideCpu hide(" sse4_1 ,avx2");
    EXPECT_FALSE(CpuFeatureUsable("avx2"));
    EXPECT_FALSE(CpuFeatureUsable("sse4_1"));
    EXPECT_EQ(CpuSupports("avx2"), static_cast<bool>(__builtin_cpu_supports("avx2")));
    EXPECT_EQ(MissingCpuFeatures("sse4_1,avx2"), (std::vector<std::string>{"sse4_1", "avx2"}));
  }
  EXPECT_FALSE(IsKnownCpuFeature("no_such_feature"));
  EXPECT_EQ(CpuSupports("avx2"), static_cast<bool>(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(CpuSupports("avx512f"), static_cast<bool>(__builtin_cpu_supports("avx512f")));
  EXPECT_EQ(SplitList(" avx2, fma ,,"), (std::vector<std::string>{"avx2", "fma"}));
  EXPECT_EQ(MissingCpuFeatures("no_such_feature"), std::vector<std::string>{"no_such_feature"});
}

TEST(PluginCapi, ReportAndCapabilitiesNeverFail) {
  EnvPath env(nullptr);
  strata_env e;
  EXPECT_EQ(strata_has_capability(&e, "provider.ref"), 0);  // not in any searched folder
  const char* paths[] = {kDir.c_str()};
  strata_status* st = strata_env_discover_providers(&e, paths, 1, 0);
  ASSERT_EQ(st, nullptr) << st->message;
  ASSERT_GT(strata_env_provider_count(&e), 0u);
  bool saw_ref = false;
  for (size_t i = 0; i < strata_env_provider_count(&e); ++i) {
    const char *name = nullptr, *path = nullptr, *detail = nullptr;
    strata_provider_status ps;
    ASSERT_EQ(strata_env_provider_info(&e, i, &name, &path, &ps, &detail), nullptr);
    if (std::string(path) == Lib("ref")) {
      saw_ref = true;
      EXPECT_STREQ(name, "ref");
      EXPECT_EQ(ps, STRATA_PROVIDER_OK);
    }
    if (std::string(path) == Lib("missingdep")) {
      EXPECT_EQ(ps, STRATA_PROVIDER_MISSING_DEPENDENCY);
    }
  }
  EXPECT_TRUE(saw_ref);
  strata_status* bad = strata_env_provider_info(&e, 100000, nullptr, nullptr, nullptr, nullptr);
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->code, STRATA_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(bad->message, "out of range"));
  delete bad;
  bad = strata_env_discover_providers(nullptr, nullptr, 0, 0);
  ASSERT_NE(bad, nullptr);
  delete bad;
  bad = strata_env_discover_providers(&e, nullptr, 2, 0);
  ASSERT_NE(bad, nullptr);
  EXPECT_TRUE(Contains(bad->message, "extra_paths is NULL"));
  delete bad;

  EXPECT_EQ(strata_has_capability(&e, "provider.ref"), 1);
  EXPECT_EQ(strata_has_capability(&e, "provider.missingdep"), 0);
  EXPECT_EQ(strata_has_capability(&e, "provider.nosuch"), 0);
  EXPECT_EQ(strata_has_capability(&e, "ref.reference"), 0);  // not loaded yet: never loads to answer
  ASSERT_EQ(strata_env_discover_providers(&e, paths, 1, 1), nullptr);
  EXPECT_EQ(strata_has_capability(&e, "ref.reference"), 1);
  EXPECT_EQ(strata_has_capability(&e, "provider.nodevice"), 0);  // loaded and found no device
  EXPECT_EQ(strata_has_capability(&e, "cuda.weight_prepack"), 0);
  EXPECT_EQ(strata_has_capability(&e, "cpu.avx2"), __builtin_cpu_supports("avx2") ? 1 : 0);
  EXPECT_EQ(strata_has_capability(&e, "cpu.avx512f"), __builtin_cpu_supports("avx512f") ? 1 : 0);
  EXPECT_EQ(strata_has_capability(&e, "cpu.avx512_bf16"), CpuSupports("avx512_bf16") ? 1 : 0);
  EXPECT_EQ(strata_has_capability(&e, "cpu.avx512_vnni"), CpuSupports("avx512_vnni") ? 1 : 0);
  for (const char* junk : {"", ".", "cpu.", "provider.", "x", "cpu.bogus", ".weight_prepack", "cuda."})
    EXPECT_EQ(strata_has_capability(&e, junk), 0) << junk;
  EXPECT_EQ(strata_has_capability(&e, nullptr), 0);
  EXPECT_EQ(strata_has_capability(nullptr, "provider.ref"), 0);
  EXPECT_EQ(strata_env_provider_count(nullptr), 0u);
  EXPECT_STREQ(strata_provider_status_name(STRATA_PROVIDER_MISSING_DEPENDENCY), "MISSING_DEPENDENCY");
  EXPECT_STREQ(strata_provider_status_name(STRATA_PROVIDER_CRASHED), "CRASHED");
  EXPECT_STREQ(strata_provider_status_name(static_cast<strata_provider_status>(77)), "UNKNOWN");
}

// ---------------------------------------------------------------- partitioning + execution

using GraphBuilder = strata::testing::IrBuilder;
using strata::testing::SetInt;
using strata::testing::SetInts;

std::vector<float> Iota(size_t n, float scale, float shift) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * scale) + shift;
  return v;
}

// Independent plain reference of the tiny CNN (written for the test, not shared with ref).
std::vector<float> CnnReference(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                                const std::vector<float>& w2, const std::vector<float>& c2,
                                const std::vector<float>& w3, const std::vector<float>& b3) {
  // Conv 2->3 channels, 3x3, pad 1 on 6x6, then Relu.
  std::vector<float> conv(3 * 36);
  for (int m = 0; m < 3; ++m)
    for (int y = 0; y < 6; ++y)
      for (int xx = 0; xx < 6; ++xx) {
        float s = b[m];
        for (int c = 0; c < 2; ++c)
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
              int iy = y + i - 1, ix = xx + j - 1;
              if (iy >= 0 && iy < 6 && ix >= 0 && ix < 6)
                s += x[c * 36 + iy * 6 + ix] * w[((m * 2 + c) * 3 + i) * 3 + j];
            }
        conv[m * 36 + y * 6 + xx] = std::max(0.0f, s);
      }
  // MaxPool 2x2 stride 2 -> 3x3x3, flattened.
  std::vector<float> flat(27);
  for (int m = 0; m < 3; ++m)
    for (int y = 0; y < 3; ++y)
      for (int xx = 0; xx < 3; ++xx) {
        float mx = -1e30f;
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j) mx = std::max(mx, conv[m * 36 + (2 * y + i) * 6 + 2 * xx + j]);
        flat[m * 9 + y * 3 + xx] = mx;
      }
  // Gemm transB: [1,27] x [4,27]^T + c2, MatMul by w3 [4,4], Add b3, Softmax.
  std::vector<float> g(4), h(4);
  for (int o = 0; o < 4; ++o) {
    g[o] = c2[o];
    for (int k = 0; k < 27; ++k) g[o] += flat[k] * w2[o * 27 + k];
  }
  for (int o = 0; o < 4; ++o) {
    h[o] = b3[o];
    for (int k = 0; k < 4; ++k) h[o] += g[k] * w3[k * 4 + o];
  }
  float mx = *std::max_element(h.begin(), h.end()), sum = 0;
  for (float& v : h) sum += v = std::exp(v - mx);
  for (float& v : h) v /= sum;
  return h;
}

Result<std::vector<Value>> RunNode(const Node& n, const Graph& g, const std::vector<Value>& ins, OpKernel& k) {
  std::vector<const Value*> in_ptrs;
  for (const auto& v : ins) in_ptrs.push_back(&v);
  std::vector<Value> outs(n.outputs.size());
  KernelContext ctx(n, in_ptrs, &outs, nullptr, DefaultAllocator(), nullptr);
  RETURN_IF_ERROR(k.Compute(ctx));
  return outs;
}

class PluginPartition : public ::testing::Test {
 protected:
  void SetUp() override {
    EnvPath env(nullptr);
    ASSERT_TRUE(m_.Discover({Lib("ref")}).ok());
    auto p = m_.Acquire("ref");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ref_ = *p;
  }
  ProviderManager m_;
  std::shared_ptr<LoadedProvider> ref_;
};

TEST_F(PluginPartition, RefRunsATinyCnnAsOnePartitionMatchingTheReference) {
  GraphBuilder b;
  auto xv = Iota(72, 0.37f, 0.1f), wv = Iota(54, 0.91f, 0.0f), bv = Iota(3, 1.3f, 0.05f);
  auto w2v = Iota(108, 0.23f, 0.0f), c2v = Iota(4, 0.7f, 0.0f), w3v = Iota(16, 0.53f, 0.0f), b3v = Iota(4, 2.1f, 0.0f);
  int x = b.Value("x", {1, 2, 6, 6});
  b.g.inputs = {x};
  int w = b.Const("w", Tensor::FromVector(wv, {3, 2, 3, 3})), bias = b.Const("b", Tensor::FromVector(bv, {3}));
  int c1 = b.Value("c1", {1, 3, 6, 6}), r1 = b.Value("r1", {1, 3, 6, 6}), p1 = b.Value("p1", {1, 3, 3, 3});
  SetInts(b.Add("Conv", {x, w, bias}, {c1}), "pads", {1, 1, 1, 1});
  b.Add("Relu", {c1}, {r1});
  Node& pool = b.Add("MaxPool", {r1}, {p1});
  SetInts(pool, "kernel_shape", {2, 2});
  SetInts(pool, "strides", {2, 2});
  int f = b.Value("f", {1, 27});
  b.Add("Flatten", {p1}, {f});
  int w2 = b.Const("w2", Tensor::FromVector(w2v, {4, 27})), c2 = b.Const("c2", Tensor::FromVector(c2v, {4}));
  int gm = b.Value("gm", {1, 4});
  SetInt(b.Add("Gemm", {f, w2, c2}, {gm}), "transB", 1);
  int w3 = b.Const("w3", Tensor::FromVector(w3v, {4, 4})), b3 = b.Const("b3", Tensor::FromVector(b3v, {4}));
  int mm = b.Value("mm", {1, 4}), ad = b.Value("ad", {1, 4});
  b.Add("MatMul", {gm, w3}, {mm});
  b.Add("Add", {mm, b3}, {ad});
  int shape = b.Const("shape", Tensor::FromVector<int64_t>({-1, 4}, {2}));
  int rs = b.Value("rs", {1, 4}), y = b.Value("y", {1, 4});
  b.Add("Reshape", {ad, shape}, {rs});
  b.Add("Softmax", {rs}, {y});
  b.g.outputs = {y};

  std::vector<PartitionInfo> parts;
  Status st = PartitionForProvider(b.g, *ref_, {}, &parts);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].node_names.size(), 9u);
  ASSERT_EQ(b.g.nodes.size(), 1u);
  const Node& part = b.g.nodes[0];
  EXPECT_EQ(part.domain, kPartitionDomain);
  EXPECT_EQ(part.op_type, kPartitionOp);
  EXPECT_EQ(part.provider, "ref");
  EXPECT_EQ(part.inputs, std::vector<int>{x});  // constants stay inside the body
  EXPECT_EQ(part.outputs, std::vector<int>{y});
  const Attribute* body = part.FindAttr("body");
  ASSERT_TRUE(body && body->g);
  EXPECT_EQ(body->g->nodes.size(), 9u);
  EXPECT_EQ(body->g->initializers.size(), 7u);

  KernelInit init{part, b.g, nullptr, {}};
  auto k = CreateProviderPartitionKernel(init, m_);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  auto outs = RunNode(part, b.g, {Value(Tensor::FromVector(xv, {1, 2, 6, 6}))}, **k);
  ASSERT_TRUE(outs.ok()) << outs.status().ToString();
  const Tensor& out = (*outs)[0].tensor();
  ASSERT_EQ(out.shape(), (Shape{1, 4}));
  auto want = CnnReference(xv, wv, bv, w2v, c2v, w3v, b3v);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out.data<float>()[i], want[i], 1e-5f) << i;

  // A second run on the same compiled partition gives the same answer.
  auto again = RunNode(part, b.g, {Value(Tensor::FromVector(xv, {1, 2, 6, 6}))}, **k);
  ASSERT_TRUE(again.ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(again->at(0).tensor().data<float>()[i], out.data<float>()[i]);

  // A wrong input shape is a clear error from the provider, prefixed with the node.
  auto bad = RunNode(part, b.g, {Value(Tensor::FromVector(Iota(36, 1, 0), {1, 1, 6, 6}))}, **k);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kProviderError);
  EXPECT_TRUE(Contains(bad.status().message(), part.Describe())) << bad.status().message();
  EXPECT_TRUE(Contains(bad.status().message(), "X has 1 channels but W expects 2")) << bad.status().message();
}

TEST_F(PluginPartition, UnsupportedNodesSplitPartitionsAndStayOnCpu) {
  GraphBuilder b;
  int x = b.Value("x", {2, 3}), a = b.Value("a", {2, 3}), s = b.Value("s", {2, 3}), y = b.Value("y", {2, 3});
  int z = b.Value("z", {2, 3});
  b.g.inputs = {x};
  b.Add("Relu", {x}, {a});
  b.Add("Sigmoid", {a}, {s});  // not handled by ref
  b.Add("Relu", {s}, {y});
  b.Add("Add", {y, a}, {z});  // reads `a` from the first partition
  b.g.outputs = {z};
  std::vector<PartitionInfo> parts;
  ASSERT_TRUE(PartitionForProvider(b.g, *ref_, {}, &parts).ok());
  ASSERT_EQ(parts.size(), 2u);
  ASSERT_EQ(b.g.nodes.size(), 3u);
  EXPECT_EQ(b.g.nodes[0].op_type, kPartitionOp);
  EXPECT_EQ(b.g.nodes[0].outputs, std::vector<int>{a});
  EXPECT_EQ(b.g.nodes[1].op_type, "Sigmoid");
  EXPECT_EQ(b.g.nodes[1].provider, "cpu");
  EXPECT_EQ(b.g.nodes[2].op_type, kPartitionOp);
  EXPECT_EQ(b.g.nodes[2].inputs, (std::vector<int>{s, a}));
  EXPECT_EQ(b.g.nodes[2].outputs, std::vector<int>{z});

  // Run the second partition: z = relu(s) + a.
  KernelInit init{b.g.nodes[2], b.g, nullptr, {}};
  auto k = CreateProviderPartitionKernel(init, ref_);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  auto outs = RunNode(b.g.nodes[2], b.g,
                      {Value(Tensor::FromVector<float>({-1, 2, -3, 4, -5, 6}, {2, 3})),
                       Value(Tensor::FromVector<float>({1, 1, 1, 1, 1, 1}, {2, 3}))},
                      **k);
  ASSERT_TRUE(outs.ok()) << outs.status().ToString();
  const float* z_out = outs->at(0).tensor().data<float>();
  const float want[] = {1, 3, 1, 5, 1, 7};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(z_out[i], want[i]);

  // Nodes another provider already took are left alone.
  GraphBuilder o;
  int ox = o.Value("x", {2}), oy = o.Value("y", {2}), oz = o.Value("z", {2});
  o.g.inputs = {ox};
  o.Add("Relu", {ox}, {oy}).provider = "other";
  o.Add("Relu", {oy}, {oz});
  o.g.outputs = {oz};
  std::vector<PartitionInfo> one;
  ASSERT_TRUE(PartitionForProvider(o.g, *ref_, {}, &one).ok());
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(o.g.nodes[0].provider, "other");
  EXPECT_EQ(o.g.nodes[0].op_type, "Relu");
  EXPECT_EQ(o.g.nodes[1].op_type, kPartitionOp);

  // min_nodes keeps short runs on the CPU.
  GraphBuilder c;
  int cx = c.Value("x", {2}), cy = c.Value("y", {2});
  c.g.inputs = {cx};
  c.Add("Relu", {cx}, {cy});
  c.g.outputs = {cy};
  PartitionOptions opts;
  opts.min_nodes = 2;
  std::vector<PartitionInfo> none;
  ASSERT_TRUE(PartitionForProvider(c.g, *ref_, opts, &none).ok());
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(c.g.nodes[0].op_type, "Relu");
  EXPECT_EQ(c.g.nodes[0].provider, "cpu");
}

TEST_F(PluginPartition, ValuesCapturedBySubgraphsLeaveThePartition) {
  GraphBuilder b;
  int x = b.Value("x", {2}), a = b.Value("a", {2}), y = b.Value("y", {2}), z = b.Value("z", {2});
  b.g.inputs = {x};
  b.Add("Relu", {x}, {a});
  b.Add("Relu", {a}, {y});
  // A node with a body that reads `a` from the enclosing scope (like If/Loop).
  auto body = std::make_shared<Graph>();
  body->captures.push_back(body->AddValue("a"));
  Attribute ga;
  ga.type = Attribute::Type::kGraph;
  ga.g = body;
  b.Add("If", {y}, {z}).attrs["then_branch"] = ga;
  b.g.outputs = {z};
  std::vector<PartitionInfo> parts;
  ASSERT_TRUE(PartitionForProvider(b.g, *ref_, {}, &parts).ok());
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(b.g.nodes[0].outputs, (std::vector<int>{a, y}));
  EXPECT_EQ(b.g.nodes[1].op_type, "If");
  EXPECT_EQ(b.g.nodes[1].provider, "cpu");
}

TEST_F(PluginPartition, ConcurrentRunsOfOneCompiledPartition) {
  GraphBuilder b;
  int x = b.Value("x", {64}), a = b.Value("a", {64}), y = b.Value("y", {64});
  int one = b.Const("one", Tensor::FromVector(std::vector<float>(64, 1.0f), {64}));
  b.g.inputs = {x};
  b.Add("Relu", {x}, {a});
  b.Add("Add", {a, one}, {y});
  b.g.outputs = {y};
  ASSERT_TRUE(PartitionForProvider(b.g, *ref_, {}, nullptr).ok());
  ASSERT_EQ(b.g.nodes.size(), 1u);
  KernelInit init{b.g.nodes[0], b.g, nullptr, {}};
  auto k = CreateProviderPartitionKernel(init, ref_);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  std::atomic<int> failures{0};
  auto work = [&](float base) {
    for (int it = 0; it < 50; ++it) {
      std::vector<float> in(64);
      for (int i = 0; i < 64; ++i) in[i] = base + static_cast<float>(i % 7) - 3.0f;
      auto out = RunNode(b.g.nodes[0], b.g, {Value(Tensor::FromVector(in, {64}))}, **k);
      if (!out.ok()) {
        ++failures;
        continue;
      }
      for (int i = 0; i < 64; ++i)
        if (out->at(0).tensor().data<float>()[i] != std::max(0.0f, in[i]) + 1.0f) ++failures;
    }
  };
  std::thread t1(work, 0.5f), t2(work, 2.0f);
  t1.join();
  t2.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(PluginPartition, BadPartitionNodesAreErrorsNotCrashes) {
  GraphBuilder b;
  int x = b.Value("x", {2});
  Node& n = b.Add("Partition", {x}, {x});
  n.domain = kPartitionDomain;
  KernelInit init{n, b.g, nullptr, {}};
  auto k = CreateProviderPartitionKernel(init, ref_);
  ASSERT_FALSE(k.ok());
  EXPECT_TRUE(Contains(k.status().message(), "missing graph attribute 'body'"));
  auto k2 = CreateProviderPartitionKernel(init, m_);
  ASSERT_FALSE(k2.ok());
  EXPECT_TRUE(Contains(k2.status().message(), "missing string attribute 'provider'"));
  Attribute p;
  p.type = Attribute::Type::kString;
  p.s = "nosuch";
  n.attrs["provider"] = p;
  auto k3 = CreateProviderPartitionKernel(init, m_);
  ASSERT_FALSE(k3.ok());
  EXPECT_EQ(k3.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(k3.status().message(), n.Describe()));
  // Device out of range.
  GraphBuilder g2;
  int v = g2.Value("v", {2});
  EXPECT_FALSE(AssignNodes(g2.g, *ref_, 3).ok());
  (void)v;
}

}  // namespace
}  // namespace strata::plugin
