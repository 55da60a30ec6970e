// The C API and the C++ wrapper, end to end on the bundled digits example.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "strata/strata.h"
#include "strata/strata.hpp"

namespace {

const std::string kModel = std::string(STRATA_SOURCE_DIR) + "/examples/digits.onnx";
const std::string kSamples = std::string(STRATA_SOURCE_DIR) + "/examples/digits_samples.npy";
const std::string kLabels = std::string(STRATA_SOURCE_DIR) + "/examples/digits_labels.npy";

// A minimal .npy (v1, C order) reader: this file only sees the public headers, as an
// application would (the internal strata::Tensor would clash with the wrapper's).
struct Npy {
  std::vector<int64_t> shape;
  std::vector<char> data;
  bool ok = false;
  int64_t dim(size_t i) const { return shape[i]; }
};
Npy LoadNpy(const std::string& path) {
  Npy r;
  std::ifstream f(path, std::ios::binary);
  std::vector<char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0) return r;
  size_t hlen = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
  std::string h(b.begin() + 10, b.begin() + 10 + hlen);
  size_t p = h.find("'shape': (") + 10, e = h.find(')', p);
  std::string dims = h.substr(p, e - p);
  size_t pos = 0;
  while (pos < dims.size()) {
    size_t c = dims.find(',', pos);
    std::string d = dims.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
    if (d.find_first_not_of(' ') != std::string::npos) r.shape.push_back(std::stoll(d));
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  r.data.assign(b.begin() + 10 + hlen, b.end());
  r.ok = true;
  return r;
}

std::string Message(strata_status* st) {
  std::string m = strata_status_get_message(st);
  strata_status_release(st);
  return m;
}

TEST(CApi, VersionAndCodes) {
  EXPECT_STREQ(strata_version(), STRATA_VERSION_STRING);
  EXPECT_EQ(strata_api_version(), STRATA_API_VERSION);
  EXPECT_STREQ(strata_status_code_name(STRATA_INVALID_MODEL), "INVALID_MODEL");
  EXPECT_EQ(strata_status_get_code(nullptr), STRATA_OK);
  EXPECT_STREQ(strata_status_get_message(nullptr), "");
  EXPECT_EQ(strata_dtype_size(STRATA_DTYPE_FLOAT16), 2u);
  EXPECT_STREQ(strata_dtype_name(STRATA_DTYPE_INT64), "int64");
}

TEST(CApi, RunsDigitsAndClassifiesSamples) {
  strata_env* env = nullptr;
  ASSERT_EQ(strata_env_create(&env), nullptr);
  strata_session_options* opts = nullptr;
  ASSERT_EQ(strata_session_options_create(&opts), nullptr);
  ASSERT_EQ(strata_session_options_set_threads(opts, 1), nullptr);
  strata_session* s = nullptr;
  ASSERT_EQ(strata_session_create(env, kModel.c_str(), opts, &s), nullptr);
  ASSERT_EQ(strata_session_input_count(s), 1u);
  const char* name = nullptr;
  strata_dtype dt;
  size_t rank = 0;
  int64_t dims[8];
  ASSERT_EQ(strata_session_input_info(s, 0, &name, &dt, &rank, dims, 8), nullptr);
  EXPECT_STREQ(name, "image");
  EXPECT_EQ(dt, STRATA_DTYPE_FLOAT32);
  EXPECT_EQ(rank, 4u);
  EXPECT_EQ(dims[0], -1);  // dynamic batch
  EXPECT_STREQ(strata_session_input_dim_name(s, 0, 0), "batch");

  Npy samples = LoadNpy(kSamples), labels = LoadNpy(kLabels);
  ASSERT_TRUE(samples.ok && labels.ok);
  strata_tensor* in = nullptr;
  ASSERT_EQ(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, samples.shape.data(), samples.shape.size(), samples.data.data(),
                               samples.data.size(), &in),
            nullptr);
  const char* in_names[] = {"image"};
  const strata_tensor* ins[] = {in};
  strata_tensor* out = nullptr;
  ASSERT_EQ(strata_session_run(s, in_names, ins, 1, nullptr, &out, 1), nullptr);
  ASSERT_EQ(strata_tensor_rank(out), 2u);
  int64_t n = strata_tensor_dims(out)[0], c = strata_tensor_dims(out)[1];
  EXPECT_EQ(n, samples.dim(0));
  EXPECT_EQ(c, 10);
  const float* p = static_cast<const float*>(strata_tensor_data(out));
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    float sum = 0;
    for (int64_t j = 0; j < c; ++j) {
      sum += p[i * c + j];
      if (p[i * c + j] > p[i * c + best]) best = j;
    }
    EXPECT_NEAR(sum, 1.0f, 1e-4f);
    EXPECT_EQ(best, reinterpret_cast<const int64_t*>(labels.data.data())[i]) << "sample " << i;
  }
  EXPECT_GT(strata_session_node_count(s), 0u);
  const char *node = nullptr, *op = nullptr, *prov = nullptr;
  ASSERT_EQ(strata_session_node_info(s, 0, &node, &op, &prov), nullptr);
  EXPECT_STREQ(prov, "cpu");
  strata_tensor_destroy(out);
  strata_tensor_destroy(in);
  strata_session_destroy(s);
  strata_session_options_destroy(opts);
  strata_env_destroy(env);
}

