// Provider dimension of the kernel harness: runs one node through an accelerator
// provider plugin (partitioned and compiled exactly as a session would) and compares it
// with strata's CPU reference kernel. The same cases run on every provider: the "ref"
// test provider (always built), "vulkan" (lavapipe in CI) and "cuda" (a real GPU only).
//
//   const auto& p = LoadProviderForTest("cuda");
//   if (!p.skip.empty()) GTEST_SKIP() << p.skip;
//   EXPECT_TRUE(ProviderMatchesReference("cuda", spec, inputs, 1e-4, 1e-5));
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernel_harness.h"
#include "plugin/provider_manager.h"

namespace strata::testing {

struct ProviderUnderTest {
  std::shared_ptr<plugin::LoadedProvider> provider;  // null when unusable here
  std::string skip;                                  // why it is unusable ("" when usable)
};

// Loads the provider once per process from the build tree. Never fails: an unusable
// provider (not built, no device, missing driver) comes back with `skip` set to its
// load-report line.
const ProviderUnderTest& LoadProviderForTest(const std::string& name);

// Runs the node on the provider. kUnsupported when the provider declines the node (the
// capability query answered no), so callers can tell "declined" from "wrong".
Result<std::vector<Tensor>> RunOnProvider(const std::string& provider, const OpSpec& spec,
                                          const std::vector<Tensor>& inputs, const RunOptions& opts = {});

// Provider output vs the CPU reference kernel, output by output (TensorsNear).
::testing::AssertionResult ProviderMatchesReference(const std::string& provider, const OpSpec& spec,
                                                    const std::vector<Tensor>& inputs, double rtol, double atol,
                                                    const RunOptions& opts = {});

}  // namespace strata::testing
