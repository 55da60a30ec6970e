// Model loading without extra copies: large raw_data kept out of protobuf (import_wire.cc),
// weights mapped or read straight into tensors (import_source.cc), external data, deleting
// the files after session creation, truncated files, and releasing packed constants
// (core/constant_release.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/constant_release.h"
#include "core/deferred_payload.h"
#include "core/import_internal.h"
#include "core/large_pages.h"
#include "core/onnx_import.h"
#include "core/session.h"
#include "onnx_builder.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using namespace onnx_builder;  // NOLINT: MakeModel, AddInput, AddOutput, AddNode, Serialize

constexpr int64_t kK = 64, kN = 256;  // W is 64 KiB: stripped, and mapped when element-aligned

std::vector<float> Weights(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> w(static_cast<size_t>(n));
  for (auto& x : w) x = u(rng);
  return w;
}

// y = x @ W + b; W and b in raw_data (float_data when `typed`), padded producer name to move
// W's payload within the file.
// k x n: W's shape (the default kK x kN, unless a test needs more reads of it).
onnx::ModelProto MatMulModel(bool typed, size_t pad = 0, int64_t k = kK, int64_t n = kN) {
  onnx::ModelProto m = MakeModel(13, "load_test" + std::string(pad, '_'));
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, k});
  AddOutput(g, "y", {2, n});
  AddNode(g, "MatMul", {"x", "W"}, {"xw"});
  AddNode(g, "Add", {"xw", "b"}, {"y"});
  auto add = [&](const std::string& name, std::vector<int64_t> dims, const std::vector<float>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    if (typed) {
      for (float f : v) t->add_float_data(f);
    } else {
      t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
    }
  };
  add("W", {k, n}, Weights(k * n, 1));
  add("b", {n}, Weights(n, 2));
  return m;
}

// Offset of W's payload in the serialized model.
size_t PayloadOffset(const std::string& bytes) {
  std::vector<float> w = Weights(kK * kN, 1);
  size_t pos = bytes.find(std::string(reinterpret_cast<const char*>(w.data()), 64));
  EXPECT_NE(pos, std::string::npos);
  return pos;
}

// Serialized MatMulModel whose W payload starts at offset % 64 == want.
std::string SerializedWithAlignment(size_t want) {
  for (size_t pad = 0; pad < 256; ++pad) {
    std::string s = Serialize(MatMulModel(false, pad));
    if (PayloadOffset(s) % 64 == want) return s;
  }
  ADD_FAILURE() << "no padding gives alignment " << want;
  return {};
}

std::vector<std::pair<std::string, Value>> Feeds(int64_t k = kK) {
  std::vector<float> x = Weights(2 * k, 3);
  return {{"x", Value(Tensor::FromVector<float>(x, {2, k}))}};
}

std::vector<float> RunOnce(const Session& s, int64_t k = kK) {
  auto out = s.Run(Feeds(k));
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return {};
  const Tensor& y = (*out)[0].tensor();
  return std::vector<float>(y.data<float>(), y.data<float>() + y.num_elements());
}

SessionOptions Opts() {
  SessionOptions o;
  o.threads = 1;
  return o;
}