TEST(CApi, BadInputsGetClearErrors) {
  strata_env* env = nullptr;
  ASSERT_EQ(strata_env_create(&env), nullptr);
  strata_session* s = nullptr;
  // A missing file.
  strata_status* st = strata_session_create(env, "/nonexistent/model.onnx", nullptr, &s);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(strata_status_get_code(st), STRATA_NOT_FOUND) << strata_status_get_message(st);
  EXPECT_NE(Message(st).find("/nonexistent/model.onnx"), std::string::npos);
  EXPECT_EQ(s, nullptr);
  // Bytes that are not a model.
  const char junk[] = "this is not an onnx model";
  st = strata_session_create_from_memory(env, junk, sizeof(junk), nullptr, &s);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(strata_status_get_code(st), STRATA_INVALID_MODEL) << strata_status_get_message(st);
  strata_status_release(st);
  // Unknown option, bad threads, bad providers.
  strata_session_options* o = nullptr;
  ASSERT_EQ(strata_session_options_create(&o), nullptr);
  st = strata_session_options_set(o, "no_such_option", "1");
  ASSERT_NE(st, nullptr);
  EXPECT_NE(Message(st).find("no_such_option"), std::string::npos);
  st = strata_session_options_set_threads(o, -3);
  ASSERT_NE(st, nullptr);
  strata_status_release(st);
  st = strata_session_options_set(o, "precision", "fp8");
  ASSERT_NE(st, nullptr);
  EXPECT_NE(Message(st).find("fp8"), std::string::npos);
  // A requested provider that does not exist fails loudly, never falls back.
  ASSERT_EQ(strata_session_options_set_providers(o, "nosuchaccel"), nullptr);
  st = strata_session_create(env, kModel.c_str(), o, &s);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(strata_status_get_code(st), STRATA_NOT_FOUND) << strata_status_get_message(st);
  EXPECT_NE(Message(st).find("nosuchaccel"), std::string::npos);
  strata_session_options_destroy(o);

  ASSERT_EQ(strata_session_create(env, kModel.c_str(), nullptr, &s), nullptr);
  // Wrong dtype, wrong shape, unknown input name, missing input.
  int64_t dims[] = {1, 1, 8, 8};
  strata_tensor* i64 = nullptr;
  ASSERT_EQ(strata_tensor_create(STRATA_DTYPE_INT64, dims, 4, &i64), nullptr);
  const char* names[] = {"image"};
  const strata_tensor* ins[] = {i64};
  strata_tensor* out = nullptr;
  st = strata_session_run(s, names, ins, 1, nullptr, &out, 1);
  ASSERT_NE(st, nullptr);
  std::string m = Message(st);
  EXPECT_NE(m.find("'image'"), std::string::npos) << m;
  EXPECT_NE(m.find("int64"), std::string::npos) << m;
  int64_t bad_dims[] = {1, 1, 9, 8};
  strata_tensor* wrong_shape = nullptr;
  ASSERT_EQ(strata_tensor_create(STRATA_DTYPE_FLOAT32, bad_dims, 4, &wrong_shape), nullptr);
  ins[0] = wrong_shape;
  st = strata_session_run(s, names, ins, 1, nullptr, &out, 1);
  ASSERT_NE(st, nullptr);
  m = Message(st);
  EXPECT_NE(m.find("[1,1,9,8]"), std::string::npos) << m;
  const char* bogus[] = {"pixels"};
  st = strata_session_run(s, bogus, ins, 1, nullptr, &out, 1);
  ASSERT_NE(st, nullptr);
  EXPECT_NE(Message(st).find("'pixels' is not an input"), std::string::npos);
  st = strata_session_run(s, nullptr, nullptr, 0, nullptr, &out, 1);
  ASSERT_NE(st, nullptr);
  m = Message(st);
  EXPECT_NE(m.find("missing input 'image'"), std::string::npos) << m;
  EXPECT_NE(m.find("float32[batch,1,8,8]"), std::string::npos) << m;
  // Wrapping memory whose size does not match the shape.
  float buf[10];
  strata_tensor* w = nullptr;
  st = strata_tensor_wrap(STRATA_DTYPE_FLOAT32, dims, 4, buf, sizeof(buf), &w);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(w, nullptr);
  strata_status_release(st);
  // Overflowing dims.
  int64_t huge[] = {int64_t{1} << 40, int64_t{1} << 40};
  st = strata_tensor_create(STRATA_DTYPE_FLOAT32, huge, 2, &w);
  ASSERT_NE(st, nullptr);
  strata_status_release(st);
  strata_tensor_destroy(i64);
  strata_tensor_destroy(wrong_shape);
  strata_session_destroy(s);
  strata_env_destroy(env);
}

TEST(CApi, CapabilityQueriesNeverFail) {
  strata_env* env = nullptr;
  ASSERT_EQ(strata_env_create(&env), nullptr);
  EXPECT_EQ(strata_has_capability(env, "no.such.capability"), 0);
  EXPECT_EQ(strata_has_capability(env, ""), 0);
  EXPECT_EQ(strata_has_capability(nullptr, "cpu.avx2"), strata_has_capability(env, "cpu.avx2"));
  int prepack = strata_has_capability(env, "cuda.weight_prepack");
  EXPECT_TRUE(prepack == 0 || prepack == 1);
  strata_env_destroy(env);
}

TEST(CppWrapper, RaiiSessionRunsAndThrowsTypedErrors) {
  strata::Env env;
  strata::SessionOptions opts;
  opts.SetThreads(2).SetOptimizationLevel(99);
  strata::Session session(env, kModel, &opts);
  auto inputs = session.Inputs();
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(inputs[0].name, "image");
  auto x = strata::Tensor::Create(STRATA_DTYPE_FLOAT32, {2, 1, 8, 8});
  auto outs = session.Run({{"image", &x}});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].shape(), (std::vector<int64_t>{2, 10}));
  try {
    strata::Session bad(env, std::string("/nonexistent.onnx"));
    FAIL() << "expected an error";
  } catch (const strata::Error& e) {
    EXPECT_EQ(e.code(), STRATA_NOT_FOUND);
  }
  // The same model from memory.
  std::ifstream f(kModel, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  strata::Session mem(env, bytes.data(), bytes.size());
  EXPECT_EQ(mem.Outputs()[0].name, "probabilities");
}

