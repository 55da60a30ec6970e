// `strata bench MODEL [--threads N] [--warmup W] [--warmup-ms T] [--iters K] [--shape NAME=D1xD2...]
//  [--input NAME=FILE.npy] [--device D] [--precision fp32|bf16|fp16] [--provider-option P.K=V] [--profile]
//  [--json] [--save-inputs DIR]`
//
// Times Session::Run on seeded random inputs (or the --input files) and reports latency percentiles,
// session-creation time and peak RSS; --profile adds per-op-type and per-node tables
// from the executor's profiling hook. SIGINT stops the loop: what was measured so far
// is printed and the exit status is 130.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/cli_util.h"
#include "core/npy.h"
#include "core/profiler.h"
#include "core/session.h"

namespace strata::cli {

namespace {

struct BenchArgs {
  std::string model;
  SessionFlags session;
  int warmup = 5;
  double warmup_ms = 0;  // keep warming up until this much time has passed, too
  int iters = 50;
  int creations = 3;
  int top = 15;
  std::vector<std::string> shapes;
  std::vector<std::string> inputs;  // NAME=FILE.npy: fixed feeds instead of random ones
  bool profile = false;
  bool json = false;
  std::string save_inputs;
  uint32_t seed = 42;
};

// Set by SIGINT; the measuring loops poll it between runs.
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void OnSigint(int) { g_interrupted = 1; }

// Restores the previous SIGINT disposition when the command ends.
class SigintGuard {
 public:
  SigintGuard() {
    g_interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = OnSigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_);
  }
  ~SigintGuard() { sigaction(SIGINT, &old_, nullptr); }

 private:
  struct sigaction old_ {};
};

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Peak resident set size in KiB: getrusage's ru_maxrss and /proc/self/status VmHWM.
struct PeakRss {
  long ru_maxrss_kib = -1;
  long vm_hwm_kib = -1;
};
PeakRss ReadPeakRss() {
  PeakRss r;
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) == 0) r.ru_maxrss_kib = ru.ru_maxrss;  // KiB on Linux
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) r.vm_hwm_kib = std::strtol(line.c_str() + 6, nullptr, 10);
  return r;
}

// A one-line progress bar on stderr, redrawn at most ~10 times a second; only on a TTY.
class Progress {
 public:
  Progress(const char* label, int total) : label_(label), total_(total), enabled_(isatty(STDERR_FILENO) == 1) {}
  ~Progress() { Done(); }
  void Update(int done) {
    if (!enabled_ || total_ <= 0) return;
    auto now = Clock::now();
    if (done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    constexpr int kWidth = 30;
    int fill = static_cast<int>(static_cast<int64_t>(kWidth) * done / total_);
    std::string bar(fill, '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%-8s [%s] %d/%d", label_, bar.c_str(), done, total_);
    std::fflush(stderr);
    drawn_ = true;
  }
  void Done() {
    if (drawn_) std::fprintf(stderr, "\r\033[K");
    drawn_ = false;
  }

 private:
  const char* label_;
  int total_;
  bool enabled_;
  bool drawn_ = false;
  Clock::time_point last_{};
};

nlohmann::json StatsJson(const LatencyStats& s) {
  return {{"count", s.count}, {"median", s.median}, {"p10", s.p10}, {"p90", s.p90},      {"p99", s.p99},
          {"mean", s.mean},   {"min", s.min},       {"max", s.max}, {"stddev", s.stddev}};
}

std::string SafeFileName(std::string s) {
  for (char& c : s)
    if (c == '/' || c == '\\' || c == ':' || c == ' ') c = '_';
  return s;
}

// Feeds for every declared input: the --input file where one is given, else random;
// random integer inputs named like a mask get ones so attention masks stay meaningful (all
// tokens attended). Input i uses seed + i.
Result<std::vector<std::pair<std::string, Value>>> MakeInputs(const Session& s, const BenchArgs& a) {
  std::map<std::string, Tensor> given;
  for (const auto& spec : a.inputs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) return InvalidArgument("--input expects NAME=FILE.npy, got '", spec, "'");
    const std::string name = spec.substr(0, eq);
    bool known = false;
    std::string names;
    for (const ValueInfo& vi : s.inputs()) {
      known = known || vi.name == name;
      names += (names.empty() ? "" : ", ") + vi.name;
    }
    if (!known) return InvalidArgument("--input '", name, "' is not an input of the model (its inputs: ", names, ")");
    for (const auto& sh : a.shapes)
      if (sh.substr(0, sh.find('=')) == name)
        return InvalidArgument("input '", name, "' has both --input and --shape; give one");
    if (given.count(name)) return InvalidArgument("--input '", name, "' is given twice");
    ASSIGN_OR_RETURN(Tensor t, ReadNpy(spec.substr(eq + 1)));
    given.emplace(name, std::move(t));
  }
  ASSIGN_OR_RETURN(std::vector<Shape> shapes, ResolveInputShapes(s.inputs(), a.shapes));
  std::vector<std::pair<std::string, Value>> feeds;
  for (size_t i = 0; i < s.inputs().size(); ++i) {
    const ValueInfo& vi = s.inputs()[i];
    if (auto it = given.find(vi.name); it != given.end()) {
      feeds.emplace_back(vi.name, Value(std::move(it->second)));
      continue;
    }
    DataType dt = vi.type.elem_type == DataType::kUndefined ? DataType::kFloat : vi.type.elem_type;
    ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros(dt, shapes[i]));
    std::string lower = vi.name;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    bool mask = lower.find("mask") != std::string::npos && IsIntegerType(dt);
    if (mask) {
      DispatchNumeric(dt, [&]<typename T>() {
        T* p = t.mutable_data<T>();
        for (int64_t k = 0; k < t.num_elements(); ++k) p[k] = static_cast<T>(1);
      });
    } else {
      RETURN_IF_ERROR(FillRandom(&t, a.seed + static_cast<uint32_t>(i)));
    }
    feeds.emplace_back(vi.name, Value(std::move(t)));
  }
  return feeds;
}

