// Packers that read a weight still in the model file block by block (sgemm::WeightRows over
// Buffer::ReadBytes of a deferred payload): they pack exactly the bytes they pack from
// memory, never read the whole payload into memory, and report a failed read naming the
// tensor and the file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "core/deferred_payload.h"
#include "core/threadpool.h"
#include "cpu/conv_nhwc_block_bf16.h"
#include "cpu/gemm_bf16.h"
#include "cpu/gemv.h"
#include "cpu/rnn_lstm_fused.h"
#include "cpu/sgemm.h"
#include "deferred_tensor.h"
#include "onnx_builder.h"

namespace strata {
namespace {

using testing::OnDiskTensor;
using testing::TempDir;
using testing::WriteOnDisk;

std::vector<float> Values(int64_t n, uint32_t seed) { return onnx_builder::PseudoRandom(static_cast<size_t>(n), seed); }

// The fused LSTM's column -> row map for hidden size H (lstm_fused::Pack's): column (p, g, u)
// is row g*H + p*16 + u, -1 past H.
std::vector<int64_t> RowsOf(int64_t H) {
  const int64_t U = lstm_fused::kUnits, panels = (H + U - 1) / U;
  std::vector<int64_t> rows(static_cast<size_t>(panels * kGemvPanel), -1);
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t g = 0; g < 4; ++g)
      for (int64_t u = 0; u < U && p * U + u < H; ++u) rows[p * kGemvPanel + g * U + u] = g * H + p * U + u;
  return rows;
}

// The packed floats of every panel (zero padding included).
std::vector<float> Panels(const sgemm::PackedB& p) {
  std::vector<float> out;
  for (int64_t i = 0; i < p.panels(); ++i) out.insert(out.end(), p.panel(i), p.panel(i) + p.k() * sgemm::kPanelWidth);
  return out;
}

TEST(WeightStream, ReadBytesReadsTheFileWithoutLoadingThePayload) {
  TempDir dir;
  const std::vector<float> v = Values(5000, 3);
  OnDiskTensor w = WriteOnDisk(dir, "w.bin", v, {50, 100});
  ASSERT_FALSE(w.path.empty());
  EXPECT_TRUE(w.tensor.on_disk());
  std::vector<float> got(300);
  ASSERT_TRUE(w.tensor.ReadBytes(1700 * sizeof(float), got.size() * sizeof(float), got.data()).ok());
  EXPECT_EQ(0, std::memcmp(got.data(), v.data() + 1700, got.size() * sizeof(float)));
  EXPECT_EQ(w.source->loaded(), 0u) << "a block read must not load the payload";
  EXPECT_TRUE(w.tensor.on_disk());

  // Outside the tensor: an error, nothing read.
  Status st = w.tensor.ReadBytes(4900 * sizeof(float), 200 * sizeof(float), got.data());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();

  // Once loaded, reads come from memory and agree.
  ASSERT_EQ(0, std::memcmp(w.tensor.data<float>(), v.data(), v.size() * sizeof(float)));
  EXPECT_EQ(w.source->loaded(), 1u);
  EXPECT_FALSE(w.tensor.on_disk());
  ASSERT_TRUE(w.tensor.ReadBytes(0, got.size() * sizeof(float), got.data()).ok());
  EXPECT_EQ(0, std::memcmp(got.data(), v.data(), got.size() * sizeof(float)));

  // Released storage is neither on disk nor readable.
  ASSERT_TRUE(w.tensor.buffer()->ReleaseStorage());
  EXPECT_FALSE(w.tensor.on_disk());
  EXPECT_FALSE(w.tensor.buffer()->ReadBytes(0, 4, got.data()).ok());
  EXPECT_TRUE(w.source->LoadAll().ok());
}

// Conv weights [M][C][taps] at edge sizes: one output channel, a panel + 1, odd C, 1x1 and
// 3x3 taps, and one big enough (over 2^20 floats) that the pool splits the panels.
TEST(WeightStream, ConvWeightsFromTheFilePackTheSameBytes) {
  TempDir dir;
  ThreadPool pool2(2);
  struct Case {
    int64_t m, c, taps;
  };
  uint32_t seed = 10;
  for (const Case& cc :
       {Case{1, 3, 9}, Case{33, 5, 9}, Case{64, 16, 1}, Case{70, 17, 9}, Case{32, 48, 9}, Case{300, 480, 9}}) {
    const std::vector<float> v = Values(cc.m * cc.c * cc.taps, seed++);
    const auto want = sgemm::PackConvWeights(v.data(), cc.m, cc.c, cc.taps);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
      OnDiskTensor w = WriteOnDisk(dir, "conv.bin", v, {cc.m, cc.c, cc.taps});
      ASSERT_FALSE(w.path.empty());
      const sgemm::WeightRows rows = sgemm::WeightRows::Of(w.tensor);
      ASSERT_EQ(rows.data, nullptr) << "an on-disk weight is read block by block";
      const auto got = sgemm::PackConvWeights(rows, cc.m, cc.c, cc.taps, pool);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(Panels(*got), Panels(*want)) << "M=" << cc.m << " C=" << cc.c << " taps=" << cc.taps;
      EXPECT_EQ(w.source->loaded(), 0u);
    }
  }
}