TEST(CApi, ConcurrentRunsOnOneSessionAgree) {
  strata::Env env;
  strata::SessionOptions opts;
  opts.SetThreads(2);
  strata::Session session(env, kModel, &opts);
  Npy samples = LoadNpy(kSamples);
  ASSERT_TRUE(samples.ok);
  std::vector<float> data(samples.data.size() / sizeof(float));
  std::memcpy(data.data(), samples.data.data(), samples.data.size());
  auto x = strata::Tensor::Wrap(STRATA_DTYPE_FLOAT32, samples.shape, data.data(), data.size());
  auto ref = session.Run({{"image", &x}});
  std::vector<float> expected(ref[0].data<float>(), ref[0].data<float>() + ref[0].size());
  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int it = 0; it < 20; ++it) {
        auto o = session.Run({{"image", &x}});
        for (int64_t i = 0; i < o[0].size(); ++i)
          if (o[0].data<float>()[i] != expected[i]) ++mismatches[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

const std::string kEndless = std::string(STRATA_SOURCE_DIR) + "/tests/data/run_control/endless_loop.onnx";

// How a run on another thread ended: the code and message of the strata::Error it threw.
struct Ended {
  strata_status_code code = STRATA_OK;
  std::string message;
};

// Runs `run` on another thread and calls `stop` every 5 ms until it returns (a terminate
// call made before the run began does not end it).
Ended RunUntilStopped(const std::function<void()>& run, const std::function<void()>& stop) {
  Ended ended;
  std::atomic<bool> done{false};
  std::thread runner([&] {
    try {
      run();
    } catch (const strata::Error& e) {
      ended.code = e.code();
      ended.message = e.what();
    }
    done = true;
  });
  while (!done) {
    stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  runner.join();
  return ended;
}

// Each value in `bad` is refused by set(value) with INVALID_ARGUMENT naming `key`.
template <typename Set>
void ExpectRefused(Set set, const char* key, std::initializer_list<const char*> bad) {
  for (const char* v : bad) {
    strata_status* st = set(v);
    ASSERT_NE(st, nullptr) << v;
    EXPECT_EQ(strata_status_get_code(st), STRATA_INVALID_ARGUMENT) << v;
    EXPECT_NE(Message(st).find(key), std::string::npos) << v;
  }
}

// run_timeout_ms and strata_session_terminate_runs end a run of a Loop of INT64_MAX
// iterations with STRATA_CANCELLED; bad option values are refused by name.
TEST(CApi, RunDeadlineAndTerminate) {
  strata_session_options* o = nullptr;
  ASSERT_EQ(strata_session_options_create(&o), nullptr);
  ExpectRefused([&](const char* v) { return strata_session_options_set(o, "run_timeout_ms", v); }, "run_timeout_ms",
                {"-1", "abc", "", " 5", "+5", "1e3", "1000000000001", "99999999999999999999999"});
  strata_status* neg_cap = strata_session_options_set(o, "memory_cap_bytes", "-1");
  ASSERT_NE(neg_cap, nullptr);
  EXPECT_NE(Message(neg_cap).find("memory_cap_bytes"), std::string::npos);
  ASSERT_EQ(strata_session_options_set(o, "run_timeout_ms", "40"), nullptr);
  strata_session* s = nullptr;
  ASSERT_EQ(strata_session_create(nullptr, kEndless.c_str(), o, &s), nullptr);
  strata_session_options_destroy(o);
  float one = 1.0f;
  int64_t dims[1] = {1};
  strata_tensor* x = nullptr;
  ASSERT_EQ(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, dims, 1, &one, sizeof(one), &x), nullptr);
  const char* names[1] = {"x"};
  const strata_tensor* ins[1] = {x};
  strata_tensor* out = nullptr;
  strata_status* st = strata_session_run(s, names, ins, 1, nullptr, &out, 1);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(strata_status_get_code(st), STRATA_CANCELLED);
  EXPECT_STREQ(strata_status_code_name(strata_status_get_code(st)), "CANCELLED");
  EXPECT_NE(Message(st).find("deadline of 40 ms"), std::string::npos);
  EXPECT_EQ(out, nullptr);
  strata_session_terminate_runs(nullptr);  // ignored
  strata_tensor_destroy(x);
  strata_session_destroy(s);

  // No deadline: the C++ wrapper's TerminateRuns, called from this thread, ends the run on another.
  strata::Env env;
  strata::Session session(env, kEndless);
  auto t = strata::Tensor::Create(STRATA_DTYPE_FLOAT32, {1});
  const Ended ended = RunUntilStopped([&] { session.Run({{"x", &t}}); }, [&] { session.TerminateRuns(); });
  EXPECT_EQ(ended.code, STRATA_CANCELLED) << ended.message;
}

// Per-run options: a deadline of the run's own, and a terminate that ends only the runs
// given them; also through io bindings and the C++ wrapper.
TEST(CApi, RunOptions) {
  strata_status* null_out = strata_run_options_create(nullptr);
  ASSERT_NE(null_out, nullptr);
  EXPECT_NE(Message(null_out).find("out is NULL"), std::string::npos);
  strata_run_options_destroy(nullptr);    // accepted
  strata_run_options_terminate(nullptr);  // ignored
  strata_run_options* ro = nullptr;
  ASSERT_EQ(strata_run_options_create(&ro), nullptr);
  ASSERT_NE(ro, nullptr);
  ExpectRefused([&](const char* v) { return strata_run_options_set(ro, "timeout_ms", v); }, "timeout_ms",
                {"-1", "abc", "", "1000000000001"});
  strata_status* unknown = strata_run_options_set(ro, "log_tag", "x");
  ASSERT_NE(unknown, nullptr);
  EXPECT_NE(Message(unknown).find("unknown run option 'log_tag'"), std::string::npos);
  strata_status* null_value = strata_run_options_set(ro, "timeout_ms", nullptr);
  ASSERT_NE(null_value, nullptr);
  EXPECT_EQ(strata_status_get_code(null_value), STRATA_INVALID_ARGUMENT);
  strata_status_release(null_value);
  ASSERT_EQ(strata_run_options_set(ro, "timeout_ms", "40"), nullptr);

  strata_session* s = nullptr;
  ASSERT_EQ(strata_session_create(nullptr, kEndless.c_str(), nullptr, &s), nullptr);  // no session deadline
  float one = 1.0f;
  int64_t dims[1] = {1};
  strata_tensor* x = nullptr;
  ASSERT_EQ(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, dims, 1, &one, sizeof(one), &x), nullptr);
  const char* names[1] = {"x"};
  const strata_tensor* ins[1] = {x};
  strata_tensor* out = nullptr;
  strata_status* st = strata_session_run_with_options(s, ro, names, ins, 1, nullptr, &out, 1);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(strata_status_get_code(st), STRATA_CANCELLED);
  EXPECT_NE(Message(st).find("deadline of 40 ms (run option timeout_ms)"), std::string::npos);
  EXPECT_EQ(out, nullptr);
  strata_io_binding* b = nullptr;
  ASSERT_EQ(strata_io_binding_create(s, &b), nullptr);
  ASSERT_EQ(strata_io_binding_bind_input(b, "x", x), nullptr);
  strata_status* bst = strata_session_run_binding_with_options(s, b, ro);
  ASSERT_NE(bst, nullptr);
  EXPECT_EQ(strata_status_get_code(bst), STRATA_CANCELLED);
  EXPECT_NE(Message(bst).find("run option timeout_ms"), std::string::npos);
  strata_io_binding_destroy(b);
  strata_tensor_destroy(x);
  strata_session_destroy(s);
  strata_run_options_destroy(ro);

  // The C++ wrapper: Terminate on one RunOptions ends the run given it, from another thread.
  strata::Env env;
  strata::Session session(env, kEndless);
  auto t = strata::Tensor::Create(STRATA_DTYPE_FLOAT32, {1});
  strata::RunOptions run;
  const Ended ended = RunUntilStopped([&] { session.Run({{"x", &t}}, &run); }, [&] { run.Terminate(); });
  EXPECT_EQ(ended.code, STRATA_CANCELLED) << ended.message;
  EXPECT_NE(ended.message.find("strata_run_options_terminate"), std::string::npos) << ended.message;
  EXPECT_THROW(strata::RunOptions().Set("timeout_ms", "-3"), strata::Error);
}

}  // namespace

