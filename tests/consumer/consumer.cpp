// C++ consumer (strata.hpp): loads digits.onnx, classifies the bundled samples, prints one
// line per sample and exits 0 when every prediction equals its label.
// usage: strata_consumer_cpp EXAMPLES_DIR   (<prefix>/share/strata/examples)
#include <cstdio>
#include <string>

#include "npy_min.h"
#include "strata/strata.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s EXAMPLES_DIR\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  npy_array samples, labels;
  if (npy_load((dir + "/digits_samples.npy").c_str(), &samples) ||
      npy_load((dir + "/digits_labels.npy").c_str(), &labels))
    return 1;
  int wrong = 0;
  try {
    std::printf("strata %s, C++ consumer\n", strata_version());
    strata::Env env;
    strata::SessionOptions opts;
    opts.SetThreads(1);
    strata::Session session(env, dir + "/digits.onnx", &opts);
    auto input =
        strata::Tensor::Wrap(STRATA_DTYPE_FLOAT32, std::vector<int64_t>(samples.dims, samples.dims + samples.rank),
                             static_cast<float*>(samples.data), samples.count);
    auto outputs = session.Run({{session.Inputs()[0].name, &input}});
    auto shape = outputs[0].shape();
    const float* scores = outputs[0].data<float>();
    for (int64_t i = 0; i < shape[0]; ++i) {
      int64_t best = 0;
      for (int64_t c = 1; c < shape[1]; ++c)
        if (scores[i * shape[1] + c] > scores[i * shape[1] + best]) best = c;
      int64_t want = static_cast<const int64_t*>(labels.data)[i];
      std::printf("sample %lld: predicted %lld, label %lld%s\n", (long long)i, (long long)best, (long long)want,
                  best == want ? "" : "  WRONG");
      wrong += best != want;
    }
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "strata error (%s): %s\n", strata_status_code_name(e.code()), e.what());
    wrong = -1;
  }
  std::free(samples.data);
  std::free(labels.data);
  std::printf("%s\n", wrong ? "FAIL" : "OK");
  return wrong ? 1 : 0;
}