// Dense B [K, N]: one element, N a panel + 1, K odd, and one the pool splits by row blocks.
TEST(WeightStream, MatMulWeightsFromTheFilePackTheSameBytes) {
  TempDir dir;
  ThreadPool pool2(2);
  uint32_t seed = 40;
  for (auto [k, n] : {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {301, 70}, {1100, 1000}, {3, 4100}}) {
    const std::vector<float> v = Values(k * n, seed++);
    const auto want = sgemm::PackB(v.data(), k, n, /*trans_b=*/false);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
      OnDiskTensor w = WriteOnDisk(dir, "b.bin", v, {k, n});
      ASSERT_FALSE(w.path.empty());
      const auto got = sgemm::PackB(sgemm::WeightRows::Of(w.tensor), k, n, pool);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(Panels(*got), Panels(*want)) << "K=" << k << " N=" << n;
      EXPECT_EQ(w.source->loaded(), 0u);
    }
  }
}

// The GEMV panels (Gemm with a constant B): B^T [N, K] from the file is read a panel at a
// time and packs the same floats (alpha applied, all_finite the same); a [K, N] B on disk is
// loaded first and packs the same too.
TEST(WeightStream, GemvWeightsFromTheFilePackTheSameFloats) {
  TempDir dir;
  ThreadPool pool2(2);
  uint32_t seed = 70;
  for (auto [k, n] : {std::pair<int64_t, int64_t>{1, 1}, {17, 33}, {784, 1024}, {1280, 1000}}) {
    for (bool nk : {true, false}) {
      std::vector<float> v = Values(k * n, seed++);
      if (n == 33) v[5] = INFINITY;
      const auto want = GemvWeights::Pack(v.data(), k, n, nk, 0.5f, nullptr);
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
        OnDiskTensor w = WriteOnDisk(dir, "g.bin", v, nk ? Shape{n, k} : Shape{k, n});
        ASSERT_FALSE(w.path.empty());
        const auto got = GemvWeights::Pack(sgemm::WeightRows::Of(w.tensor), k, n, nk, 0.5f, nullptr, pool);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        ASSERT_EQ(got->panels(), want->panels());
        for (int64_t p = 0; p < want->panels(); ++p)
          ASSERT_EQ(0, std::memcmp(got->panel(p), want->panel(p), sizeof(float) * k * want->panel_width(p)))
              << "K=" << k << " N=" << n << " panel " << p;
        EXPECT_EQ(got->all_finite(), want->all_finite());
        EXPECT_EQ(w.source->loaded(), nk ? 0u : 1u) << "K=" << k << " N=" << n;
      }
    }
  }
  // A cut file fails the pack, naming the tensor and the file.
  const std::vector<float> v = Values(64 * 300, 9);
  OnDiskTensor w = WriteOnDisk(dir, "cut.bin", v, {64, 300});
  std::filesystem::resize_file(w.path, 100);
  const Status st = GemvWeights::Pack(sgemm::WeightRows::Of(w.tensor), 300, 64, true, 1.0f, nullptr).status();
  EXPECT_EQ(st.code(), StatusCode::kIOError) << st.ToString();
  EXPECT_NE(st.message().find("initializer 'W'"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find(w.path), std::string::npos) << st.ToString();
}