namespace {

const std::string kStrings = std::string(STRATA_SOURCE_DIR) + "/tests/data/capi/strings.onnx";
const std::string kAliases = std::string(STRATA_SOURCE_DIR) + "/tests/data/capi/aliases.onnx";

struct Owned {
  strata_env* env = nullptr;
  strata_session* session = nullptr;
  ~Owned() {
    strata_session_destroy(session);
    strata_env_destroy(env);
  }
};

// Creates o's env and a session of `model` (default options).
::testing::AssertionResult Open(const std::string& model, Owned* o) {
  if (strata_status* st = strata_env_create(&o->env)) return ::testing::AssertionFailure() << Message(st);
  if (strata_status* st = strata_session_create(o->env, model.c_str(), nullptr, &o->session))
    return ::testing::AssertionFailure() << model << ": " << Message(st);
  return ::testing::AssertionSuccess();
}

// The ONNX type string of input or output `index` ("" on error).
std::string IoType(const strata_session* s, bool output, size_t index) {
  const char* type = nullptr;
  strata_status* st = (output ? strata_session_output_type : strata_session_input_type)(s, index, &type);
  if (st) {
    strata_status_release(st);
    return "";
  }
  return type;
}

}  // namespace

TEST(CApi, StringTensorsFeedAndReturnBytes) {
  const int64_t dims[1] = {3};
  strata_tensor* text = nullptr;
  ASSERT_EQ(strata_tensor_create(STRATA_DTYPE_STRING, dims, 1, &text), nullptr);
  const std::string with_nul("a\0b", 3);
  ASSERT_EQ(strata_tensor_set_string(text, 0, "hello", 5), nullptr);
  ASSERT_EQ(strata_tensor_set_string(text, 1, with_nul.data(), with_nul.size()), nullptr);
  ASSERT_EQ(strata_tensor_set_string(text, 2, nullptr, 0), nullptr);
  const char* data = nullptr;
  size_t size = 0;
  ASSERT_EQ(strata_tensor_get_string(text, 1, &data, &size), nullptr);
  EXPECT_EQ(std::string(data, size), with_nul);

  Owned o;
  ASSERT_TRUE(Open(kStrings, &o));
  const char* in_names[1] = {"text"};
  const strata_tensor* ins[1] = {text};
  strata_tensor* outs[2] = {nullptr, nullptr};
  ASSERT_EQ(strata_session_run(o.session, in_names, ins, 1, nullptr, outs, 2), nullptr);
  strata_tensor_destroy(text);  // the outputs own their strings
  const std::vector<std::string> same = {"hello", with_nul, ""};
  const std::vector<std::string> upper = {"HELLO", std::string("A\0B", 3), ""};
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(strata_tensor_get_string(outs[0], i, &data, &size), nullptr);
    EXPECT_EQ(std::string(data, size), same[i]) << i;
    ASSERT_EQ(strata_tensor_get_string(outs[1], i, &data, &size), nullptr);
    EXPECT_EQ(std::string(data, size), upper[i]) << i;
  }
  // Misuse is refused with a message naming the problem.
  strata_status* st = strata_tensor_get_string(outs[0], 3, &data, &size);
  EXPECT_EQ(strata_status_get_code(st), STRATA_INVALID_ARGUMENT);
  EXPECT_NE(Message(st).find("string index 3 is out of range (the tensor has 3 elements)"), std::string::npos);
  st = strata_tensor_set_string(outs[0], 0, nullptr, 2);
  EXPECT_NE(Message(st).find("data is NULL"), std::string::npos);
  EXPECT_NE(Message(strata_tensor_get_string(outs[0], 0, nullptr, &size)).find("NULL"), std::string::npos);
  strata_tensor* f = nullptr;
  ASSERT_EQ(strata_tensor_create(STRATA_DTYPE_FLOAT32, dims, 1, &f), nullptr);
  EXPECT_NE(Message(strata_tensor_set_string(f, 0, "x", 1)).find("the tensor is float32, not string"),
            std::string::npos);
  EXPECT_NE(Message(strata_tensor_get_string(f, 0, &data, &size)).find("not string"), std::string::npos);
  EXPECT_NE(Message(strata_tensor_set_string(nullptr, 0, "x", 1)).find("tensor is NULL"), std::string::npos);
  strata_tensor_destroy(f);
  strata_tensor_destroy(outs[0]);
  strata_tensor_destroy(outs[1]);
}