Status SaveInputs(const std::vector<std::pair<std::string, Value>>& feeds, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return MakeStatus(StatusCode::kIOError, "cannot create --save-inputs directory '", dir, "': ", ec.message());
  nlohmann::json names = nlohmann::json::array();
  for (size_t i = 0; i < feeds.size(); ++i) {
    std::string file = "input_" + std::to_string(i) + "_" + SafeFileName(feeds[i].first) + ".npy";
    RETURN_IF_ERROR(WriteNpy((std::filesystem::path(dir) / file).string(), feeds[i].second.tensor()));
    names.push_back({{"name", feeds[i].first}, {"file", file}});
  }
  // A plain "name<TAB>file" list so C++ readers need no JSON parser.
  std::ofstream idx(std::filesystem::path(dir) / "inputs.txt");
  for (const auto& n : names) idx << n["name"].get<std::string>() << '\t' << n["file"].get<std::string>() << '\n';
  if (!idx) return MakeStatus(StatusCode::kIOError, "cannot write ", dir, "/inputs.txt");
  return Status::Ok();
}

void PrintProfile(const Profiler& prof, int top, double run_ms_median, nlohmann::json* j, bool text) {
  const int64_t runs = std::max<int64_t>(1, prof.runs());
  const double run_ms = prof.run_ns() / 1e6 / static_cast<double>(runs);
  auto by_type = prof.ByOpType();
  auto nodes = prof.Nodes();
  double node_ms = 0;
  for (const auto& n : nodes) node_ms += n.total_ns / 1e6 / static_cast<double>(runs);
  double total_flops = 0;
  for (const auto& n : nodes)
    if (n.flops > 0) total_flops += n.flops;

  nlohmann::json jt = nlohmann::json::array();
  if (text) {
    std::printf(
        "\nprofile over %lld runs (per-run means): %.3f ms/run in nodes, %.3f ms/run whole run (%.1f%% accounted)\n",
        static_cast<long long>(prof.runs()), node_ms, run_ms, run_ms > 0 ? 100.0 * node_ms / run_ms : 0.0);
    if (total_flops > 0 && run_ms_median > 0)
      std::printf("model FLOPs (Conv/Gemm/MatMul/RNN/attention): %.3f GFLOP/run, %.2f GFLOP/s at the median latency\n",
                  total_flops / 1e9, total_flops / 1e6 / run_ms_median);
    std::printf("\n%-28s %6s %12s %7s %10s\n", "op type", "nodes", "ms/run", "%", "GFLOP/s");
  }
  for (const auto& o : by_type) {
    double ms = o.total_ns / 1e6 / static_cast<double>(runs);
    double pct = node_ms > 0 ? 100.0 * ms / node_ms : 0;
    double gf = o.GflopsPerSecond();
    if (text) {
      char gfs[32] = "-";
      if (gf > 0) std::snprintf(gfs, sizeof(gfs), "%.2f", gf);
      std::printf("%-28s %6lld %12.4f %6.1f%% %10s\n", o.op_type.c_str(), static_cast<long long>(o.nodes), ms, pct,
                  gfs);
    }
    nlohmann::json e = {{"op_type", o.op_type}, {"nodes", o.nodes}, {"ms_per_run", ms}, {"percent", pct}};
    if (gf > 0) e["gflops_per_s"] = gf;
    jt.push_back(e);
  }

  std::vector<size_t> order(nodes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return nodes[a].total_ns > nodes[b].total_ns; });
  if (top < 0) top = 0;
  if (order.size() > static_cast<size_t>(top)) order.resize(top);
  nlohmann::json jn = nlohmann::json::array();
  if (text && !order.empty())
    std::printf("\ntop %zu nodes\n%-40s %-18s %12s %7s %10s\n", order.size(), "node", "op", "ms/run", "%", "GFLOP/s");
  for (size_t i : order) {
    const NodeProfile& n = nodes[i];
    double ms = n.total_ns / 1e6 / static_cast<double>(runs);
    double pct = node_ms > 0 ? 100.0 * ms / node_ms : 0;
    double per_call_ms = n.mean_ms();
    double gf = n.flops > 0 && per_call_ms > 0 ? n.flops / per_call_ms / 1e6 : -1;
    if (text) {
      char gfs[32] = "-";
      if (gf > 0) std::snprintf(gfs, sizeof(gfs), "%.2f", gf);
      std::string name = n.name.size() > 40 ? "..." + n.name.substr(n.name.size() - 37) : n.name;
      std::printf("%-40s %-18s %12.4f %6.1f%% %10s\n", name.c_str(), n.op_type.c_str(), ms, pct, gfs);
    }
    nlohmann::json e = {{"node", n.name}, {"op_type", n.op_type}, {"ms_per_run", ms}, {"percent", pct}};
    if (n.flops > 0) e["flops"] = n.flops;
    if (gf > 0) e["gflops_per_s"] = gf;
    jn.push_back(e);
  }
  (*j)["profile"] = {{"runs", prof.runs()},      {"node_ms_per_run", node_ms},
                     {"run_ms_per_run", run_ms}, {"flops_per_run", total_flops},
                     {"op_types", jt},           {"top_nodes", jn}};
}