// The fused LSTM's W and R of one direction (rows g*H + p*16 + u of [D, 4H, K], gate
// interleaved) read from the file a block at a time: the same floats as packed from memory,
// the payload never loaded, at hidden sizes with a partial panel and with blocks that cut a
// panel's run of rows (K = 700: 93 rows a block); a non-finite weight still shows.
TEST(WeightStream, LstmWeightsFromTheFilePackTheSameFloats) {
  TempDir dir;
  ThreadPool pool2(2);
  uint32_t seed = 90;
  for (auto [hidden, input] : {std::pair<int64_t, int64_t>{1, 3}, {17, 33}, {40, 700}, {130, 5}, {256, 128}}) {
    const int64_t H = hidden, I = input, D = 2;
    std::vector<float> w = Values(D * 4 * H * I, seed++), r = Values(D * 4 * H * H, seed++);
    const std::vector<float> b = Values(D * 8 * H, seed++);
    if (H == 17) w[4 * H * I + 7] = NAN;  // direction 1
    for (int64_t d = 0; d < D; ++d) {
      const auto want = lstm_fused::Pack(sgemm::WeightRows{w.data(), nullptr}, sgemm::WeightRows{r.data(), nullptr}, d,
                                         b.data() + d * 8 * H, H, I);
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
        SCOPED_TRACE("H=" + std::to_string(H) + " I=" + std::to_string(I) + " d=" + std::to_string(d) +
                     (pool ? " pool" : ""));
        OnDiskTensor wf = WriteOnDisk(dir, "w.bin", w, {D, 4 * H, I});
        OnDiskTensor rf = WriteOnDisk(dir, "r.bin", r, {D, 4 * H, H});
        ASSERT_FALSE(wf.path.empty() || rf.path.empty());
        // Through GemvWeights::PackRows with the pool, as a session's packer would.
        const auto got_w = GemvWeights::PackRows(sgemm::WeightRows::Of(wf.tensor), d * 4 * H, I, I, want->w.n(),
                                                 RowsOf(H).data(), want->w.bias(), pool);
        const auto got = lstm_fused::Pack(sgemm::WeightRows::Of(wf.tensor), sgemm::WeightRows::Of(rf.tensor), d,
                                          b.data() + d * 8 * H, H, I);
        ASSERT_TRUE(got.ok() && got_w.ok()) << got.status().ToString() << got_w.status().ToString();
        for (const auto& [g, e] : {std::pair<const GemvWeights*, const GemvWeights*>{&got->w, &want->w},
                                   {&got->r, &want->r},
                                   {&*got_w, &want->w}}) {
          ASSERT_EQ(g->panels(), e->panels());
          for (int64_t p = 0; p < e->panels(); ++p)
            ASSERT_EQ(0, std::memcmp(g->panel(p), e->panel(p), sizeof(float) * e->k() * e->panel_width(p)))
                << "panel " << p;
          ASSERT_EQ(0, std::memcmp(g->bias(), e->bias(), sizeof(float) * e->panels() * kGemvPanel));
          EXPECT_EQ(g->all_finite(), e->all_finite());
        }
        EXPECT_EQ(got->w.all_finite(), !(H == 17 && d == 1));
        EXPECT_EQ(wf.source->loaded(), 0u);
        EXPECT_EQ(rf.source->loaded(), 0u);
      }
    }
  }
  // A direction past the weight, and a cut file: errors naming the problem.
  const std::vector<float> w = Values(4 * 16 * 8, 3);
  OnDiskTensor wf = WriteOnDisk(dir, "w.bin", w, {1, 64, 8});
  const auto rows = RowsOf(16);
  Status st =
      GemvWeights::PackRows(sgemm::WeightRows::Of(wf.tensor), 64, 8, 8, kGemvPanel, rows.data(), nullptr).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("past the 512 elements"), std::string::npos) << st.ToString();
  std::filesystem::resize_file(wf.path, 100);
  st = GemvWeights::PackRows(sgemm::WeightRows::Of(wf.tensor), 0, 8, 8, kGemvPanel, rows.data(), nullptr).status();
  EXPECT_EQ(st.code(), StatusCode::kIOError) << st.ToString();
  EXPECT_NE(st.message().find(wf.path), std::string::npos) << st.ToString();
}