TEST(CppWrapper, StringTensors) {
  strata::Env env;
  strata::Session session(env, kStrings);
  auto text = strata::Tensor::Strings({2}, {"grüße", std::string("x\0y", 3)});
  auto outs = session.Run({{"text", &text}});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].String(0), "grüße");
  EXPECT_EQ(outs[0].String(1), std::string("x\0y", 3));
  EXPECT_EQ(outs[1].String(1), std::string("X\0Y", 3));
  try {
    strata::Tensor::Strings({3}, {"a"});
    FAIL() << "expected an error";
  } catch (const strata::Error& e) {
    EXPECT_EQ(e.code(), STRATA_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("1 strings for a tensor of 3 elements"), std::string::npos);
  }
  EXPECT_THROW(outs[0].String(2), strata::Error);
}

// Every output belongs to the caller alone: writing into one changes no model constant, no
// input and no other output, and each stays valid after the inputs and the session are gone.
TEST(CApi, OutputsNeverAliasConstantsInputsOrEachOther) {
  Owned o;
  ASSERT_TRUE(Open(kAliases, &o));
  std::vector<float> x = {2.0f, -1.0f};
  const int64_t dims[1] = {2};
  strata_tensor* in = nullptr;
  ASSERT_EQ(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, dims, 1, x.data(), x.size() * sizeof(float), &in), nullptr);
  const char* in_names[1] = {"x"};
  const strata_tensor* ins[1] = {in};
  strata_tensor* outs[4] = {};
  ASSERT_EQ(strata_session_run(o.session, in_names, ins, 1, nullptr, outs, 4), nullptr);
  auto data = [](strata_tensor* t) { return static_cast<float*>(strata_tensor_data(t)); };
  EXPECT_NE(static_cast<void*>(data(outs[1])), static_cast<void*>(x.data()));
  EXPECT_NE(data(outs[2]), data(outs[3]));
  data(outs[0])[0] = 100.0f;  // the constant "weights"
  data(outs[1])[0] = 200.0f;  // the passthrough of x
  data(outs[2])[1] = 300.0f;  // relu; relu_again must not see it
  EXPECT_EQ(x[0], 2.0f);
  EXPECT_EQ(data(outs[3])[1], 0.0f);
  strata_tensor_destroy(in);
  x.assign({-7.0f, -7.0f});  // the caller reuses its memory; the passthrough output is a copy
  EXPECT_EQ(data(outs[1])[1], -1.0f);
  // A second run sees the model's constant unchanged.
  std::vector<float> x2 = {1.0f, 1.0f};
  ASSERT_EQ(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, dims, 1, x2.data(), x2.size() * sizeof(float), &in), nullptr);
  ins[0] = in;
  strata_tensor* again[4] = {};
  ASSERT_EQ(strata_session_run(o.session, in_names, ins, 1, nullptr, again, 4), nullptr);
  EXPECT_EQ(data(again[0])[0], 1.5f);
  EXPECT_EQ(data(again[0])[2], 3.5f);
  strata_tensor_destroy(in);
  strata_session_destroy(o.session);
  o.session = nullptr;
  EXPECT_EQ(data(outs[0])[1], -2.5f);  // outputs outlive the session
  EXPECT_EQ(data(again[1])[0], 1.0f);
  for (strata_tensor* t : outs) strata_tensor_destroy(t);
  for (strata_tensor* t : again) strata_tensor_destroy(t);
}