int Execute(const BenchArgs& a) {
  SigintGuard sigint;
  auto opts = MakeSessionOptions(a.session);
  if (!opts.ok()) return Fail(opts.status().message());
  const SessionOptions& so = *opts;

  // Creation time: each session is destroyed before the next so peak RSS reflects one.
  std::vector<double> create_ms;
  std::unique_ptr<Session> session;
  for (int c = 0; c < std::max(1, a.creations); ++c) {
    session.reset();
    auto t0 = Clock::now();
    auto created = Session::CreateFromFile(a.model, so);
    double ms = MsSince(t0);
    if (!created.ok()) return Fail(created.status().ToString());
    session = std::move(created).value();
    create_ms.push_back(ms);
    if (g_interrupted) break;
  }
  LatencyStats create = Summarize(create_ms);

  auto feeds = MakeInputs(*session, a);
  if (!feeds.ok()) return Fail(feeds.status().ToString());
  if (!a.save_inputs.empty()) {
    Status st = SaveInputs(*feeds, a.save_inputs);
    if (!st.ok()) return Fail(st.ToString());
  }

  std::vector<double> samples;
  Profiler prof;
  bool interrupted = g_interrupted != 0;
  int64_t warmup_runs = 0;
  {
    // Both limits: W runs, and T ms of them. Why time: on a shared VM a new process runs
    // slower for its first few tenths of a second whatever it does (docs/benchmarks.md), and
    // a count of runs covers a different span of time for each model and runtime.
    Progress bar("warmup", a.warmup);
    const auto w0 = Clock::now();
    for (; (warmup_runs < a.warmup || MsSince(w0) < a.warmup_ms) && !g_interrupted; ++warmup_runs) {
      auto out = session->Run(*feeds);
      if (!out.ok()) return Fail(out.status().ToString());
      bar.Update(static_cast<int>(std::min<int64_t>(warmup_runs + 1, a.warmup)));
    }
  }
  {
    // Profiling costs two clock reads per node; the runs are timed the same way either way.
    std::optional<ScopedProfiling> scope;
    if (a.profile) scope.emplace(&prof);
    Progress bar("bench", a.iters);
    samples.reserve(a.iters);
    for (int i = 0; i < a.iters && !g_interrupted; ++i) {
      auto t0 = Clock::now();
      auto out = session->Run(*feeds);
      double ms = MsSince(t0);
      if (!out.ok()) return Fail(out.status().ToString());
      samples.push_back(ms);
      bar.Update(i + 1);
    }
  }
  interrupted = interrupted || g_interrupted != 0;
  LatencyStats lat = Summarize(samples);
  PeakRss rss = ReadPeakRss();

  nlohmann::json j;
  j["runtime"] = "strata";
  j["model"] = a.model;
  j["threads"] = a.session.threads;
  j["warmup"] = a.warmup;
  j["warmup_ms"] = a.warmup_ms;
  j["warmup_runs"] = warmup_runs;
  j["iters"] = a.iters;
  j["interrupted"] = interrupted;
  nlohmann::json jin = nlohmann::json::array();
  for (const auto& [name, v] : *feeds)
    jin.push_back({{"name", name}, {"dtype", DataTypeName(v.tensor().dtype())}, {"shape", v.tensor().shape()}});
  j["inputs"] = jin;
  j["latency_ms"] = StatsJson(lat);
  j["samples_ms"] = samples;
  j["session_create_ms"] = {{"median", create.median}, {"samples", create_ms}};
  j["peak_rss_kib"] = {{"ru_maxrss", rss.ru_maxrss_kib}, {"vm_hwm", rss.vm_hwm_kib}};

  if (!a.json) {
    std::printf("model    %s\n", a.model.c_str());
    for (const auto& [name, v] : *feeds)
      std::printf("input    %s %s%s\n", name.c_str(), DataTypeName(v.tensor().dtype()),
                  ShapeToString(v.tensor().shape()).c_str());
    std::printf("threads  %d%s, precision %s, device %s\n", a.session.threads,
                a.session.threads == 0 ? " (all cores)" : "", a.session.precision.c_str(), a.session.device.c_str());
    std::printf("session creation  %.2f ms (median of %zu)\n", create.median, create_ms.size());
    if (lat.count == 0) {
      std::printf("latency           no measured runs\n");
    } else {
      std::printf("latency (ms) over %zu runs%s:\n", lat.count, interrupted ? " (interrupted)" : "");
      std::printf("  median %.4f  p10 %.4f  p90 %.4f  p99 %.4f  mean %.4f  min %.4f  max %.4f\n", lat.median, lat.p10,
                  lat.p90, lat.p99, lat.mean, lat.min, lat.max);
    }
    std::printf("peak RSS          %.1f MiB (ru_maxrss), %.1f MiB (VmHWM)\n", rss.ru_maxrss_kib / 1024.0,
                rss.vm_hwm_kib / 1024.0);
  }
  if (a.profile && prof.runs() > 0) PrintProfile(prof, a.top, lat.median, &j, !a.json);
  if (a.json) std::printf("%s\n", j.dump(2).c_str());
  std::fflush(stdout);
  if (interrupted) {
    std::fprintf(stderr, "strata: interrupted after %zu measured runs\n", samples.size());
    return 130;
  }
  return 0;
}

}  // namespace