// all_finite sees a NaN or an Inf at every position, in the vector loop and in the masked
// tail: packed from memory (the check runs on the panels) and from the file (on the rows read).
TEST(WeightStream, GemvAllFiniteSeesEveryPosition) {
  TempDir dir;
  const int64_t k = 7, n = 37;  // 259 source floats: 16 vectors and a 3-float tail
  const std::vector<float> v = Values(k * n, 21);
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) rows[j] = j;
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    for (int64_t at = 0; at < k * n; ++at) {
      std::vector<float> b = v;
      b[at] = bad;
      const auto mem = GemvWeights::Pack(b.data(), k, n, /*b_is_nk=*/true, 1.0f, nullptr);
      ASSERT_TRUE(mem.ok()) << mem.status().ToString();
      EXPECT_FALSE(mem->all_finite()) << bad << " at " << at;
      OnDiskTensor w = WriteOnDisk(dir, "f.bin", b, {n, k});
      const auto file = GemvWeights::PackRows(sgemm::WeightRows::Of(w.tensor), 0, k, k, n, rows.data(), nullptr);
      ASSERT_TRUE(file.ok()) << file.status().ToString();
      EXPECT_FALSE(file->all_finite()) << bad << " at " << at;
    }
  }
  OnDiskTensor w = WriteOnDisk(dir, "f.bin", v, {n, k});
  const auto file = GemvWeights::PackRows(sgemm::WeightRows::Of(w.tensor), 0, k, k, n, rows.data(), nullptr);
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE(file->all_finite());
  EXPECT_TRUE(GemvWeights::Pack(v.data(), k, n, true, 1.0f, nullptr)->all_finite());
}

// The bf16 panels as the packer made them before it was vectorised: every word from
// FloatToBf16 of scale * B (0 past K and N), kp pair rows padded to kps with zeros.
std::vector<uint32_t> RefBf16Words(const std::vector<float>& b, int64_t K, int64_t N, bool trans, float scale) {
  const int64_t kp = (K + 1) / 2, kps = (kp + 15) / 16 * 16, panels = (N + kBf16NR - 1) / kBf16NR;
  std::vector<uint32_t> out(static_cast<size_t>(panels * kps * kBf16NR), 0u);
  auto at = [&](int64_t k, int64_t n) -> float {
    if (k >= K) return 0.0f;
    return scale * (trans ? b[n * K + k] : b[k * N + n]);
  };
  for (int64_t pn = 0; pn < panels; ++pn)
    for (int64_t q = 0; q < kp; ++q)
      for (int64_t j = 0; j < kBf16NR; ++j) {
        const int64_t n = pn * kBf16NR + j;
        if (n < N)
          out[pn * kps * kBf16NR + q * kBf16NR + j] = static_cast<uint32_t>(FloatToBf16(at(2 * q, n))) |
                                                      (static_cast<uint32_t>(FloatToBf16(at(2 * q + 1, n))) << 16);
      }
  return out;
}

std::vector<uint32_t> Words(const PackedBf16B& p) {
  return std::vector<uint32_t>(p.panel(0), p.panel(0) + p.panels * p.panel_stride());
}

// Values with the cases rounding must keep: NaNs of both signs, infinities, a float that
// rounds up to infinity, a subnormal, -0, and halfway cases that round to even.
std::vector<float> Bf16Values(int64_t n, uint32_t seed) {
  std::vector<float> v = Values(n, seed);
  const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                           -std::numeric_limits<float>::quiet_NaN(),
                           INFINITY,
                           -INFINITY,
                           3.4e38f,
                           1e-40f,
                           -0.0f,
                           1.00390625f,
                           1.01171875f};
  for (size_t i = 0; i < sizeof(special) / sizeof(special[0]) && i * 7 < v.size(); ++i) v[i * 7] = special[i];
  return v;
}