namespace {

const std::string kZipMap = std::string(STRATA_SOURCE_DIR) + "/tests/data/capi/zipmap.onnx";
const std::string kMaps = std::string(STRATA_SOURCE_DIR) + "/tests/data/capi/maps.onnx";
const std::string kSequences = std::string(STRATA_SOURCE_DIR) + "/tests/data/capi/sequences.onnx";

strata_tensor* Int64s(const std::vector<int64_t>& v) {
  const int64_t dims[1] = {static_cast<int64_t>(v.size())};
  strata_tensor* t = nullptr;
  EXPECT_EQ(strata_tensor_create(STRATA_DTYPE_INT64, dims, 1, &t), nullptr);
  if (t && !v.empty()) std::memcpy(strata_tensor_data(t), v.data(), v.size() * sizeof(int64_t));
  return t;
}
strata_tensor* Floats(const std::vector<float>& v) {
  const int64_t dims[1] = {static_cast<int64_t>(v.size())};
  strata_tensor* t = nullptr;
  EXPECT_EQ(strata_tensor_create(STRATA_DTYPE_FLOAT32, dims, 1, &t), nullptr);
  if (t && !v.empty()) std::memcpy(strata_tensor_data(t), v.data(), v.size() * sizeof(float));
  return t;
}
strata_tensor* Strings(const std::vector<std::string>& v) {
  const int64_t dims[1] = {static_cast<int64_t>(v.size())};
  strata_tensor* t = nullptr;
  EXPECT_EQ(strata_tensor_create(STRATA_DTYPE_STRING, dims, 1, &t), nullptr);
  for (size_t i = 0; t && i < v.size(); ++i)
    EXPECT_EQ(strata_tensor_set_string(t, i, v[i].data(), v[i].size()), nullptr);
  return t;
}
std::string StringAt(strata_tensor* t, size_t i) {
  const char* d = nullptr;
  size_t n = 0;
  EXPECT_EQ(strata_tensor_get_string(t, i, &d, &n), nullptr);
  return d ? std::string(d, n) : std::string();
}

}  // namespace

// A classifier exported as skl2onnx does it ends in ZipMap: one {label: probability} map per
// row. The maps hold exactly the probabilities tensor's values, keyed by the labels in order.
TEST(CApi, ZipMapOutputsAreSequencesOfMaps) {
  Owned o;
  ASSERT_TRUE(Open(kZipMap, &o));
  EXPECT_EQ(IoType(o.session, true, 2), "seq(map(int64,tensor(float)))");
  EXPECT_EQ(IoType(o.session, true, 3), "seq(map(string,tensor(float)))");
  EXPECT_EQ(IoType(o.session, false, 0), "tensor(float)");
  const char* type = nullptr;
  EXPECT_NE(Message(strata_session_output_type(o.session, 4, &type)).find("output index 4 is out of range"),
            std::string::npos);

  std::vector<float> x = {1, 2, -1, 0.5f, 0, 0};
  const int64_t dims[2] = {3, 2};
  strata_tensor* in = nullptr;
  ASSERT_EQ(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, dims, 2, x.data(), x.size() * sizeof(float), &in), nullptr);
  const char* in_names[1] = {"x"};
  const strata_tensor* ins[1] = {in};
  strata_tensor* outs[4] = {};
  ASSERT_EQ(strata_session_run(o.session, in_names, ins, 1, nullptr, outs, 4), nullptr);
  strata_tensor_destroy(in);
  const float* probs = static_cast<const float*>(strata_tensor_data(outs[1]));
  EXPECT_EQ(strata_value_kind_of(outs[1]), STRATA_VALUE_TENSOR);
  ASSERT_EQ(strata_value_kind_of(outs[2]), STRATA_VALUE_SEQUENCE);
  EXPECT_EQ(strata_value_elem_dtype(outs[2]), STRATA_DTYPE_FLOAT32);
  // Tensor accessors see a non-tensor as empty.
  EXPECT_EQ(strata_tensor_dtype(outs[2]), STRATA_DTYPE_UNDEFINED);
  EXPECT_EQ(strata_tensor_element_count(outs[2]), 0);
  EXPECT_EQ(strata_tensor_data(outs[2]), nullptr);
  size_t rows = 0;
  ASSERT_EQ(strata_value_sequence_length(outs[2], &rows), nullptr);
  ASSERT_EQ(rows, 3u);
  const std::vector<std::string> names = {"cat", "dog", "eel"};
  for (size_t r = 0; r < rows; ++r) {
    strata_tensor* m = nullptr;
    ASSERT_EQ(strata_value_sequence_item(outs[2], r, &m), nullptr);
    ASSERT_EQ(strata_value_kind_of(m), STRATA_VALUE_MAP);
    strata_tensor *keys = nullptr, *values = nullptr;
    ASSERT_EQ(strata_value_map_entries(m, &keys, &values), nullptr);
    ASSERT_EQ(strata_tensor_element_count(keys), 3);
    const int64_t* k = static_cast<const int64_t*>(strata_tensor_data(keys));
    const float* v = static_cast<const float*>(strata_tensor_data(values));
    EXPECT_EQ(k[0], 10);
    EXPECT_EQ(k[1], 20);
    EXPECT_EQ(k[2], 30);
    for (int c = 0; c < 3; ++c) EXPECT_EQ(v[c], probs[r * 3 + c]) << "row " << r << " class " << c;
    strata_tensor_destroy(keys);
    strata_tensor_destroy(values);
    strata_tensor_destroy(m);

    ASSERT_EQ(strata_value_sequence_item(outs[3], r, &m), nullptr);
    ASSERT_EQ(strata_value_map_entries(m, &keys, nullptr), nullptr);
    for (size_t c = 0; c < 3; ++c) EXPECT_EQ(StringAt(keys, c), names[c]);
    strata_tensor_destroy(keys);
    strata_tensor_destroy(m);
  }
  // The label is the most probable class (row 0: scores -0.9, 1.5, 2.8).
  EXPECT_EQ(static_cast<const int64_t*>(strata_tensor_data(outs[0]))[0], 30);
  // The maps are the caller's: writing into one row's keys changes no other row or run.
  strata_tensor *m0 = nullptr, *keys0 = nullptr;
  ASSERT_EQ(strata_value_sequence_item(outs[2], 0, &m0), nullptr);
  ASSERT_EQ(strata_value_map_entries(m0, &keys0, nullptr), nullptr);
  static_cast<int64_t*>(strata_tensor_data(keys0))[0] = -5;
  strata_tensor *m1 = nullptr, *keys1 = nullptr;
  ASSERT_EQ(strata_value_sequence_item(outs[2], 1, &m1), nullptr);
  ASSERT_EQ(strata_value_map_entries(m1, &keys1, nullptr), nullptr);
  EXPECT_EQ(static_cast<const int64_t*>(strata_tensor_data(keys1))[0], 10);
  for (strata_tensor* t : {m0, keys0, m1, keys1}) strata_tensor_destroy(t);
  // Misuse names the problem.
  strata_tensor* bad = nullptr;
  EXPECT_NE(Message(strata_value_sequence_item(outs[2], 3, &bad)).find("sequence item 3 is out of range"),
            std::string::npos);
  EXPECT_NE(Message(strata_value_sequence_length(outs[1], &rows)).find("not a sequence"), std::string::npos);
  EXPECT_NE(Message(strata_value_map_entries(outs[2], &bad, nullptr)).find("not a map"), std::string::npos);
  for (strata_tensor* t : outs) strata_tensor_destroy(t);
}