// The expected output: the same model with typed (never stripped) data, from memory.
std::vector<float> Expected(int64_t k = kK, int64_t n = kN) {
  std::string s = Serialize(MatMulModel(true, 0, k, n));
  auto sess = Session::CreateFromBytes(s.data(), s.size(), Opts());
  EXPECT_TRUE(sess.ok()) << sess.status().ToString();
  return sess.ok() ? RunOnce(**sess, k) : std::vector<float>{};
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("strata_load_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string File(const std::string& name, const std::string& bytes) const {
    std::string p = (path_ / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// Sets STRATA_MAP_WEIGHTS ("1": map element-aligned payloads, "0": read them) for a scope.
class ScopedMapPolicy {
 public:
  explicit ScopedMapPolicy(const char* value) {
    if (const char* old = std::getenv("STRATA_MAP_WEIGHTS")) saved_ = old, had_ = true;
    setenv("STRATA_MAP_WEIGHTS", value, 1);
  }
  ~ScopedMapPolicy() {
    if (had_)
      setenv("STRATA_MAP_WEIGHTS", saved_.c_str(), 1);
    else
      unsetenv("STRATA_MAP_WEIGHTS");
  }

 private:
  std::string saved_;
  bool had_ = false;
};

bool FileIsMapped(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::string canon = fs::weakly_canonical(path).string();
  while (std::getline(maps, line))
    if (line.find(canon) != std::string::npos) return true;
  return false;
}

TEST(LoadStrip, StripsOnlyLargeMainGraphRawData) {
  std::string bytes = Serialize(MatMulModel(false));
  std::string stripped;
  std::vector<import::InlineRange> table;
  ASSERT_TRUE(import::StripLargeRawData(bytes.data(), bytes.size(), import::kStripRawDataThreshold, &stripped, &table));
  ASSERT_EQ(table.size(), 2u);
  EXPECT_TRUE(table[0].stripped);
  EXPECT_EQ(table[0].length, static_cast<size_t>(kK * kN * 4));
  EXPECT_EQ(table[0].offset, PayloadOffset(bytes));
  EXPECT_FALSE(table[1].stripped);  // b is 1 KiB: kept for shape inference
  EXPECT_LT(stripped.size(), 4096u);
  onnx::ModelProto p;
  ASSERT_TRUE(p.ParseFromString(stripped));
  EXPECT_TRUE(p.graph().initializer(0).has_raw_data());
  EXPECT_EQ(p.graph().initializer(0).raw_data().size(), 1u);  // placeholder
  EXPECT_EQ(p.graph().initializer(1).raw_data().size(), static_cast<size_t>(kN * 4));
  EXPECT_EQ(p.graph().node_size(), 2);

  // Nothing large: the caller parses the original.
  std::string small = Serialize(MatMulModel(true));
  EXPECT_FALSE(import::StripLargeRawData(small.data(), small.size(), 4096, &stripped, &table));
  // Malformed bytes: give up rather than guess (the parser then reports the error).
  EXPECT_FALSE(import::StripLargeRawData(bytes.data(), bytes.size() - 100, 4096, &stripped, &table));
  std::string group("\x0b\x0c", 2);  // field 1 as a group
  EXPECT_FALSE(import::StripLargeRawData(group.data(), group.size(), 4096, &stripped, &table));
}

// Many initializers, small (kept) and large (stripped) in turn, and many nodes: over 16 KiB
// of bytes between payloads, so the file scan's window refills and kept fields straddle it.
onnx::ModelProto ManyInitializersModel() {
  onnx::ModelProto m = MakeModel(13, "many");
  auto* g = m.mutable_graph();
  AddInput(g, "x0", {1, 1500});
  for (int i = 0; i < 40; ++i) {
    const std::string n = std::to_string(i);
    AddNode(g, "Add", {"x" + n, "big" + n}, {"s" + n});
    AddNode(g, "Mul", {"s" + n, "small" + n}, {"x" + std::to_string(i + 1)});
    for (const auto& [name, count] : {std::pair<std::string, int64_t>{"big" + n, 1500}, {"small" + n, 1 + i * 20}}) {
      auto* t = g->add_initializer();
      t->set_name(name);
      t->set_data_type(onnx::TensorProto::FLOAT);
      t->add_dims(count == 1500 ? 1 : count);
      if (count == 1500) t->add_dims(1500);
      const std::vector<float> v = Weights(count, static_cast<uint32_t>(i + 3));
      t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
    }
  }
  AddOutput(g, "x40", {1, 1500});
  return m;
}

// Scanning the file (pread through a window) strips the same bytes as scanning memory.
TEST(LoadStrip, FromTheFileMatchesFromMemory) {
  const fs::path dir = fs::temp_directory_path() / ("strata_strip_" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (const onnx::ModelProto& model : {MatMulModel(false), MatMulModel(true), ManyInitializersModel()}) {
    const std::string bytes = Serialize(model);
    const std::string path = (dir / "m.onnx").string();
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    std::string want, got;
    std::vector<import::InlineRange> want_table, got_table;
    const bool want_ok =
        import::StripLargeRawData(bytes.data(), bytes.size(), import::kStripRawDataThreshold, &want, &want_table);
    const import::StripResult got_r =
        import::StripLargeRawDataFromFile(fd, bytes.size(), import::kStripRawDataThreshold, &got, &got_table);
    const bool got_ok = got_r == import::StripResult::kStripped;
    EXPECT_NE(got_r, import::StripResult::kReadFailed);
    EXPECT_EQ(got_ok, want_ok);
    // Nothing to strip (the typed model): the scan read it all, and what it kept is the
    // model itself, for the importer to parse without reading the file again.
    if (!want_ok) {
      EXPECT_EQ(got_r, import::StripResult::kWhole);
      EXPECT_EQ(got, bytes);
    }
    EXPECT_EQ(got, want);
    ASSERT_EQ(got_table.size(), want_table.size());
    for (size_t i = 0; i < got_table.size(); ++i) {
      EXPECT_EQ(got_table[i].offset, want_table[i].offset) << i;
      EXPECT_EQ(got_table[i].length, want_table[i].length) << i;
      EXPECT_EQ(got_table[i].stripped, want_table[i].stripped) << i;
    }
    if (model.graph().initializer_size() == 80) {
      EXPECT_TRUE(got_ok);
      EXPECT_GT(want.size(), size_t{16384} + 4096);  // kept bytes span several windows
    }
    // A file shorter than the size given (cut while loading): give up, never read past it.
    fs::resize_file(path, bytes.size() / 2);
    EXPECT_EQ(import::StripLargeRawDataFromFile(fd, bytes.size(), import::kStripRawDataThreshold, &got, &got_table),
              import::StripResult::kReadFailed)
        << "a short read must say so: the importer then fails instead of parsing the mapping";
    ::close(fd);
  }
  fs::remove_all(dir);
}

TEST(LoadStrip, ZeroCopyAndReadInitializersGiveIdenticalOutputs) {
  const std::vector<float> want = Expected();
  ASSERT_EQ(want.size(), static_cast<size_t>(2 * kN));
  for (const char* map : {"1", "0"})
    for (size_t align : {size_t{0}, size_t{4}, size_t{7}}) {
      SCOPED_TRACE("payload offset % 64 == " + std::to_string(align) + ", STRATA_MAP_WEIGHTS=" + map);
      ScopedMapPolicy policy(map);
      const bool mapped = map[0] == '1' && align % 4 == 0;
      std::string bytes = SerializedWithAlignment(align);
      auto mem = Session::CreateFromBytes(bytes.data(), bytes.size(), Opts());
      ASSERT_TRUE(mem.ok()) << mem.status().ToString();
      EXPECT_EQ(RunOnce(**mem), want);
      TempDir dir;
      std::string path = dir.File("m.onnx", bytes);
      auto file = Session::CreateFromFile(path, Opts());
      ASSERT_TRUE(file.ok()) << file.status().ToString();
      EXPECT_EQ(RunOnce(**file), want);
      // The session's MatMul packed W, so it keeps no mapping of the file (constant release).
      EXPECT_FALSE(FileIsMapped(path));
      // Element-aligned payloads are mapped from the model file when the policy says so;
      // others are read into memory of their own.
      {
        auto model = ImportOnnxFile(path);
        ASSERT_TRUE(model.ok()) << model.status().ToString();
        EXPECT_EQ(FileIsMapped(path), mapped);
      }
      EXPECT_FALSE(FileIsMapped(path));
    }
}

// Open descriptors of this process that refer to `path`.
int OpenDescriptorsOf(const std::string& path) {
  int n = 0;
  const std::string canon = fs::weakly_canonical(path).string();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/self/fd", ec)) {
    std::error_code lec;
    if (fs::read_symlink(e.path(), lec).string() == canon) ++n;
  }
  return n;
}

// W (value `name`) of an imported model.
Tensor* Initializer(Model& m, const std::string& name) {
  for (auto& [v, t] : m.graph->initializers)
    if (m.graph->ValueName(v) == name) return &t;
  return nullptr;
}

// Session creation reads large payloads when their kernel first reads them (read policy):
// the import makes deferred buffers, the first data() reads the file, and the session
// reads any left and closes the file before creation returns.
TEST(LoadDeferred, PayloadsAreReadOnFirstUseAndTheFileClosedAfterCreation) {
  ScopedMapPolicy policy("0");
  const std::vector<float> want_w = Weights(kK * kN, 1);
  TempDir dir;
  const std::string path = dir.File("m.onnx", SerializedWithAlignment(0));
  {
    auto plain = ImportOnnxFile(path);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    EXPECT_EQ(plain->deferred, nullptr) << "only a caller that asks defers";
  }
  ImportOptions io;
  io.defer_weight_reads = true;
  auto m = ImportOnnxFile(path, io);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_NE(m->deferred, nullptr);
  EXPECT_EQ(m->deferred->made(), 1u);  // W (64 KiB); b (1 KiB) was read at import
  EXPECT_EQ(m->deferred->loaded(), 0u);
  EXPECT_EQ(OpenDescriptorsOf(path), 1) << "the deferred payloads keep the file open";
  Tensor* w = Initializer(*m, "W");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->byte_size(), want_w.size() * sizeof(float)) << "the size is known before the read";
  EXPECT_EQ(m->deferred->loaded(), 0u);
  ASSERT_EQ(std::memcmp(w->data<float>(), want_w.data(), want_w.size() * sizeof(float)), 0);
  EXPECT_EQ(m->deferred->loaded(), 1u);
  EXPECT_TRUE(m->deferred->LoadAll().ok());
  m->deferred.reset();
  EXPECT_EQ(OpenDescriptorsOf(path), 0) << "the last read closes the file";

  auto s = Session::CreateFromFile(path, Opts());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(OpenDescriptorsOf(path), 0) << "creation returns with the file closed";
  EXPECT_EQ(RunOnce(**s), Expected());
}

// Truncates `path` to `length` bytes just before read number `at` of a load (counting from
// 0, on whichever thread reads); with at < 0 it only counts the reads.
struct CutAtRead {
  std::string path;
  int at = -1;
  off_t length = 0;
  std::atomic<int> reads{0};
  static void Hook(void* ctx) {
    auto* c = static_cast<CutAtRead*>(ctx);
    if (c->reads.fetch_add(1) == c->at) {
      EXPECT_EQ(::truncate(c->path.c_str(), c->length), 0) << c->path;
    }
  }
};

class ScopedReadHook {
 public:
  explicit ScopedReadHook(CutAtRead* cut) { import::SetReadHookForTesting(&CutAtRead::Hook, cut); }
  ~ScopedReadHook() { import::SetReadHookForTesting(nullptr, nullptr); }
  ScopedReadHook(const ScopedReadHook&) = delete;
  ScopedReadHook& operator=(const ScopedReadHook&) = delete;
};

// The file cut short between any two reads of a session's creation from it (the strip
// scan's window reads, W's payload read whole or, at 4 MiB, in row blocks by the packer; 1
// and 2 threads; cut to nothing, into the bytes before W, into W, and by its last byte):
// creation fails with an I/O error that names the file and says it was truncated, and
// leaves it closed; or, where every read after the cut was of bytes before it, the session
// gives the model's outputs. Never a crash, and never weights read as zeros or garbage.
// (Mapped payloads would fault instead, see docs/hardening.md: these are read.)
TEST(LoadRace, AFileCutShortBetweenAnyTwoReadsIsAnErrorNamingItOrTheRightOutputs) {
  ScopedMapPolicy policy("0");
  TempDir dir;
  for (const auto& [k, n] : {std::pair<int64_t, int64_t>{kK, kN}, {512, 2048}}) {
    const std::string bytes = Serialize(MatMulModel(false, 0, k, n));
    const std::vector<float> want = Expected(k, n);
    ASSERT_FALSE(want.empty());
    const off_t payload = static_cast<off_t>(PayloadOffset(bytes)), w_bytes = k * n * 4;
    const std::string path = dir.File("m.onnx", bytes);
    for (int threads : {1, 2}) {
      SessionOptions o = Opts();
      o.threads = threads;
      int total = 0;
      {
        dir.File("m.onnx", bytes);
        CutAtRead count{path};
        ScopedReadHook hook(&count);
        auto s = Session::CreateFromFile(path, o);
        ASSERT_TRUE(s.ok()) << s.status().ToString();
        EXPECT_EQ(RunOnce(**s, k), want);
        total = count.reads.load();
      }
      ASSERT_GE(total, 3) << "the strip scan's reads and W's payload";
      int failed = 0, whole = 0;
      for (off_t length :
           {off_t{0}, payload / 2, payload + 4096, payload + w_bytes / 2 + 8, static_cast<off_t>(bytes.size()) - 1}) {
        for (int at = 0; at < total; ++at) {
          SCOPED_TRACE(std::to_string(k) + "x" + std::to_string(n) + " W, " + std::to_string(threads) +
                       " threads: cut to " + std::to_string(length) + " bytes before read " + std::to_string(at) +
                       " of " + std::to_string(total));
          dir.File("m.onnx", bytes);
          CutAtRead cut{path, at, length};
          Result<std::unique_ptr<Session>> s = [&] {
            ScopedReadHook hook(&cut);
            return Session::CreateFromFile(path, o);
          }();
          EXPECT_EQ(OpenDescriptorsOf(path), 0);
          if (s.ok()) {
            ++whole;
            EXPECT_EQ(RunOnce(**s, k), want);
            continue;
          }
          ++failed;
          const std::string msg = s.status().ToString();
          EXPECT_EQ(s.status().code(), StatusCode::kIOError) << msg;
          EXPECT_NE(msg.find(path), std::string::npos) << msg;
          EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
        }
      }
      EXPECT_GT(failed, 0);
      EXPECT_GT(whole, 0) << "a cut by the last byte after the strip scan leaves every read whole";
    }
  }
}

// A file cut short after the import: the read fails, the payload reads as zeros, and
// LoadAll (which fails the session's creation) names the tensor and the file. A payload
// released before anyone read it is never read.
TEST(LoadDeferred, ATruncatedFileIsAnErrorNamingTheTensorAndFile) {
  ScopedMapPolicy policy("0");
  TempDir dir;
  const std::string path = dir.File("m.onnx", SerializedWithAlignment(0));
  ImportOptions io;
  io.defer_weight_reads = true;
  {
    auto m = ImportOnnxFile(path, io);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_NE(m->deferred, nullptr);
    fs::resize_file(path, PayloadOffset(Serialize(MatMulModel(false))) / 2);
    Tensor* w = Initializer(*m, "W");
    ASSERT_NE(w, nullptr);
    const float* d = w->data<float>();
    ASSERT_NE(d, nullptr);
    bool zero = true;
    for (int64_t i = 0; i < w->num_elements(); i += 97) zero &= d[i] == 0.0f;
    EXPECT_TRUE(zero);
    Status st = m->deferred->LoadAll();
    EXPECT_EQ(st.code(), StatusCode::kIOError);
    EXPECT_NE(st.message().find("initializer 'W'"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find(path), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.ToString();
  }
  dir.File("m.onnx", SerializedWithAlignment(0));
  auto m = ImportOnnxFile(path, io);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  fs::resize_file(path, 10);
  Tensor* w = Initializer(*m, "W");
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(w->buffer()->ReleaseStorage());
  EXPECT_EQ(w->buffer()->size(), 0u);
  EXPECT_EQ(w->buffer()->data(), nullptr);
  EXPECT_TRUE(m->deferred->LoadAll().ok());
  EXPECT_EQ(m->deferred->loaded(), 0u);
}

TEST(LoadSource, MapPolicyFollowsTheEnvironment) {
  {
    ScopedMapPolicy policy("1");
    EXPECT_TRUE(import::MapWeightPayloads());
  }
  {
    ScopedMapPolicy policy("0");
    EXPECT_FALSE(import::MapWeightPayloads());
  }
  // Unset or anything else: read where transparent huge pages exist, map elsewhere.
  ScopedMapPolicy policy("yes");
  EXPECT_EQ(import::MapWeightPayloads(), !LargePagesUsable());
}

TEST(LoadStrip, ModelFileCanBeDeletedAfterCreation) {
  const std::vector<float> want = Expected();
  for (size_t align : {size_t{0}, size_t{13}}) {
    TempDir dir;
    std::string path = dir.File("m.onnx", SerializedWithAlignment(align));
    auto s = Session::CreateFromFile(path, Opts());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    fs::remove(path);  // a mapping keeps the inode's data alive
    EXPECT_EQ(RunOnce(**s), want);
  }
}

// The same model with W in `data.bin` at `offset` (after `offset` junk bytes).
std::string ExternalModel(const TempDir& dir, size_t offset, const std::string& location = "data.bin") {
  std::vector<float> w = Weights(kK * kN, 1);
  std::string junk(offset, 'j');
  dir.File("data.bin", junk + std::string(reinterpret_cast<const char*>(w.data()), w.size() * 4) + "tail");
  onnx::ModelProto m = MatMulModel(false);
  auto* t = m.mutable_graph()->mutable_initializer(0);
  t->clear_raw_data();
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto kv = [&](const std::string& k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", location);
  kv("offset", std::to_string(offset));
  kv("length", std::to_string(w.size() * 4));
  return dir.File("m.onnx", Serialize(m));
}

TEST(LoadExternal, ExternalDataLoadsRunsAndSurvivesDeletion) {
  const std::vector<float> want = Expected();
  for (const char* map : {"1", "0"})
    for (size_t offset : {size_t{0}, size_t{4096}, size_t{101}}) {
      SCOPED_TRACE("offset " + std::to_string(offset) + ", STRATA_MAP_WEIGHTS=" + map);
      ScopedMapPolicy policy(map);
      TempDir dir;
      std::string path = ExternalModel(dir, offset);
      auto s = Session::CreateFromFile(path, Opts());
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      {
        auto model = ImportOnnxFile(path);
        ASSERT_TRUE(model.ok()) << model.status().ToString();
        EXPECT_EQ(FileIsMapped((dir.path() / "data.bin").string()), map[0] == '1' && offset % 4 == 0);
      }
      // The session packed W and released its mapping (constant release).
      EXPECT_FALSE(FileIsMapped((dir.path() / "data.bin").string()));
      fs::remove(dir.path() / "data.bin");
      fs::remove(path);
      EXPECT_EQ(RunOnce(**s), want);
    }
}

TEST(LoadExternal, BadExternalRangesGiveClearErrors) {
  TempDir dir;
  std::string path = ExternalModel(dir, 64);
  // Shrink the data file below offset + length.
  fs::resize_file(dir.path() / "data.bin", 1000);
  auto s = Session::CreateFromFile(path, Opts());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("exceeds the size"), std::string::npos) << s.status().ToString();
  fs::remove(dir.path() / "data.bin");
  s = Session::CreateFromFile(path, Opts());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("data.bin"), std::string::npos) << s.status().ToString();
}

TEST(LoadHostile, TruncatedFilesGiveClearErrors) {
  std::string bytes = SerializedWithAlignment(0);
  size_t payload = PayloadOffset(bytes);
  TempDir dir;
  for (const char* map : {"1", "0"})
    for (size_t cut : {size_t{1}, size_t{10}, payload - 1, payload + 10, payload + 40000, bytes.size() - 1}) {
      SCOPED_TRACE("cut at " + std::to_string(cut) + ", STRATA_MAP_WEIGHTS=" + map);
      ScopedMapPolicy policy(map);
      std::string path = dir.File("t.onnx", bytes.substr(0, cut));
      auto s = Session::CreateFromFile(path, Opts());
      ASSERT_FALSE(s.ok());
      EXPECT_NE(s.status().message().find("t.onnx"), std::string::npos) << s.status().ToString();
      auto m = Session::CreateFromBytes(bytes.data(), cut, Opts());
      EXPECT_FALSE(m.ok());
    }
  std::string empty = dir.File("empty.onnx", "");
  auto s = Session::CreateFromFile(empty, Opts());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("empty"), std::string::npos) << s.status().ToString();
  s = Session::CreateFromFile((dir.path() / "missing.onnx").string(), Opts());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  s = Session::CreateFromFile(dir.path().string(), Opts());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("directory"), std::string::npos) << s.status().ToString();
}

TEST(LoadHostile, StrippedRawDataOfWrongSizeIsRejected) {
  onnx::ModelProto m = MatMulModel(false);
  // 16 more bytes than [64,256] float needs: still large enough to be stripped.
  m.mutable_graph()->mutable_initializer(0)->mutable_raw_data()->append(16, '\0');
  std::string bytes = Serialize(m);
  for (bool from_file : {false, true}) {
    TempDir dir;
    auto s = from_file ? Session::CreateFromFile(dir.File("m.onnx", bytes), Opts())
                       : Session::CreateFromBytes(bytes.data(), bytes.size(), Opts());
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find("initializer 'W' has 65552 bytes of raw_data"), std::string::npos)
        << s.status().ToString();
  }
}

