// End-to-end: torch-exported models (resnet18, mobilenet_v2, a transformer encoder,
// an LSTM, an MLP) run in strata and match torch's outputs; the optimizer and the
// reference kernels agree with the optimized path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/npy.h"
#include "core/session.h"

namespace strata {
namespace {

const std::string kDir = std::string(STRATA_BINARY_DIR) + "/test_models";

class Models : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string cmd = "/usr/bin/python3 " + std::string(STRATA_SOURCE_DIR) + "/tests/models/make_test_models.py " + kDir;
    generated_ = std::system(cmd.c_str()) == 0;
    if (!generated_) return;
    std::ifstream f(kDir + "/manifest.json");
    manifest_ = nlohmann::json::parse(f, nullptr, false);
  }
  const nlohmann::json* Entry(const std::string& name) {
    if (!manifest_.is_object()) return nullptr;
    for (const auto& e : manifest_["models"])
      if (e["name"] == name) return &e;
    return nullptr;
  }
  // Runs a model with its saved inputs; returns its first output.
  Result<Tensor> RunModel(const nlohmann::json& e, SessionOptions so) {
    ASSIGN_OR_RETURN(auto s, Session::CreateFromFile(kDir + "/" + e["model"].get<std::string>(), so));
    std::vector<std::pair<std::string, Value>> feeds;
    for (const auto& in : e["inputs"]) {
      ASSIGN_OR_RETURN(Tensor t, ReadNpy(kDir + "/" + in["file"].get<std::string>()));
      feeds.emplace_back(in["name"].get<std::string>(), Value(t));
    }
    ASSIGN_OR_RETURN(auto outs, s->Run(feeds));
    return outs[0].tensor();
  }
  // max |a-b| relative to the output's scale (max |b|): near-zero elements of a large
  // output would make an element-wise ratio meaningless.
  static double MaxRelErr(const Tensor& a, const Tensor& b) {
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < b.num_elements(); ++i) {
      scale = std::max(scale, std::fabs((double)b.data<float>()[i]));
      worst = std::max(worst, std::fabs((double)a.data<float>()[i] - (double)b.data<float>()[i]));
    }
    return worst / std::max(scale, 1e-30);
  }
  void CheckAgainstTorch(const std::string& name) {
    ASSERT_TRUE(generated_) << "tests/models/make_test_models.py failed (python3-torch installed?)";
    const nlohmann::json* e = Entry(name);
    ASSERT_NE(e, nullptr) << name << " missing from the manifest";
    SessionOptions so;
    so.threads = 2;
    auto got = RunModel(*e, so);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    auto want = ReadNpy(kDir + "/" + (*e)["outputs"][0]["file"].get<std::string>());
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ASSERT_EQ(got->shape(), want->shape());
    double err = MaxRelErr(*got, *want);
    EXPECT_LE(err, 1e-4) << name << ": max relative error vs torch " << err;
    std::printf("%s: max |strata - torch| / max |torch| = %.3g\n", name.c_str(), err);
    // Optimized graph vs unoptimized graph.
    so.optimization_level = 0;
    auto plain = RunModel(*e, so);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    EXPECT_LE(MaxRelErr(*got, *plain), 1e-4) << name << ": optimized vs unoptimized";
  }
  static bool generated_;
  static nlohmann::json manifest_;
};
bool Models::generated_ = false;
nlohmann::json Models::manifest_;

TEST_F(Models, Resnet18MatchesTorch) { CheckAgainstTorch("resnet18"); }
TEST_F(Models, MobilenetV2MatchesTorch) { CheckAgainstTorch("mobilenet_v2"); }
TEST_F(Models, TransformerEncoderMatchesTorch) { CheckAgainstTorch("bert"); }
TEST_F(Models, LstmMatchesTorch) { CheckAgainstTorch("lstm"); }
TEST_F(Models, MlpMatchesTorch) { CheckAgainstTorch("mlp"); }

TEST_F(Models, ReferenceKernelsAgreeWithOptimized) {
  ASSERT_TRUE(generated_);
  for (const char* name : {"mlp", "lstm", "bert"}) {
    const nlohmann::json* e = Entry(name);
    ASSERT_NE(e, nullptr);
    SessionOptions fast, ref;
    ref.kernel.prefer_reference = true;
    auto a = RunModel(*e, fast);
    auto b = RunModel(*e, ref);
    ASSERT_TRUE(a.ok() && b.ok()) << name;
    EXPECT_LE(MaxRelErr(*a, *b), 1e-4) << name;
  }
}

}  // namespace
}  // namespace strata