TEST(CApi, MapInputsFeedDictVectorizerAndCastMap) {
  Owned o;
  ASSERT_TRUE(Open(kMaps, &o));
  EXPECT_EQ(IoType(o.session, false, 0), "map(string,tensor(float))");
  strata_tensor* fk = Strings({"weight", "age", "shoe"});
  strata_tensor* fv = Floats({70.5f, 31, 44});
  strata_tensor *features = nullptr, *sparse = nullptr;
  ASSERT_EQ(strata_value_create_map(fk, fv, &features), nullptr);
  strata_tensor* sk = Int64s({3, 1, 7});
  strata_tensor* sv = Floats({3.5f, 1.5f, 7.5f});
  ASSERT_EQ(strata_value_create_map(sk, sv, &sparse), nullptr);
  EXPECT_EQ(strata_value_kind_of(features), STRATA_VALUE_MAP);
  const char* in_names[2] = {"features", "sparse"};
  const strata_tensor* ins[2] = {features, sparse};
  strata_tensor* outs[2] = {};
  ASSERT_EQ(strata_session_run(o.session, in_names, ins, 2, nullptr, outs, 2), nullptr);
  const float* row = static_cast<const float*>(strata_tensor_data(outs[0]));
  ASSERT_EQ(strata_tensor_element_count(outs[0]), 3);
  EXPECT_EQ(row[0], 31.0f);  // age
  EXPECT_EQ(row[1], 0.0f);   // height: absent
  EXPECT_EQ(row[2], 70.5f);  // weight; "shoe" is not in the vocabulary
  const float* dense = static_cast<const float*>(strata_tensor_data(outs[1]));
  ASSERT_EQ(strata_tensor_element_count(outs[1]), 4);
  EXPECT_EQ(dense[0], 0.0f);
  EXPECT_EQ(dense[1], 1.5f);
  EXPECT_EQ(dense[2], 0.0f);
  EXPECT_EQ(dense[3], 3.5f);  // key 7 is past max_map 4
  for (strata_tensor* t : outs) strata_tensor_destroy(t);

  // Wrong kinds and types are refused naming the input.
  const strata_tensor* swapped[2] = {sparse, features};
  strata_tensor* none[2] = {};
  strata_status* st = strata_session_run(o.session, in_names, swapped, 2, nullptr, none, 2);
  EXPECT_EQ(strata_status_get_code(st), STRATA_INVALID_ARGUMENT);
  EXPECT_NE(Message(st).find("input 'features' is a map int64->float32"), std::string::npos);
  const strata_tensor* tensor_in[2] = {fv, sparse};
  EXPECT_NE(Message(strata_session_run(o.session, in_names, tensor_in, 2, nullptr, none, 2))
                .find("input 'features' must be a map"),
            std::string::npos);
  // Bad maps are refused when made.
  strata_tensor* dup_keys = Int64s({1, 1});
  strata_tensor* two = Floats({1, 2});
  strata_tensor* bad = nullptr;
  EXPECT_NE(Message(strata_value_create_map(dup_keys, two, &bad)).find("key 1 appears more than once"),
            std::string::npos);
  EXPECT_NE(Message(strata_value_create_map(sk, two, &bad)).find("3 map keys but 2 values"), std::string::npos);
  EXPECT_NE(Message(strata_value_create_map(two, two, &bad)).find("int64 or string"), std::string::npos);
  EXPECT_NE(Message(strata_value_create_map(features, two, &bad)).find("must be tensors"), std::string::npos);
  EXPECT_EQ(bad, nullptr);
  for (strata_tensor* t : {fk, fv, sk, sv, features, sparse, dup_keys, two}) strata_tensor_destroy(t);
}