TEST(LoadSource, LoadFileRangeMapsAlignedRangesAndReportsShortReads) {
  TempDir dir;
  std::vector<float> w = Weights(1 << 15, 4);  // 128 KiB
  std::string path = dir.File("w.bin", "xyz" + std::string(reinterpret_cast<const char*>(w.data()), w.size() * 4));
  int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  for (uint64_t offset : {uint64_t{3}, uint64_t{4}}) {
    auto buf = import::LoadFileRange(fd, offset, w.size() * 4 - 4, 4, true, path, "w");
    ASSERT_TRUE(buf.ok()) << buf.status().ToString();
    EXPECT_EQ(std::memcmp((*buf)->data(), reinterpret_cast<const char*>(w.data()) + (offset - 3), w.size() * 4 - 4), 0);
    EXPECT_EQ(reinterpret_cast<uintptr_t>((*buf)->data()) % 4, 0u);
    EXPECT_EQ(FileIsMapped(path), offset == 4);  // only the element-aligned range is mapped
    EXPECT_TRUE((*buf)->ReleaseStorage());
    EXPECT_EQ((*buf)->data(), nullptr);
    EXPECT_FALSE(FileIsMapped(path));
  }
  // Read ranges of 64 KiB and more live in AllocateLargePages memory: page aligned.
  auto read = import::LoadFileRange(fd, 3, w.size() * 4 - 4, 4, false, path, "w");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*read)->data()) % 4096, 0u);
  EXPECT_EQ(std::memcmp((*read)->data(), w.data(), w.size() * 4 - 4), 0);
  EXPECT_FALSE(FileIsMapped(path));
  auto past_end = import::LoadFileRange(fd, 3, w.size() * 4 + 100, 4, false, path, "tensor 'w'");
  ASSERT_FALSE(past_end.ok());
  EXPECT_NE(past_end.status().message().find("tensor 'w': short read"), std::string::npos)
      << past_end.status().ToString();
  ::close(fd);
}

