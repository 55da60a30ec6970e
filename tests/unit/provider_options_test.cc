// Session options addressed to a provider ("<provider>.<key>"): they reach only that
// provider's compile, the provider refuses what it does not know, and an option for a
// provider the session does not use is refused instead of being ignored. Exercised with
// the reference test provider (tests/plugins/ref), which knows "precision" = "fp32" only.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/session.h"
#include "plugin/partition.h"
#include "plugin/provider_manager.h"
#include "strata/strata.h"

namespace strata {
namespace {

#ifndef STRATA_TEST_PROVIDER_DIR
#define STRATA_TEST_PROVIDER_DIR STRATA_BINARY_DIR "/lib/strata/test-providers"
#endif

const std::string kDigits = std::string(STRATA_SOURCE_DIR) + "/examples/digits.onnx";
const std::string kRefLib = std::string(STRATA_TEST_PROVIDER_DIR) + "/libstrata-provider-ref.so";

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class ProviderOptions : public ::testing::Test {
 protected:
  SessionOptions Options(std::vector<std::pair<std::string, std::string>> provider_options) {
    SessionOptions o;
    o.threads = 1;
    o.providers = {"ref"};
    o.provider_paths = {kRefLib};
    o.provider_manager = &pm_;
    o.provider_options = std::move(provider_options);
    return o;
  }
  static Value Image(float seed) {
    Tensor t = *Tensor::Allocate(DataType::kFloat, {1, 1, 8, 8});
    for (int i = 0; i < 64; ++i) t.mutable_data<float>()[i] = static_cast<float>((i * 37 + 11) % 17) * seed;
    return Value(t);
  }
  plugin::ProviderManager pm_;
};

TEST_F(ProviderOptions, KnownOptionReachesTheProviderAndTheSessionRuns) {
  auto s = Session::CreateFromFile(kDigits, Options({{"ref.precision", "fp32"}}));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  bool noted = false;
  for (const auto& n : (*s)->provider_notes()) noted = noted || Contains(n, "ref: 1 option(s)");
  EXPECT_TRUE(noted) << "the session should say the provider got its option";

  SessionOptions cpu;
  cpu.threads = 1;
  auto c = Session::CreateFromFile(kDigits, cpu);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::string in = (*c)->inputs().at(0).name;
  auto got = (*s)->Run({{in, Image(0.05f)}});
  auto want = (*c)->Run({{in, Image(0.05f)}});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  const Tensor& g = got->at(0).tensor();
  const Tensor& w = want->at(0).tensor();
  ASSERT_EQ(g.shape(), w.shape());
  for (int64_t i = 0; i < g.num_elements(); ++i) EXPECT_NEAR(g.data<float>()[i], w.data<float>()[i], 1e-4f) << i;
}

TEST_F(ProviderOptions, AValueTheProviderCannotHonourFailsCreationNamingIt) {
  auto s = Session::CreateFromFile(kDigits, Options({{"ref.precision", "fp16"}}));
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.status().message(), "ref.precision")) << s.status().ToString();
  EXPECT_TRUE(Contains(s.status().message(), "fp16")) << s.status().ToString();
}

TEST_F(ProviderOptions, AnUnknownKeyFailsCreationNamingIt) {
  auto s = Session::CreateFromFile(kDigits, Options({{"ref.tile_size", "64"}}));
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.status().message(), "unknown option ref.tile_size")) << s.status().ToString();
}

TEST_F(ProviderOptions, AnOptionForAProviderTheSessionDoesNotUseIsRefused) {
  SessionOptions o = Options({{"cuda.precision", "fp16"}});
  auto s = Session::CreateFromFile(kDigits, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.status().message(), "'cuda.precision' is for provider 'cuda'")) << s.status().ToString();

  // A CPU-only session refuses it too: the option would otherwise be ignored silently.
  SessionOptions cpu;
  cpu.provider_options = {{"cuda.precision", "fp16"}};
  auto c = Session::CreateFromFile(kDigits, cpu);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(Contains(c.status().message(), "does not use")) << c.status().ToString();
}

TEST_F(ProviderOptions, UnderAutoAnOptionForAnUnpickedProviderIsReportedNotFatal) {
  SessionOptions o;
  o.threads = 1;
  o.providers = {"auto"};
  o.provider_paths = {kRefLib};
  o.provider_manager = &pm_;
  o.provider_options = {{"nosuchaccel.precision", "fp16"}};
  auto s = Session::CreateFromFile(kDigits, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  bool noted = false;
  for (const auto& n : (*s)->provider_notes()) noted = noted || Contains(n, "nosuchaccel.precision=fp16 not applied");
  EXPECT_TRUE(noted);
}

TEST(ProviderOptionNames, MalformedNamesAreRefused) {
  std::string p, k;
  EXPECT_TRUE(SplitProviderOption("cuda.precision", &p, &k).ok());
  EXPECT_EQ(p, "cuda");
  EXPECT_EQ(k, "precision");
  for (const char* bad : {".precision", "cuda.", "Cuda.precision", "cu-da.x", "nodot"}) {
    Status st = SplitProviderOption(bad, &p, &k);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_TRUE(Contains(st.message(), bad)) << st.ToString();
  }
}

TEST(ProviderOptionNames, CApiAcceptsProviderKeysAndRejectsMalformedOnes) {
  strata_session_options* o = nullptr;
  ASSERT_EQ(strata_session_options_create(&o), nullptr);
  EXPECT_EQ(strata_session_options_set(o, "cuda.precision", "fp16"), nullptr);
  EXPECT_EQ(strata_session_options_set(o, "cuda.precision", "fp32"), nullptr);  // replaces
  strata_status* st = strata_session_options_set(o, "Cuda.precision", "fp16");
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(strata_status_get_code(st), STRATA_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(strata_status_get_message(st), "Cuda.precision")) << strata_status_get_message(st);
  strata_status_release(st);
  strata_session_options_destroy(o);
}

TEST(ProviderOptionNames, AMalformedOptionsAttributeOnAPartitionNodeIsAnError) {
  plugin::ProviderManager pm;
  ASSERT_TRUE(pm.Discover({kRefLib}).ok());
  Graph g;
  Node part;
  part.name = "p0";
  part.domain = plugin::kPartitionDomain;
  part.op_type = plugin::kPartitionOp;
  part.provider = "ref";
  auto body = std::make_shared<Graph>();
  Attribute ab;
  ab.type = Attribute::Type::kGraph;
  ab.g = body;
  part.attrs["body"] = ab;
  Attribute ap;
  ap.type = Attribute::Type::kString;
  ap.s = "ref";
  part.attrs["provider"] = ap;
  Attribute ao;
  ao.type = Attribute::Type::kStrings;
  ao.strings = {"precision"};  // no '='
  part.attrs["options"] = ao;
  KernelInit init{part, g, nullptr, {}};
  auto k = plugin::CreateProviderPartitionKernel(init, pm);
  ASSERT_FALSE(k.ok());
  EXPECT_TRUE(Contains(k.status().message(), "not of the form key=value")) << k.status().ToString();
}

}  // namespace
}  // namespace strata