// PackBf16 (vectorised, from memory and from the file, 1 and 2 threads) gives the scalar
// packer's words at edge sizes: K = 1, odd K, K past one 16-pair step, N = 1, a panel + 1,
// two panels + 1, and one large enough (over 2^20 floats) that the pool splits it.
TEST(WeightStream, Bf16PanelsMatchTheScalarPacker) {
  TempDir dir;
  ThreadPool pool2(2);
  uint32_t seed = 100;
  for (auto [k, n] :
       {std::pair<int64_t, int64_t>{1, 1}, {2, 33}, {7, 32}, {33, 70}, {64, 100}, {301, 65}, {1100, 1000}}) {
    for (bool trans : {false, true}) {
      for (float scale : {1.0f, 0.5f}) {
        const std::vector<float> v = Bf16Values(k * n, seed++);
        const std::vector<uint32_t> want = RefBf16Words(v, k, n, trans, scale);
        const auto mem = PackBf16(v.data(), k, n, trans, scale);
        ASSERT_TRUE(mem.ok()) << mem.status().ToString();
        ASSERT_EQ(Words(*mem), want) << "K=" << k << " N=" << n << " trans=" << trans << " scale=" << scale;
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
          OnDiskTensor w = WriteOnDisk(dir, "bf.bin", v, trans ? Shape{n, k} : Shape{k, n});
          ASSERT_FALSE(w.path.empty());
          const auto file = PackBf16(sgemm::WeightRows::Of(w.tensor), k, n, trans, scale, pool);
          ASSERT_TRUE(file.ok()) << file.status().ToString();
          EXPECT_EQ(Words(*file), want) << "from the file: K=" << k << " N=" << n << " trans=" << trans;
          EXPECT_EQ(w.source->loaded(), 0u);
        }
      }
    }
  }
}

// A row reorder (as the bf16 NHWC conv turns OIHW rows into im2col order) packs what the
// reordered copy packs; a cut file fails naming the tensor and the file.
TEST(WeightStream, Bf16ReorderedRowsAndErrors) {
  TempDir dir;
  const int64_t n = 40, src_row = 27, k = 30;  // each row reversed into the first 27 of 30
  const std::vector<float> v = Bf16Values(n * src_row, 5);
  auto reorder = [](const float* src, float* dst, const void* ctx) {
    const int64_t len = *static_cast<const int64_t*>(ctx);
    for (int64_t i = 0; i < 30; ++i) dst[i] = i < len ? src[len - 1 - i] : 0.0f;
  };
  std::vector<float> copy(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r) reorder(v.data() + r * src_row, copy.data() + r * k, &src_row);
  const std::vector<uint32_t> want = RefBf16Words(copy, k, n, /*trans=*/true, 1.0f);
  OnDiskTensor w = WriteOnDisk(dir, "r.bin", v, {n, src_row});
  const auto got = PackBf16Rows(sgemm::WeightRows::Of(w.tensor), src_row, reorder, &src_row, k, n, /*trans=*/true);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(Words(*got), want);
  EXPECT_EQ(w.source->loaded(), 0u);

  for (bool trans : {true, false}) {
    OnDiskTensor cut = WriteOnDisk(dir, "cut.bin", v, {n, src_row});
    std::filesystem::resize_file(cut.path, 40);
    const Status st =
        PackBf16(sgemm::WeightRows::Of(cut.tensor), trans ? src_row : n, trans ? n : src_row, trans).status();
    EXPECT_EQ(st.code(), StatusCode::kIOError) << st.ToString();
    EXPECT_NE(st.message().find("initializer 'W'"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find(cut.path), std::string::npos) << st.ToString();
  }
  // Dimensions that do not match the tensor are refused.
  EXPECT_EQ(PackBf16(sgemm::WeightRows::Of(w.tensor), 26, n, true).status().code(), StatusCode::kInvalidArgument);
}

// Split-row weights (block_bf16::PackSplitWeights: [W; W; W - bf16(W)] per row, the fused
// block's and the early 1x1 convs' bf16x3 B) read from the file pack the words they pack from
// memory, without loading the payload; odd k pads each segment to whole pairs.
TEST(WeightStream, SplitWeightsFromTheFilePackTheSameWords) {
  TempDir dir;
  const int64_t n = 70, k = 37;
  const std::vector<float> v = Values(n * k, 9);
  const auto want = block_bf16::PackSplitWeights(v.data(), n, k);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  OnDiskTensor w = WriteOnDisk(dir, "s.bin", v, {n, k});
  ThreadPool pool(2);
  const auto got = block_bf16::PackSplitWeights(sgemm::WeightRows::Of(w.tensor), n, k, &pool);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->K, 2 * block_bf16::SplitPairsPerRow(k));
  EXPECT_EQ(Words(*got), Words(*want));
  EXPECT_EQ(w.source->loaded(), 0u);
}