// ---- releasing packed constants ----

class FakeKernel : public OpKernel {
 public:
  Status Compute(KernelContext&) const override { return Status::Ok(); }
};
class FakePacker : public OpKernel, public PacksConstantInputs {
 public:
  explicit FakePacker(std::vector<size_t> slots) : slots_(std::move(slots)) {}
  Status Compute(KernelContext&) const override { return Status::Ok(); }
  std::vector<size_t> PackedConstantInputs() const override { return slots_; }

 private:
  std::vector<size_t> slots_;
};

int AddConst(Graph* g, const std::string& name, int64_t n) {
  int v = g->AddValue(name);
  g->initializers[v] = Tensor::FromVector<float>(std::vector<float>(static_cast<size_t>(n), 1.f), {n});
  return v;
}

Node MakeNode(std::vector<int> in, std::vector<int> out) {
  Node n;
  n.op_type = "Fake";
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

TEST(LoadRelease, FreesOnlyConstantsEveryReaderPacked) {
  Graph g;
  int x = g.AddValue("x");
  g.inputs = {x};
  int w_packed = AddConst(&g, "w_packed", 1000);     // read by packers only: freed
  int w_mixed = AddConst(&g, "w_mixed", 1000);       // also read by a plain kernel: kept
  int w_out = AddConst(&g, "w_out", 1000);           // a graph output: kept
  int w_other_slot = AddConst(&g, "w_other", 1000);  // packer lists a different slot: kept
  int w_alias = g.AddValue("w_alias");               // shares w_packed2's buffer, read plainly: both kept
  int w_packed2 = AddConst(&g, "w_packed2", 1000);
  g.initializers[w_alias] = g.initializers[w_packed2].Reshaped({10, 100});
  int w_default = AddConst(&g, "w_default", 1000);  // overridable graph input: kept
  g.inputs.push_back(w_default);
  int w_sub = AddConst(&g, "w_sub", 1000);  // packed, but a subgraph reads it too: kept
  int y1 = g.AddValue("y1"), y2 = g.AddValue("y2"), y3 = g.AddValue("y3"), y4 = g.AddValue("y4"), y5 = g.AddValue("y5"),
      y6 = g.AddValue("y6");
  g.nodes.push_back(MakeNode({x, w_packed, w_mixed}, {y1}));               // packer {1, 2}
  g.nodes.push_back(MakeNode({y1, w_packed}, {y2}));                       // packer {1}
  g.nodes.push_back(MakeNode({y2, w_mixed}, {y3}));                        // plain
  g.nodes.push_back(MakeNode({y3, w_out, w_other_slot}, {y4}));            // packer {1}
  g.nodes.push_back(MakeNode({y4, w_packed2, w_alias, w_default}, {y5}));  // packer {1, 3}
  Node loop = MakeNode({y5, w_sub}, {y6});                                 // packer {1}, with a body reading w_sub
  auto body = std::make_shared<Graph>();
  int inner = body->AddValue("w_sub");
  body->captures = {inner};
  body->outputs = {inner};
  Attribute a;
  a.type = Attribute::Type::kGraph;
  a.g = body;
  loop.attrs["body"] = a;
  g.nodes.push_back(loop);
  g.outputs = {y6, w_out};

  std::vector<std::unique_ptr<OpKernel>> kernels;
  kernels.push_back(std::make_unique<FakePacker>(std::vector<size_t>{1, 2}));
  kernels.push_back(std::make_unique<FakePacker>(std::vector<size_t>{1}));
  kernels.push_back(std::make_unique<FakeKernel>());
  kernels.push_back(std::make_unique<FakePacker>(std::vector<size_t>{1}));
  kernels.push_back(std::make_unique<FakePacker>(std::vector<size_t>{1, 3}));
  kernels.push_back(std::make_unique<FakePacker>(std::vector<size_t>{1}));

  Tensor keep_alive = g.initializers[w_packed];  // copies share the buffer: it is freed for all
  ConstantReleaseStats st = ReleasePackedConstants(g, [&](size_t i) { return kernels[i].get(); });
  EXPECT_EQ(st.released, 1);
  EXPECT_EQ(st.bytes, 4000u);
  EXPECT_EQ(g.initializers[w_packed].raw_data(), nullptr);
  EXPECT_EQ(keep_alive.raw_data(), nullptr);
  EXPECT_EQ(g.initializers[w_packed].shape(), Shape{1000});  // type and shape stay
  for (int v : {w_mixed, w_out, w_other_slot, w_alias, w_packed2, w_default, w_sub}) {
    ASSERT_NE(g.initializers[v].raw_data(), nullptr) << g.ValueName(v);
    EXPECT_EQ(g.initializers[v].data<float>()[999], 1.f) << g.ValueName(v);
  }
  // Called while kernels are still being created, a node without a kernel yet (nullptr)
  // counts as needing its constants.
  Graph g2;
  int c = AddConst(&g2, "c", 100), y = g2.AddValue("y"), z = g2.AddValue("z");
  g2.nodes.push_back(MakeNode({c}, {y}));
  g2.nodes.push_back(MakeNode({c, y}, {z}));
  g2.outputs = {z};
  FakePacker p0({0});
  EXPECT_EQ(ReleasePackedConstants(g2, [&](size_t i) -> const OpKernel* { return i == 0 ? &p0 : nullptr; }).released,
            0);
  EXPECT_EQ(ReleasePackedConstants(g2, [&](size_t) -> const OpKernel* { return &p0; }).released, 1);

  // A second pass finds nothing more to do.
  EXPECT_EQ(ReleasePackedConstants(g, [&](size_t i) { return kernels[i].get(); }).released, 0);
}

TEST(LoadRelease, ReleasesAsSoonAsTheLastReaderHasPacked) {
  // The session feeds the releaser kernel by kernel: a constant goes with its last reader.
  Graph g;
  int x = g.AddValue("x");
  g.inputs = {x};
  int w = AddConst(&g, "w", 1000), v = AddConst(&g, "v", 1000);
  int y1 = g.AddValue("y1"), y2 = g.AddValue("y2");
  g.nodes.push_back(MakeNode({x, w, v}, {y1}));  // packer {1, 2}
  g.nodes.push_back(MakeNode({y1, w}, {y2}));    // packer {1}
  g.outputs = {y2};
  FakePacker both({1, 2}), one({1});
  ConstantReleaser r(g);
  r.OnKernel(0, &both);
  EXPECT_EQ(g.initializers[v].raw_data(), nullptr);  // v's only reader is done
  EXPECT_NE(g.initializers[w].raw_data(), nullptr);  // node 1 has not packed w yet
  EXPECT_EQ(r.stats().released, 1);
  r.OnKernel(0, &both);  // a repeated report changes nothing
  r.OnKernel(1, &one);
  EXPECT_EQ(g.initializers[w].raw_data(), nullptr);
  EXPECT_EQ(r.stats().released, 2);
  EXPECT_EQ(r.stats().bytes, 8000u);
}

TEST(LoadRelease, SessionReleasesPackedWeightsWithIdenticalOutputs) {
  for (bool typed : {false, true}) {
    std::string bytes = Serialize(MatMulModel(typed));
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), Opts());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const Graph& g = *(*s)->model().graph;
    int w = g.FindValue("W");
    ASSERT_GE(w, 0);
    ASSERT_TRUE(g.IsConstant(w));
    // The MatMul kernel packed W: the original is gone, its type and shape stay.
    EXPECT_EQ(g.initializers.at(w).raw_data(), nullptr);
    EXPECT_EQ(g.initializers.at(w).shape(), (Shape{kK, kN}));
    std::vector<float> want = Expected();
    EXPECT_EQ(RunOnce(**s), want);
    EXPECT_EQ(RunOnce(**s), want);  // and again: nothing reads the released storage
  }
}