void AddBenchCommand(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand("bench", "Measure a model's latency, session creation time and peak memory");
  sub->add_option("model", args->model, "ONNX model file")->required();
  AddSessionFlags(sub, &args->session);
  sub->add_option("--warmup", args->warmup, "Untimed runs first (default 5)")->check(CLI::Range(0, 1000000));
  sub->add_option("--warmup-ms", args->warmup_ms,
                  "Keep doing untimed runs until this many milliseconds have passed as well (default 0)")
      ->check(CLI::Range(0.0, 3600000.0));
  sub->add_option("--iters", args->iters, "Timed runs (default 50)")->check(CLI::Range(1, 10000000));
  sub->add_option("--creations", args->creations, "Session creations to time (default 3)")->check(CLI::Range(1, 1000));
  sub->add_option("--shape", args->shapes, "Input shape as NAME=D1xD2x... (repeatable; unknown dims default to 1)");
  sub->add_option("-i,--input", args->inputs, "Input from a file as NAME=FILE.npy instead of random (repeatable)");
  sub->add_flag("--profile", args->profile, "Per-op-type and per-node time tables");
  sub->add_option("--top", args->top, "Nodes in the --profile table (default 15)")->check(CLI::Range(0, 1000000));
  sub->add_option("--save-inputs", args->save_inputs, "Write the random inputs as DIR/input_<i>_<name>.npy");
  sub->add_option("--seed", args->seed, "Random input seed (default 42; input i uses seed+i)");
  sub->add_flag("--json", args->json, "Machine-readable output");
  sub->callback([args] { Exit(Execute(*args)); });
}

}  // namespace strata::cli