// A weight whose file was cut short after the import: the packer fails with an I/O error
// naming the tensor and the file, and the payloads' LoadAll (which fails the session's
// creation) reports it as well. A shape that does not match the tensor is refused.
TEST(WeightStream, ATruncatedFileFailsThePackNamingTheTensorAndFile) {
  TempDir dir;
  ThreadPool pool2(2);
  const std::vector<float> v = Values(64 * 64 * 9, 7);
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
    for (bool conv : {true, false}) {
      OnDiskTensor w = WriteOnDisk(dir, "cut.bin", v, {64, 64 * 9});
      ASSERT_FALSE(w.path.empty());
      std::filesystem::resize_file(w.path, 12 + v.size() * sizeof(float) / 2);
      const sgemm::WeightRows rows = sgemm::WeightRows::Of(w.tensor);
      const Status st =
          conv ? sgemm::PackConvWeights(rows, 64, 64, 9, pool).status() : sgemm::PackB(rows, 64, 64 * 9, pool).status();
      EXPECT_EQ(st.code(), StatusCode::kIOError) << st.ToString();
      EXPECT_NE(st.message().find("initializer 'W'"), std::string::npos) << st.ToString();
      EXPECT_NE(st.message().find(w.path), std::string::npos) << st.ToString();
      const Status all = w.source->LoadAll();
      EXPECT_EQ(all.code(), StatusCode::kIOError) << all.ToString();
    }
  }
  OnDiskTensor w = WriteOnDisk(dir, "w.bin", v, {64, 64 * 9});
  const Status st = sgemm::PackConvWeights(sgemm::WeightRows::Of(w.tensor), 64, 64, 3).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_EQ(sgemm::PackB(sgemm::WeightRows::Of(w.tensor), 63, 64 * 9).status().code(), StatusCode::kInvalidArgument);
}

// The per-thread reader the packers share: resident rows come back in place (no scratch),
// rows on disk are read into its own block; a block over its bound, a null source and a
// failed read are errors that name the packer (and, for the read, the tensor and file).
TEST(WeightStream, RowReaderReadsInPlaceOrFromTheFile) {
  TempDir dir;
  const std::vector<float> v = Values(40 * 30, 11);
  sgemm::WeightRows resident;
  resident.data = v.data();
  sgemm::RowReader in_place(resident, 4 * 30, "test packer");
  auto r = in_place.Rows(7, 4, 30);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, v.data() + 7 * 30) << "resident rows are returned in place";

  OnDiskTensor w = WriteOnDisk(dir, "rows.bin", v, {40, 30});
  ASSERT_FALSE(w.path.empty());
  const sgemm::WeightRows file = sgemm::WeightRows::Of(w.tensor);
  ASSERT_NE(file.file, nullptr);
  sgemm::RowReader reader(file, 4 * 30, "test packer");
  for (int64_t r0 : {0, 1, 36}) {  // the first, an odd and the last block
    auto rows = reader.Rows(r0, 4, 30);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    EXPECT_EQ(0, std::memcmp(*rows, v.data() + r0 * 30, 4 * 30 * sizeof(float))) << "rows from " << r0;
  }
  auto one = reader.Rows(39, 1, 30);  // a single row, shorter than the block
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(0, std::memcmp(*one, v.data() + 39 * 30, 30 * sizeof(float)));
  EXPECT_TRUE(reader.Rows(5, 0, 30).ok()) << "an empty block reads nothing";
  EXPECT_EQ(w.source->loaded(), 0u) << "the reader must not load the payload";

  const Status big = reader.Rows(0, 5, 30).status();
  EXPECT_EQ(big.code(), StatusCode::kInvalidArgument) << big.ToString();
  EXPECT_NE(big.message().find("test packer"), std::string::npos) << big.ToString();
  EXPECT_EQ(reader.Rows(38, 4, 30).status().code(), StatusCode::kInvalidArgument) << "past the tensor's end";

  std::filesystem::resize_file(w.path, 12 + 20 * 30 * sizeof(float));
  const Status cut = reader.Rows(30, 4, 30).status();
  EXPECT_EQ(cut.code(), StatusCode::kIOError) << cut.ToString();
  EXPECT_NE(cut.message().find(w.path), std::string::npos) << cut.ToString();
  EXPECT_EQ(w.source->LoadAll().code(), StatusCode::kIOError);

  // Nothing to read from: the packers refuse it before they make a reader.
  const Status null_w = sgemm::PackConvWeights(sgemm::WeightRows{}, 4, 4, 9).status();
  EXPECT_EQ(null_w.code(), StatusCode::kInvalidArgument) << null_w.ToString();
}

}  // namespace
}  // namespace strata