// MatMulModel plus a second use of W that needs its data: `extra` is "output" (W itself
// is a graph output) or "plain" (a kernel that does not pack, Mul by a run-time scalar
// s = 1, which no optimizer pass can fold away).
onnx::ModelProto SharedWeightModel(const std::string& extra) {
  onnx::ModelProto m = MatMulModel(false);
  auto* g = m.mutable_graph();
  if (extra == "plain") {
    AddInput(g, "s", {1});
    AddNode(g, "Mul", {"W", "s"}, {"w_scaled"});
    AddOutput(g, "w_scaled", {kK, kN});
  } else {
    AddOutput(g, "W", {kK, kN});
  }
  return m;
}

TEST(LoadRelease, ConstantWithAnotherUserIsKept) {
  const std::vector<float> w_want = Weights(kK * kN, 1);
  for (const std::string extra : {"output", "plain"}) {
    SCOPED_TRACE(extra);
    std::string bytes = Serialize(SharedWeightModel(extra));
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), Opts());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const Graph& g = *(*s)->model().graph;
    int w = g.FindValue("W");
    ASSERT_GE(w, 0);
    ASSERT_TRUE(g.IsConstant(w));
    EXPECT_NE(g.initializers.at(w).raw_data(), nullptr);
    auto feeds = Feeds();
    if (extra == "plain") feeds.push_back({"s", Value(Tensor::FromVector<float>({1.f}, {1}))});
    for (int run = 0; run < 2; ++run) {
      auto out = (*s)->Run(feeds);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      ASSERT_EQ(out->size(), 2u);
      const Tensor& y = (*out)[0].tensor();
      EXPECT_EQ(std::vector<float>(y.data<float>(), y.data<float>() + y.num_elements()), Expected());
      const Tensor& wt = (*out)[1].tensor();
      ASSERT_NE(wt.raw_data(), nullptr);
      EXPECT_EQ(std::vector<float>(wt.data<float>(), wt.data<float>() + wt.num_elements()), w_want);
    }
  }
}

}  // namespace
}  // namespace strata
