// The Vulkan provider (providers/vulkan), loaded through the plugin mechanism and run on
// whatever Vulkan device the machine has (Mesa's lavapipe in CI). Every op is compared
// with strata's CPU reference kernels on random shapes, including edge sizes around the
// GEMM tile (1, odd, 17, 33, 65); the provider-independent op table lives in
// provider_parity_test.cc, these tests add Vulkan-specific cases. Without a Vulkan device (or without the
// provider built) every test skips with one reason.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/kernel.h"
#include "ir_builder.h"
#include "plugin/elf_info.h"
#include "plugin/partition.h"
#include "plugin/provider_manager.h"

extern char** environ;

namespace strata::plugin {
namespace {

const std::string kVulkanDir = std::string(STRATA_BINARY_DIR) + "/lib/strata/providers";
const std::string kVulkanLib = kVulkanDir + "/libstrata-provider-vulkan.so";

bool Has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The provider, loaded once per process (device and pipelines are reused by all tests).
struct VulkanEnv {
  ProviderManager manager;
  std::shared_ptr<LoadedProvider> provider;
  LoadReportEntry entry;
  std::string skip;  // why the tests cannot run here; "" when they can
};

VulkanEnv& Env() {
  static VulkanEnv* env = [] {
    auto* e = new VulkanEnv;
    if (::access(kVulkanLib.c_str(), R_OK) != 0) {
      e->skip = "the Vulkan provider is not built (" + kVulkanLib + " is missing; STRATA_VULKAN=OFF or no SDK)";
      return e;
    }
    Status st = e->manager.Discover({kVulkanLib}, /*load=*/true);
    if (!st.ok()) {
      e->skip = "discovery failed: " + st.ToString();
      return e;
    }
    for (const auto& r : e->manager.Report())
      if (r.name == "vulkan") e->entry = r;
    if (e->entry.status != ProviderStatus::kOk) {
      e->skip = "no usable Vulkan device: " + e->entry.ToString();
      return e;
    }
    auto p = e->manager.Acquire("vulkan");
    if (!p.ok())
      e->skip = "the Vulkan provider does not load: " + p.status().ToString();
    else
      e->provider = *p;
    return e;
  }();
  return *env;
}

#define REQUIRE_VULKAN()                                 \
  do {                                                   \
    if (!Env().skip.empty()) GTEST_SKIP() << Env().skip; \
  } while (0)

// ---------------------------------------------------------------- graph building

using G = strata::testing::IrBuilder;
using strata::testing::SetFloat;
using strata::testing::SetInt;
using strata::testing::SetInts;
using strata::testing::SetString;

std::mt19937& Rng() {
  static std::mt19937 rng(1234);
  return rng;
}
Tensor Random(Shape shape, float lo = -1.0f, float hi = 1.0f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = u(Rng());
  return Tensor::FromVector(v, shape);
}
Tensor I64(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::FromVector<int64_t>(v, {n});
}

// ---------------------------------------------------------------- evaluation

// Runs the graph's nodes in order: Partition nodes through the provider, the rest with
// the CPU reference kernels (where this build has them).
Result<std::vector<Tensor>> Evaluate(const Graph& g, const std::map<int, Tensor>& feeds) {
  std::vector<strata::Value> vals(g.values.size());
  for (const auto& [v, t] : g.initializers) vals[v] = strata::Value(t);
  for (const auto& [v, t] : feeds) vals[v] = strata::Value(t);
  static const strata::Value kEmpty;
  for (const Node& n : g.nodes) {
    if (n.op_type == "Gelu") {
      // ONNX defines Gelu (opset 20) as a function, which strata's importer inlines, so
      // there is no CPU kernel to ask: the formula is the oracle.
      const Tensor& x = vals[n.inputs[0]].tensor();
      const bool tanh_approx = n.GetString("approximate", "none") == "tanh";
      std::vector<float> y(static_cast<size_t>(x.num_elements()));
      for (size_t i = 0; i < y.size(); ++i) {
        const double v = x.data<float>()[i];
        y[i] = static_cast<float>(tanh_approx
                                      ? 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
                                      : 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
      }
      vals[n.outputs[0]] = strata::Value(Tensor::FromVector(y, x.shape()));
      continue;
    }
    KernelInit init{n, g, nullptr, {}};
    init.config.prefer_reference = true;
    std::unique_ptr<OpKernel> k;
    if (n.op_type == kPartitionOp) {
      ASSIGN_OR_RETURN(k, CreateProviderPartitionKernel(init, Env().provider));
    } else {
      DataType dt = n.inputs.empty() || n.inputs[0] < 0 || !vals[n.inputs[0]].is_tensor()
                        ? DataType::kFloat
                        : vals[n.inputs[0]].tensor().dtype();
      const KernelDef* def = CpuKernels().Find(n.domain, n.op_type, n.opset, dt, /*want_reference=*/true);
      if (!def) return InternalError("no CPU kernel for ", n.Describe());
      ASSIGN_OR_RETURN(k, def->factory(init));
    }
    std::vector<const strata::Value*> ins;
    for (int i : n.inputs) ins.push_back(i >= 0 ? &vals[i] : &kEmpty);
    std::vector<strata::Value> outs(n.outputs.size());
    KernelContext ctx(n, ins, &outs, nullptr, DefaultAllocator(), nullptr);
    RETURN_IF_ERROR(k->Compute(ctx));
    for (size_t o = 0; o < outs.size(); ++o)
      if (n.outputs[o] >= 0) vals[n.outputs[o]] = std::move(outs[o]);
  }
  std::vector<Tensor> res;
  for (int o : g.outputs) {
    if (!vals[o].is_tensor()) return InternalError("output ", o, " was not computed");
    res.push_back(vals[o].tensor());
  }
  return res;
}

// The oracle: the unpartitioned graph on strata's CPU reference kernels (the same oracle
// as the provider parity harness, tests/unit/provider_harness.h).
std::vector<Tensor> Reference(const Graph& g, const std::map<int, Tensor>& feeds) {
  auto r = Evaluate(g, feeds);
  EXPECT_TRUE(r.ok()) << "CPU reference: " << r.status().ToString();
  return r.ok() ? *r : std::vector<Tensor>{};
}

// Partitions a copy of the graph for the provider; `offloaded` says whether every node
// went to it.
Result<Graph> Partitioned(Graph g, bool* offloaded) {
  std::vector<PartitionInfo> parts;
  RETURN_IF_ERROR(PartitionForProvider(g, *Env().provider, {}, &parts));
  *offloaded = true;
  for (const Node& n : g.nodes) *offloaded &= n.op_type == kPartitionOp;
  return g;
}

::testing::AssertionResult Close(const Tensor& got, const Tensor& want, float tol) {
  if (got.shape() != want.shape()) {
    std::ostringstream s;
    s << "shape " << ShapeToString(got.shape()) << " vs reference " << ShapeToString(want.shape());
    return ::testing::AssertionFailure() << s.str();
  }
  const float* a = got.data<float>();
  const float* b = want.data<float>();
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);
    const bool same_inf = std::isinf(a[i]) && a[i] == b[i];
    if (!both_nan && !same_inf && !(std::fabs(a[i] - b[i]) <= tol * (1.0f + std::fabs(b[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs reference " << b[i];
  }
  return ::testing::AssertionSuccess();
}

// Runs `b` on the CPU reference and on the provider (every node must be offloaded) and
// compares every graph output.
void ExpectMatches(const G& b, float tol = 1e-5f, const std::string& what = "") {
  SCOPED_TRACE(what);
  const std::vector<Tensor> want = Reference(b.g, b.feeds);
  bool offloaded = false;
  auto pg = Partitioned(b.g, &offloaded);
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  ASSERT_TRUE(offloaded) << "a node stayed on the CPU: " << pg->nodes[0].Describe();
  auto got = Evaluate(*pg, b.feeds);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), want.size());
  for (size_t k = 0; k < got->size(); ++k) EXPECT_TRUE(Close((*got)[k], want[k], tol)) << "output " << k;
}

// ---------------------------------------------------------------- loading

TEST(VulkanLoad, ProviderLoadsAndListsTheDevice) {
  REQUIRE_VULKAN();
  const LoadReportEntry& e = Env().entry;
  EXPECT_EQ(e.status, ProviderStatus::kOk) << e.ToString();
  EXPECT_EQ(e.name, "vulkan");
  ASSERT_FALSE(e.devices.empty());
  for (const auto& d : e.devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_TRUE(Has(d.api_version, "Vulkan 1.")) << d.api_version;
    EXPECT_GT(d.memory_bytes, 0u);
  }
  EXPECT_TRUE(Env().provider->HasCapability("spirv"));
}

TEST(VulkanLoad, LibraryExportsOnlyEntryPointsAndDoesNotLinkTheLoader) {
  if (::access(kVulkanLib.c_str(), R_OK) != 0) GTEST_SKIP() << "the Vulkan provider is not built";
  auto elf = ReadElfInfo(kVulkanLib);
  ASSERT_TRUE(elf.ok()) << elf.status().ToString();
  for (const auto& n : elf->needed) {
    EXPECT_FALSE(Has(n, "vulkan")) << "NEEDED " << n;
    EXPECT_FALSE(Has(n, "strata")) << "NEEDED " << n;
  }
  std::vector<std::string> exports = elf->exports;
  std::sort(exports.begin(), exports.end());
  EXPECT_EQ(exports, (std::vector<std::string>{"strata_provider_init", "strata_provider_probe"}));
  // The loader is declared as a run-time need, so listing reports MISSING_DEPENDENCY
  // where it is absent.
  std::ifstream manifest(kVulkanDir + "/libstrata-provider-vulkan.json");
  std::stringstream text;
  text << manifest.rdbuf();
  EXPECT_TRUE(Has(text.str(), "\"libvulkan.so.1\"")) << text.str();
}

// Child mode (disabled in normal runs): report the provider's load status on stdout
// (see SpawnStatus).
TEST(VulkanLoad, DISABLED_ChildReportsStatus) {
  if (!std::getenv("STRATA_VULKAN_TEST_CHILD")) GTEST_SKIP() << "only runs as a child of the load-report tests";
  ProviderManager m;
  ASSERT_TRUE(m.Discover({kVulkanLib}, true).ok());
  for (const auto& r : m.Report())
    if (r.name == "vulkan") std::printf("STATUS=%s DETAIL=%s\n", ProviderStatusName(r.status), r.detail.c_str());
}

// Runs this test binary's ChildReportsStatus in a fresh process with extra environment
// (the provider's Vulkan state is per process) and returns its output.
std::string SpawnSelf(const std::vector<std::string>& env_extra, const std::string& filter_arg, int* exit_code) {
  std::vector<std::string> env_s = env_extra;
  env_s.push_back("STRATA_VULKAN_TEST_CHILD=1");
  for (char** e = environ; *e; ++e) env_s.push_back(*e);
  std::vector<char*> envp;
  for (auto& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  char exe[4096];
  ssize_t len = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) return "";
  exe[len] = 0;
  std::string out_path = ::testing::TempDir() + "/vulkan_child_" + std::to_string(::getpid()) + ".txt";
  std::string filter = filter_arg;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::string also = "--gtest_also_run_disabled_tests";
  char* argv[] = {exe, filter.data(), also.data(), nullptr};
  pid_t pid;
  int rc = posix_spawn(&pid, exe, &fa, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return "";
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (exit_code) *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream f(out_path);
  std::stringstream s;
  s << f.rdbuf();
  ::unlink(out_path.c_str());
  return s.str();
}

std::string SpawnStatus(const std::vector<std::string>& env_extra) {
  return SpawnSelf(env_extra, "--gtest_filter=VulkanLoad.DISABLED_ChildReportsStatus", nullptr);
}

TEST(VulkanLoad, NoDriverIsNoDevice) {
  REQUIRE_VULKAN();
  // The loader is present but finds no driver: NO_DEVICE, with the Vulkan reason.
  std::string out = SpawnStatus({"VK_ICD_FILENAMES=/nonexistent/icd.json", "VK_DRIVER_FILES=/nonexistent/icd.json"});
  EXPECT_TRUE(Has(out, "STATUS=NO_DEVICE")) << out;
  EXPECT_TRUE(Has(out, "vkCreateInstance") || Has(out, "no physical device")) << out;
}

TEST(VulkanLoad, DeviceLackingARequiredFeatureIsNamed) {
  REQUIRE_VULKAN();
  // lavapipe has no sparse binding; requiring it leaves no usable device and says why.
  std::string out = SpawnStatus({"STRATA_VULKAN_REQUIRE=sparseBinding"});
  if (Has(out, "STATUS=OK")) GTEST_SKIP() << "this device supports sparseBinding";
  EXPECT_TRUE(Has(out, "STATUS=NO_DEVICE")) << out;
  EXPECT_TRUE(Has(out, "lacks feature sparseBinding")) << out;
}

TEST(VulkanLoad, StagingTransfersOfDiscreteGpusGiveTheSameResults) {
  REQUIRE_VULKAN();
  if (std::getenv("STRATA_VULKAN_STAGING")) GTEST_SKIP() << "already the staging child";
  // Unmapped device memory: every copy goes through a staging buffer and a transfer.
  int code = -1;
  std::string out =
      SpawnSelf({"STRATA_VULKAN_STAGING=1"},
                "--gtest_filter=VulkanGemm.*:VulkanModel.*:VulkanErrors.Buffers*:VulkanTensorOps.*", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_TRUE(Has(out, "PASSED")) << out;
}

// ---------------------------------------------------------------- GEMM

TEST(VulkanGemm, MatMulEdgeSizesAndBatchBroadcasting) {
  REQUIRE_VULKAN();
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{1, 1}, {1, 1}},     {{17, 33}, {33, 65}},       {{65, 17}, {17, 33}},        {{64, 64}, {64, 64}},
      {{3, 129}, {129, 7}}, {{2, 3, 17, 33}, {33, 5}},  {{3, 1, 5, 7}, {4, 7, 9}},   {{33}, {33, 17}},
      {{5, 17, 33}, {33}},  {{2, 65, 16}, {2, 16, 66}}, {{1, 0 + 1, 300}, {300, 1}},
  };
  for (const auto& [as, bs] : cases) {
    G b;
    int a = b.Input("a", Random(as)), w = b.Input("b", Random(bs)), y = b.Out("y");
    b.Add("MatMul", {a, w}, {y});
    b.g.outputs = {y};
    ExpectMatches(b, 1e-5f, ShapeToString(as) + " x " + ShapeToString(bs));
  }
}

TEST(VulkanGemm, GemmTransposesAlphaBetaAndBiasShapes) {
  REQUIRE_VULKAN();
  const int64_t M = 33, K = 17, N = 65;
  const std::vector<Shape> bias_shapes = {{}, {N}, {1, N}, {M, 1}, {M, N}, {1}};
  int variant = 0;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const Shape& cs : bias_shapes) {
        G b;
        int a = b.Input("a", Random(ta ? Shape{K, M} : Shape{M, K}));
        int w = b.Const("w", Random(tb ? Shape{N, K} : Shape{K, N}));
        int c = (variant % 3 == 2) ? b.Input("c", Random(cs)) : b.Const("c", Random(cs));
        int y = b.Out("y");
        Node& n = b.Add("Gemm", {a, w, c}, {y});
        SetInt(n, "transA", ta);
        SetInt(n, "transB", tb);
        SetFloat(n, "alpha", 0.5f + 0.25f * static_cast<float>(variant % 3));
        SetFloat(n, "beta", variant % 2 ? 1.0f : -2.0f);
        b.g.outputs = {y};
        ExpectMatches(b, 1e-5f,
                      "transA=" + std::to_string(ta) + " transB=" + std::to_string(tb) + " C " + ShapeToString(cs));
        ++variant;
      }
  // Without C.
  G b;
  int a = b.Input("a", Random({1, 7})), w = b.Const("w", Random({7, 1})), y = b.Out("y");
  b.Add("Gemm", {a, w}, {y});
  b.g.outputs = {y};
  ExpectMatches(b);
}

// ---------------------------------------------------------------- Conv / pooling

struct ConvCase {
  Shape x, w;
  int64_t group;
  std::vector<int64_t> strides, pads, dilations;
  bool bias;
  std::string auto_pad;
};

TEST(VulkanConv, GroupsDepthwiseStridesPadsDilations) {
  REQUIRE_VULKAN();
  const std::vector<ConvCase> cases = {
      {{1, 3, 9, 9}, {4, 3, 3, 3}, 1, {}, {1, 1, 1, 1}, {}, true, ""},
      {{2, 4, 17, 13}, {6, 2, 3, 3}, 2, {2, 2}, {1, 0, 2, 1}, {}, true, ""},
      {{1, 8, 11, 11}, {8, 1, 3, 3}, 8, {1, 1}, {1, 1, 1, 1}, {}, true, ""},  // depthwise
      {{1, 5, 12, 10}, {7, 5, 3, 2}, 1, {1, 2}, {2, 2, 2, 2}, {2, 2}, false, ""},
      {{2, 33, 5, 7}, {65, 33, 1, 1}, 1, {}, {}, {}, true, ""},  // pointwise: no im2col
      {{1, 3, 10, 9}, {2, 3, 4, 4}, 1, {3, 2}, {}, {}, true, "SAME_UPPER"},
      {{1, 3, 10, 9}, {2, 3, 3, 4}, 1, {2, 2}, {}, {}, false, "SAME_LOWER"},
      {{1, 1, 1, 1}, {1, 1, 1, 1}, 1, {}, {}, {}, false, "VALID"},
  };
  for (const ConvCase& c : cases) {
    G b;
    int x = b.Input("x", Random(c.x)), w = b.Const("w", Random(c.w)), y = b.Out("y");
    std::vector<int> ins = {x, w};
    if (c.bias) ins.push_back(b.Const("b", Random({c.w[0]})));
    Node& n = b.Add("Conv", ins, {y}, 11);
    SetInt(n, "group", c.group);
    if (!c.strides.empty()) SetInts(n, "strides", c.strides);
    if (!c.pads.empty()) SetInts(n, "pads", c.pads);
    if (!c.dilations.empty()) SetInts(n, "dilations", c.dilations);
    if (!c.auto_pad.empty()) SetString(n, "auto_pad", c.auto_pad);
    b.g.outputs = {y};
    ExpectMatches(b, 1e-5f, "X " + ShapeToString(c.x) + " W " + ShapeToString(c.w) + " " + c.auto_pad);
  }
}

TEST(VulkanConv, FusedActivationAttributesClampTheResult) {
  REQUIRE_VULKAN();
  for (const std::string act : {"Relu", "Clip"}) {
    // CPU: Conv then the activation op; provider: one Conv with the fused attributes.
    G ref;
    Tensor xv = Random({1, 3, 7, 7}), wv = Random({5, 3, 3, 3}), bv = Random({5});
    int x = ref.Input("x", xv), w = ref.Const("w", wv), bias = ref.Const("b", bv), c = ref.Out("c"), y = ref.Out("y");
    SetInts(ref.Add("Conv", {x, w, bias}, {c}, 11), "pads", {1, 1, 1, 1});
    if (act == "Relu") {
      ref.Add("Relu", {c}, {y});
    } else {
      int lo = ref.Const("lo", Tensor::Scalar<float>(-0.25f)), hi = ref.Const("hi", Tensor::Scalar<float>(0.5f));
      ref.Add("Clip", {c, lo, hi}, {y});
    }
    ref.g.outputs = {y};
    const std::vector<Tensor> want = Reference(ref.g, ref.feeds);

    G fused;
    int fx = fused.Input("x", xv), fw = fused.Const("w", wv), fb = fused.Const("b", bv), fy = fused.Out("y");
    Node& n = fused.Add("Conv", {fx, fw, fb}, {fy}, 11);
    SetInts(n, "pads", {1, 1, 1, 1});
    SetString(n, "activation", act);
    SetFloat(n, "activation_min", act == "Relu" ? 0.0f : -0.25f);
    SetFloat(n, "activation_max", act == "Relu" ? INFINITY : 0.5f);
    fused.g.outputs = {fy};
    bool offloaded = false;
    auto pg = Partitioned(fused.g, &offloaded);
    ASSERT_TRUE(pg.ok() && offloaded);
    auto got = Evaluate(*pg, fused.feeds);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(Close((*got)[0], want[0], 1e-5f)) << act;
  }
}

TEST(VulkanPool, MaxAverageAndGlobalPooling) {
  REQUIRE_VULKAN();
  struct PoolCase {
    std::string op;
    Shape x;
    std::vector<int64_t> k, strides, pads;
    int64_t ceil, count_pad;
  };
  const std::vector<PoolCase> cases = {
      {"MaxPool", {1, 3, 9, 9}, {2, 2}, {2, 2}, {}, 0, 0},
      {"MaxPool", {2, 5, 17, 13}, {3, 3}, {2, 1}, {1, 1, 1, 1}, 0, 0},
      {"MaxPool", {1, 2, 10, 10}, {3, 3}, {2, 2}, {}, 1, 0},
      {"AveragePool", {1, 3, 9, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, 0},
      {"AveragePool", {1, 3, 9, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, 1},
      {"AveragePool", {2, 4, 33, 17}, {2, 3}, {1, 2}, {}, 0, 0},
  };
  for (const PoolCase& c : cases) {
    G b;
    int x = b.Input("x", Random(c.x)), y = b.Out("y");
    Node& n = b.Add(c.op, {x}, {y}, 11);
    SetInts(n, "kernel_shape", c.k);
    if (!c.strides.empty()) SetInts(n, "strides", c.strides);
    if (!c.pads.empty()) SetInts(n, "pads", c.pads);
    if (c.ceil) SetInt(n, "ceil_mode", 1);
    if (c.op == "AveragePool") SetInt(n, "count_include_pad", c.count_pad);
    b.g.outputs = {y};
    ExpectMatches(b, 1e-5f, c.op + " " + ShapeToString(c.x));
  }
  for (Shape s : {Shape{2, 3, 7, 9}, Shape{1, 65, 1, 1}, Shape{1, 4, 33, 33}}) {
    G b;
    int x = b.Input("x", Random(s)), y = b.Out("y");
    b.Add("GlobalAveragePool", {x}, {y});
    b.g.outputs = {y};
    ExpectMatches(b, 1e-5f, ShapeToString(s));
  }
}

// ---------------------------------------------------------------- elementwise

TEST(VulkanElementwise, BinaryOpsBroadcast) {
  REQUIRE_VULKAN();
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{17}, {17}}, {{3, 1, 5}, {4, 1}}, {{2, 3, 4, 5}, {5}}, {{1}, {33, 65}}, {{2, 1, 3, 1, 2, 1, 2}, {3, 2, 2, 2}}};
  for (const std::string op : {"Add", "Sub", "Mul", "Div", "Pow"})
    for (const auto& [as, bs] : shapes) {
      G b;
      // Pow: positive bases; Div: denominators away from 0.
      int a = b.Input("a", op == "Pow" ? Random(as, 0.1f, 2.0f) : Random(as));
      int c = b.Input("b", op == "Div" ? Random(bs, 0.5f, 2.0f) : Random(bs, -2.0f, 2.0f));
      int y = b.Out("y");
      b.Add(op, {a, c}, {y});
      b.g.outputs = {y};
      ExpectMatches(b, 2e-5f, op + " " + ShapeToString(as) + " " + ShapeToString(bs));
    }
  // Pow with negative bases and integer exponents (x^2, x^3), as in LayerNorm patterns.
  G b;
  int a = b.Input("a", Random({65})), e = b.Const("e", Tensor::FromVector<float>({2.0f}, {1})), y = b.Out("y");
  int e3 = b.Const("e3", Tensor::FromVector<float>({3.0f}, {1})), y3 = b.Out("y3");
  b.Add("Pow", {a, e}, {y});
  b.Add("Pow", {a, e3}, {y3});
  b.g.outputs = {y, y3};
  ExpectMatches(b, 1e-5f, "Pow negative bases");
}

TEST(VulkanElementwise, UnaryOps) {
  REQUIRE_VULKAN();
  for (const std::string op : {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Sqrt", "Neg", "LeakyRelu", "Abs", "Log",
                               "Reciprocal", "Gelu", "GeluTanh"}) {
    G b;
    const bool positive = op == "Sqrt" || op == "Log" || op == "Reciprocal";
    int x = b.Input("x", positive ? Random({3, 67}, 0.05f, 4.0f) : Random({3, 67}, -6.0f, 6.0f)), y = b.Out("y");
    Node& n = b.Add(op == "GeluTanh" ? "Gelu" : op, {x}, {y}, op.rfind("Gelu", 0) == 0 ? 20 : 13);
    if (op == "LeakyRelu") SetFloat(n, "alpha", 0.2f);
    if (op == "GeluTanh") SetString(n, "approximate", "tanh");
    b.g.outputs = {y};
    ExpectMatches(b, 2e-6f, op);
  }
  G b;
  int x = b.Input("x", Random({257}, -3, 3)), lo = b.Const("lo", Tensor::Scalar<float>(-1.5f));
  int hi = b.Const("hi", Tensor::Scalar<float>(0.75f)), y = b.Out("y"), y2 = b.Out("y2");
  b.Add("Clip", {x, lo, hi}, {y});
  b.Add("Clip", {x, lo}, {y2});
  b.g.outputs = {y, y2};
  ExpectMatches(b, 0.0f, "Clip");
}

TEST(VulkanElementwise, GeluBuiltFromPieces) {
  REQUIRE_VULKAN();
  // 0.5 * x * (1 + erf(x / sqrt(2))): the pattern exported transformers use.
  G b;
  int x = b.Input("x", Random({4, 33}, -4, 4)), s = b.Const("s", Tensor::Scalar<float>(1.41421356f));
  int one = b.Const("one", Tensor::Scalar<float>(1.0f)), half = b.Const("half", Tensor::Scalar<float>(0.5f));
  int d = b.Out("d"), e = b.Out("e"), a = b.Out("a"), m = b.Out("m"), y = b.Out("y");
  b.Add("Div", {x, s}, {d});
  b.Add("Erf", {d}, {e});
  b.Add("Add", {e, one}, {a});
  b.Add("Mul", {x, a}, {m});
  b.Add("Mul", {m, half}, {y});
  b.g.outputs = {y};
  ExpectMatches(b, 2e-6f);
}

// ---------------------------------------------------------------- normalization / reduction

TEST(VulkanNorm, SoftmaxAxesAndOldOpsetCoercion) {
  REQUIRE_VULKAN();
  struct SCase {
    Shape s;
    int64_t axis;
    int opset;
  };
  for (const SCase& c : std::vector<SCase>{{{2, 3, 17}, -1, 13},
                                           {{4, 1000}, -1, 13},
                                           {{2, 5, 3}, 1, 13},
                                           {{1, 1}, -1, 13},
                                           {{2, 3, 4}, 1, 11},
                                           {{3, 65}, 1, 1}}) {
    G b;
    int x = b.Input("x", Random(c.s, -5, 5)), y = b.Out("y");
    SetInt(b.Add("Softmax", {x}, {y}, c.opset), "axis", c.axis);
    b.g.outputs = {y};
    ExpectMatches(b, 1e-5f,
                  ShapeToString(c.s) + " axis " + std::to_string(c.axis) + " opset " + std::to_string(c.opset));
  }
}

TEST(VulkanNorm, LayerNormalization) {
  REQUIRE_VULKAN();
  for (int64_t axis : {-1, -2}) {
    for (bool bias : {true, false}) {
      G b;
      Shape s = {2, 5, 33};
      Shape ns = axis == -1 ? Shape{33} : Shape{5, 33};
      int x = b.Input("x", Random(s, -3, 3)), sc = b.Const("scale", Random(ns)), y = b.Out("y");
      std::vector<int> ins = {x, sc};
      if (bias) ins.push_back(b.Const("bias", Random(ns)));
      Node& n = b.Add("LayerNormalization", ins, {y}, 17);
      SetInt(n, "axis", axis);
      SetFloat(n, "epsilon", 1e-5f);
      b.g.outputs = {y};
      ExpectMatches(b, 2e-5f, "axis " + std::to_string(axis));
    }
  }
}

TEST(VulkanNorm, ReduceMeanAndSumOverTheLastAxis) {
  REQUIRE_VULKAN();
  for (const std::string op : {"ReduceMean", "ReduceSum"})
    for (int64_t keep : {0, 1})
      for (Shape s : {Shape{3, 17}, Shape{2, 3, 1000}, Shape{1}}) {
        G b;
        int x = b.Input("x", Random(s)), y = b.Out("y");
        Node* n;
        if (op == "ReduceSum") {
          int axes = b.Const("axes", I64({-1}));
          n = &b.Add(op, {x, axes}, {y}, 13);
        } else {
          n = &b.Add(op, {x}, {y}, 13);
          SetInts(*n, "axes", {-1});
        }
        SetInt(*n, "keepdims", keep);
        b.g.outputs = {y};
        ExpectMatches(b, 2e-5f, op + " " + ShapeToString(s) + " keepdims " + std::to_string(keep));
      }
}

// ---------------------------------------------------------------- tensor ops

TEST(VulkanTensorOps, TransposeConcatSlice) {
  REQUIRE_VULKAN();
  for (std::vector<int64_t> perm : {std::vector<int64_t>{1, 0}, {0, 2, 1, 3}, {3, 1, 0, 2}}) {
    G b;
    Shape s = perm.size() == 2 ? Shape{17, 33} : Shape{2, 3, 5, 7};
    int x = b.Input("x", Random(s)), y = b.Out("y");
    SetInts(b.Add("Transpose", {x}, {y}), "perm", perm);
    b.g.outputs = {y};
    ExpectMatches(b, 0.0f, "Transpose");
  }
  for (int64_t axis : {0, 1, -1}) {
    G b;
    Shape s1 = {2, 3, 4}, s2 = {2, 3, 4};
    s1[axis < 0 ? 2 : axis] = 1;
    s2[axis < 0 ? 2 : axis] = 5;
    int a = b.Input("a", Random(s1)), c = b.Input("c", Random(s2)), y = b.Out("y");
    SetInt(b.Add("Concat", {a, c}, {y}), "axis", axis);
    b.g.outputs = {y};
    ExpectMatches(b, 0.0f, "Concat axis " + std::to_string(axis));
  }
  struct SliceCase {
    std::vector<int64_t> starts, ends, axes, steps;
  };
  for (const SliceCase& c : std::vector<SliceCase>{{{1}, {4}, {1}, {1}},
                                                   {{0, 2}, {INT64_MAX, -1}, {0, 2}, {2, 1}},
                                                   {{-1}, {INT64_MIN}, {2}, {-1}},
                                                   {{5, 1}, {1, 3}, {-1, 1}, {-2, 1}},
                                                   {{3}, {3}, {0}, {1}}}) {
    G b;
    int x = b.Input("x", Random({4, 6, 7})), y = b.Out("y");
    int st = b.Const("starts", I64(c.starts)), en = b.Const("ends", I64(c.ends));
    int ax = b.Const("axes", I64(c.axes)), sp = b.Const("steps", I64(c.steps));
    b.Add("Slice", {x, st, en, ax, sp}, {y});
    b.g.outputs = {y};
    ExpectMatches(b, 0.0f, "Slice");
  }
}

TEST(VulkanTensorOps, GatherAndShapeOnlyOps) {
  REQUIRE_VULKAN();
  {
    G b;  // runtime int64 indices with negatives, axis 1
    int x = b.Input("x", Random({3, 7, 5}));
    int idx = b.Input("i", Tensor::FromVector<int64_t>({0, -1, 3, 6, 2, -7}, {2, 3})), y = b.Out("y");
    SetInt(b.Add("Gather", {x, idx}, {y}), "axis", 1);
    b.g.outputs = {y};
    ExpectMatches(b, 0.0f, "Gather axis 1");
  }
  {
    G b;  // embedding lookup: constant table, int32 scalar-free indices
    int tbl = b.Const("emb", Random({65, 17}));
    int idx = b.Input("ids", Tensor::FromVector<int32_t>({64, 0, 5}, {3})), y = b.Out("y");
    b.Add("Gather", {tbl, idx}, {y});
    b.g.outputs = {y};
    ExpectMatches(b, 0.0f, "Gather embedding");
  }
  {
    G b;  // Reshape -> Unsqueeze -> Squeeze -> Flatten, then Relu so data moves
    int x = b.Input("x", Random({2, 3, 4})), r = b.Out("r"), u = b.Out("u"), s = b.Out("s"), f = b.Out("f");
    int y = b.Out("y");
    b.Add("Reshape", {x, b.Const("shape", I64({0, -1}))}, {r});
    b.Add("Unsqueeze", {r, b.Const("ax", I64({1, -1}))}, {u});
    b.Add("Squeeze", {u, b.Const("ax2", I64({1}))}, {s});
    SetInt(b.Add("Flatten", {s}, {f}), "axis", 2);
    b.Add("Relu", {f}, {y});
    b.g.outputs = {y, s};
    ExpectMatches(b, 0.0f, "shape ops");
  }
}

// ---------------------------------------------------------------- whole partitions

TEST(VulkanModel, SmallCnnRunsAsOnePartition) {
  REQUIRE_VULKAN();
  G b;
  int x = b.Input("x", Random({2, 3, 17, 17}));
  int w1 = b.Const("w1", Random({8, 3, 3, 3}, -0.5f, 0.5f)), b1 = b.Const("b1", Random({8}));
  int w2 = b.Const("w2", Random({8, 1, 3, 3}, -0.5f, 0.5f)), b2 = b.Const("b2", Random({8}));
  int w3 = b.Const("w3", Random({16, 8, 1, 1}, -0.5f, 0.5f));
  int fcw = b.Const("fcw", Random({10, 16})), fcb = b.Const("fcb", Random({10}));
  int c1 = b.Out("c1"), r1 = b.Out("r1"), p1 = b.Out("p1"), c2 = b.Out("c2"), r2 = b.Out("r2"), c3 = b.Out("c3");
  int g = b.Out("g"), f = b.Out("f"), fc = b.Out("fc"), y = b.Out("y");
  SetInts(b.Add("Conv", {x, w1, b1}, {c1}, 11), "pads", {1, 1, 1, 1});
  b.Add("Relu", {c1}, {r1});
  Node& pool = b.Add("MaxPool", {r1}, {p1}, 11);
  SetInts(pool, "kernel_shape", {2, 2});
  SetInts(pool, "strides", {2, 2});
  Node& dw = b.Add("Conv", {p1, w2, b2}, {c2}, 11);
  SetInts(dw, "pads", {1, 1, 1, 1});
  SetInt(dw, "group", 8);
  b.Add("Sigmoid", {c2}, {r2});
  b.Add("Conv", {r2, w3}, {c3}, 11);
  b.Add("GlobalAveragePool", {c3}, {g});
  b.Add("Flatten", {g}, {f});
  SetInt(b.Add("Gemm", {f, fcw, fcb}, {fc}), "transB", 1);
  b.Add("Softmax", {fc}, {y});
  b.g.outputs = {y};

  bool offloaded = false;
  auto pg = Partitioned(b.g, &offloaded);
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  ASSERT_TRUE(offloaded);
  EXPECT_EQ(pg->nodes.size(), 1u);
  ExpectMatches(b, 1e-5f, "CNN");

  // Reruns of one compiled partition agree, also when run concurrently.
  KernelInit init{pg->nodes[0], *pg, nullptr, {}};
  auto k = CreateProviderPartitionKernel(init, Env().provider);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  auto run = [&](const Tensor& in) -> Result<Tensor> {
    strata::Value v(in);
    std::vector<const strata::Value*> ins = {&v};
    std::vector<strata::Value> outs(1);
    KernelContext ctx(pg->nodes[0], ins, &outs, nullptr, DefaultAllocator(), nullptr);
    RETURN_IF_ERROR((*k)->Compute(ctx));
    return outs[0].tensor();
  };
  auto first = run(b.feeds[x]);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::vector<std::thread> threads;
  std::vector<int> same(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      auto r = run(b.feeds[x]);
      same[t] = r.ok() && Close(*r, *first, 0.0f);
    });
  for (auto& t : threads) t.join();
  for (int t = 0; t < 4; ++t) EXPECT_TRUE(same[t]) << "thread " << t;

  // A wrong input shape is an error naming the Partition node and the Conv.
  auto bad = run(Random({2, 4, 17, 17}));
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Has(bad.status().message(), "Conv")) << bad.status().message();
  EXPECT_TRUE(Has(bad.status().message(), "X has 4 channels but W expects 3")) << bad.status().message();
}

// ---------------------------------------------------------------- declines and errors

TEST(VulkanErrors, CapabilityQueryDeclinesWhatItCannotRunExactly) {
  REQUIRE_VULKAN();
  G b;
  int xi = b.Input("xi", Tensor::FromVector<int32_t>({1, 2, 3}, {3}));
  int yi = b.Value("yi", {3}, DataType::kInt32);
  b.Add("Add", {xi, xi}, {yi});  // int32: CPU
  int x = b.Input("x", Random({2, 3}));
  int sh = b.Input("shape", I64({3, 2}));  // Reshape with a runtime shape: CPU
  int r = b.Out("r");
  b.Add("Reshape", {x, sh}, {r});
  int m = b.Out("m"), idx = b.Value("idx", {2, 3}, DataType::kInt64);
  Node& mp = b.Add("MaxPool", {b.Input("p", Random({1, 1, 4, 4}))}, {m, idx});  // Indices output: CPU
  SetInts(mp, "kernel_shape", {2, 2});
  int t = b.Out("t");
  Node& tp = b.Add("Conv", {b.Input("c", Random({1, 2, 5})), b.Const("cw", Random({1, 2, 3}))}, {t});  // 1-D
  (void)tp;
  auto sup = QuerySupport(b.g, *Env().provider);
  ASSERT_TRUE(sup.ok()) << sup.status().ToString();
  EXPECT_EQ(*sup, (std::vector<bool>{false, false, false, false}));
}

TEST(VulkanErrors, GatherIndexOutOfRangeIsAnErrorNotACrash) {
  REQUIRE_VULKAN();
  G b;
  int x = b.Input("x", Random({4, 3}));
  int idx = b.Input("i", Tensor::FromVector<int64_t>({1, 4}, {2})), y = b.Out("y");
  b.Add("Gather", {x, idx}, {y});
  b.g.outputs = {y};
  bool offloaded = false;
  auto pg = Partitioned(b.g, &offloaded);
  ASSERT_TRUE(pg.ok() && offloaded);
  auto got = Evaluate(*pg, b.feeds);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(Has(got.status().message(), "Gather")) << got.status().message();
  EXPECT_TRUE(Has(got.status().message(), "out of range")) << got.status().message();
}

TEST(VulkanErrors, BuffersCopiesAndBadArguments) {
  REQUIRE_VULKAN();
  const strata_provider_api& api = Env().provider->api();
  strata_device_buffer* buf = nullptr;
  ASSERT_TRUE(
      Env()
          .provider->Call("alloc", [&](strata_provider_error* e) { return api.buffer_alloc(api.self, 0, 64, &buf, e); })
          .ok());
  std::vector<float> in(16), out(16, 0);
  for (int i = 0; i < 16; ++i) in[i] = static_cast<float>(i) * 0.5f;
  EXPECT_TRUE(
      Env()
          .provider
          ->Call("to", [&](strata_provider_error* e) { return api.copy_to_device(api.self, buf, 0, in.data(), 64, e); })
          .ok());
  EXPECT_TRUE(
      Env()
          .provider
          ->Call("from",
                 [&](strata_provider_error* e) { return api.copy_to_host(api.self, out.data(), buf, 0, 64, e); })
          .ok());
  EXPECT_EQ(in, out);
  Status over = Env().provider->Call(
      "over", [&](strata_provider_error* e) { return api.copy_to_device(api.self, buf, 8, in.data(), 64, e); });
  EXPECT_FALSE(over.ok());
  EXPECT_TRUE(Has(over.message(), "exceeds the buffer")) << over.message();
  Status dev = Env().provider->Call("alloc", [&](strata_provider_error* e) {
    strata_device_buffer* b2 = nullptr;
    return api.buffer_alloc(api.self, 99, 4, &b2, e);
  });
  EXPECT_TRUE(Has(dev.message(), "device index 99 out of range")) << dev.message();
  api.buffer_free(api.self, buf);
  api.buffer_free(api.self, nullptr);
  api.release_partition(api.self, nullptr);
}

}  // namespace
}  // namespace strata::plugin