TEST(CApi, SequenceAndOptionalInputsAndOutputs) {
  Owned o;
  ASSERT_TRUE(Open(kSequences, &o));
  EXPECT_EQ(IoType(o.session, false, 1), "optional(tensor(float))");
  EXPECT_EQ(IoType(o.session, true, 1), "seq(tensor(float))");
  strata_tensor* a = Floats({1, 2, 3});
  strata_tensor* b = Floats({4});
  const strata_tensor* items[2] = {a, b};
  strata_tensor *seq = nullptr, *none = nullptr;
  ASSERT_EQ(strata_value_create_sequence(items, 2, STRATA_DTYPE_UNDEFINED, &seq), nullptr);
  ASSERT_EQ(strata_value_create_none(&none), nullptr);
  EXPECT_EQ(strata_value_kind_of(none), STRATA_VALUE_NONE);
  const char* in_names[2] = {"items", "maybe"};
  const strata_tensor* ins[2] = {seq, none};
  strata_tensor* outs[3] = {};
  ASSERT_EQ(strata_session_run(o.session, in_names, ins, 2, nullptr, outs, 3), nullptr);
  EXPECT_EQ(static_cast<const int64_t*>(strata_tensor_data(outs[0]))[0], 2);
  EXPECT_FALSE(static_cast<const bool*>(strata_tensor_data(outs[2]))[0]);
  size_t n = 0;
  ASSERT_EQ(strata_value_sequence_length(outs[1], &n), nullptr);
  ASSERT_EQ(n, 2u);
  strata_tensor* item = nullptr;
  ASSERT_EQ(strata_value_sequence_item(outs[1], 0, &item), nullptr);
  ASSERT_EQ(strata_tensor_element_count(item), 3);
  float* p = static_cast<float*>(strata_tensor_data(item));
  EXPECT_EQ(p[2], 3.0f);
  p[2] = 99.0f;  // the output is a copy: the input item is unchanged
  EXPECT_EQ(static_cast<const float*>(strata_tensor_data(a))[2], 3.0f);
  strata_tensor_destroy(item);
  for (strata_tensor* t : outs) strata_tensor_destroy(t);

  // A present optional is fed as its value.
  const strata_tensor* present[2] = {seq, a};
  ASSERT_EQ(strata_session_run(o.session, in_names, present, 2, nullptr, outs, 3), nullptr);
  EXPECT_TRUE(static_cast<const bool*>(strata_tensor_data(outs[2]))[0]);
  for (strata_tensor* t : outs) strata_tensor_destroy(t);

  // Misuse names the problem.
  const strata_tensor* not_seq[2] = {a, none};
  strata_tensor* bad[3] = {};
  EXPECT_NE(Message(strata_session_run(o.session, in_names, not_seq, 2, nullptr, bad, 3))
                .find("input 'items' must be a sequence"),
            std::string::npos);
  strata_tensor* i64 = Int64s({1});
  const strata_tensor* mixed[2] = {a, i64};
  strata_tensor* s2 = nullptr;
  EXPECT_NE(Message(strata_value_create_sequence(mixed, 2, STRATA_DTYPE_UNDEFINED, &s2))
                .find("sequence item 1 is a tensor int64[1] but the sequence holds float32 tensors"),
            std::string::npos);
  EXPECT_NE(Message(strata_value_create_sequence(nullptr, 0, STRATA_DTYPE_UNDEFINED, &s2)).find("needs elem_dtype"),
            std::string::npos);
  ASSERT_EQ(strata_value_create_sequence(nullptr, 0, STRATA_DTYPE_FLOAT32, &s2), nullptr);
  size_t zero = 1;
  ASSERT_EQ(strata_value_sequence_length(s2, &zero), nullptr);
  EXPECT_EQ(zero, 0u);
  // io bindings take tensors only.
  strata_io_binding* binding = nullptr;
  ASSERT_EQ(strata_io_binding_create(o.session, &binding), nullptr);
  EXPECT_NE(Message(strata_io_binding_bind_input(binding, "items", seq)).find("io bindings take tensors"),
            std::string::npos);
  strata_io_binding_destroy(binding);
  for (strata_tensor* t : {a, b, seq, none, i64, s2}) strata_tensor_destroy(t);
}

TEST(CppWrapper, SequencesAndMaps) {
  strata::Env env;
  strata::Session session(env, kZipMap);
  EXPECT_EQ(session.Outputs()[2].type, "seq(map(int64,tensor(float)))");
  std::vector<float> x = {1, 2};
  auto in = strata::Tensor::Wrap(STRATA_DTYPE_FLOAT32, {1, 2}, x.data(), x.size());
  auto outs = session.Run({{"x", &in}});
  ASSERT_EQ(outs[2].kind(), STRATA_VALUE_SEQUENCE);
  auto rows = outs[2].Items();
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_EQ(rows[0].kind(), STRATA_VALUE_MAP);
  auto [keys, values] = rows[0].MapEntries();
  EXPECT_EQ(keys.shape(), std::vector<int64_t>{3});
  EXPECT_EQ(values.data<float>()[2], outs[1].data<float>()[2]);

  auto k = strata::Tensor::Strings({2}, {"b", "a"});
  std::vector<float> v = {2, 1};
  auto vt = strata::Tensor::Wrap(STRATA_DTYPE_FLOAT32, {2}, v.data(), v.size());
  auto m = strata::Tensor::Map(k, vt);
  auto [mk, mv] = m.MapEntries();
  EXPECT_EQ(mk.String(0), "a");
  EXPECT_EQ(mv.data<float>()[0], 1.0f);
  auto seq = strata::Tensor::Sequence({&m, &m});
  EXPECT_EQ(seq.Items().size(), 2u);
  EXPECT_EQ(strata::Tensor::None().kind(), STRATA_VALUE_NONE);
  EXPECT_THROW(m.Items(), strata::Error);
  EXPECT_THROW(strata::Tensor::Map(vt, vt), strata::Error);
}
