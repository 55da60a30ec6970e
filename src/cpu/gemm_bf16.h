// bf16 fast-math GEMM (session option precision=bf16): operands rounded to bf16
// (round-to-nearest-even), products summed in fp32 by AVX512_BF16's vdpbf16ps, bias
// and Relu/Clip fused into the store. Constant operands are packed once at session
// creation; run-time operands are converted per cache block.
//
// Packed layouts (uint32 = one bf16 pair, element k in the low half, k+1 in the high):
//   B panels: [panel of 32 columns][K pair][32 columns]   (what vdpbf16ps multiplies)
//   A tiles:  [tile of 12 rows][K pair][12 rows]          (PackBf16A: NCHW Conv weights)
//   run-time A (GemmBf16*, per K chunk): [tile][12 rows][K pairs, padded to 16]; a plain
//     fp32 A read by several column blocks: pair rows for the whole product, made once
//   indirect A (GemmBf16Indirect): read in place, one pointer per row and K segment
//   The micro-kernel broadcasts one pair per row and multiplies it with a B panel row.
// An odd K is padded with a zero element, a partial panel/tile with zero columns/rows.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>

#include "core/kernel.h"
#include "cpu/sgemm.h"

namespace strata {

struct FusedActivation;  // cpu/xnnpack_util.h

inline constexpr int kBf16MR = 12;  // rows of the register tile (24 zmm accumulators)
inline constexpr int kBf16NR = 32;  // columns of the register tile (two zmm)

// True when the CPU (and OS) support avx512f/bw/vl + avx512_bf16 and neither
// STRATA_CPU_DISABLE (comma list containing "avx512_bf16") nor STRATA_FORCE_ISA
// ("avx2"/"scalar"; both read once per process) nor SetBf16DisabledForTesting(true) turned the kernels off.
bool Bf16GemmAvailable();
// Reserves the calling thread's reusable bf16 GEMM buffers (fill tile, indirect row
// pointers, packed A tiles) for row blocks of up to kMc rows and kernels of up to 49 taps, so
// a pool worker (which runs it at start, KernelRegistry::thread_init) does not allocate on
// its first bf16 product in a later run.
void PrepareBf16ThreadScratch();
void SetBf16DisabledForTesting(bool disabled);

// Diagnostic for finding where a model's bf16 error comes from (docs/benchmarks.md): with
// STRATA_BF16_NODES set to a comma list of prefixes, only nodes whose name starts with one
// of them run on the bf16 kernels (e.g. "/layer3/,/fc/"), the rest stay fp32. Unset or
// empty: every node.
bool Bf16NodeSelected(const Node& node);

// False when STRATA_BF16_SPLIT is 0: the GEMMs that bf16 sessions run on split rows on AMX
// to keep fp32's accuracy (the fused block's mid-width 1x1s, early 1x1 convs of deep nets)
// stay fp32 instead. Read at each kernel creation, so sessions of one process can differ
// (A/B timing in one process).
bool Bf16SplitRowsEnabled();

// Converts one float to bf16 bits with round-to-nearest-even (NaN stays NaN).
uint16_t FloatToBf16(float f);
float Bf16ToFloat(uint16_t h);

// B [K, N] (row-major; [N, K] when trans) times `scale`, packed into 32-column panels.
// Each panel holds kps >= kp pair rows, kp rounded up to 16 with zero rows: an AMX tile
// reads B 16 pairs at a time (bf16_internal::AmxBlock), and the zeros make the K tail exact.
struct PackedBf16B {
  int64_t K = 0, N = 0;
  int64_t kp = 0;      // K pairs: ceil(K / 2)
  int64_t kps = 0;     // pair rows per panel in memory: kp rounded up to 16
  int64_t panels = 0;  // ceil(N / 32)
  std::shared_ptr<Buffer> buf;
  int64_t panel_stride() const { return kps * kBf16NR; }
  const uint32_t* panel(int64_t p) const { return static_cast<const uint32_t*>(buf->data()) + p * panel_stride(); }
};
Result<PackedBf16B> PackBf16(const float* b, int64_t K, int64_t N, bool trans, float scale = 1.0f);
// The same, B read through `b`: a B still in the model file is read a block of rows at a time
// (32 rows of B^T per panel, or blocks of whole rows of B), never loaded whole. With a pool,
// a large B's panels (or row blocks) are split over its threads. The words are the same.
// Also kIOError (naming the tensor and the file) when a read fails.
Result<PackedBf16B> PackBf16(const sgemm::WeightRows& b, int64_t K, int64_t N, bool trans, float scale = 1.0f,
                             ThreadPool* pool = nullptr);
// Turns one source row (src_row floats) into one row of B^T (K floats): a conv weight's
// layout change ([C][KH][KW] -> [KH][KW * C] padded) done per panel instead of on a copy.
using Bf16RowReorder = void (*)(const float* src, float* dst, const void* ctx);
// PackBf16 of B^T [N, K] (trans) whose row n is reorder(row n of `b`, whose rows are src_row
// floats), or of `b` itself when reorder is null (then src_row is B's row length).
Result<PackedBf16B> PackBf16Rows(const sgemm::WeightRows& b, int64_t src_row, Bf16RowReorder reorder, const void* ctx,
                                 int64_t K, int64_t N, bool trans, float scale = 1.0f, ThreadPool* pool = nullptr);

// A [M, K] (row-major, row stride K) packed into 12-row tiles: constant left operands
// (Conv weights, where C = W x im2col(X)).
struct PackedBf16A {
  int64_t M = 0, K = 0;
  int64_t kp = 0;     // ceil(K / 2)
  int64_t tiles = 0;  // ceil(M / 12)
  std::shared_ptr<Buffer> buf;
  const uint32_t* tile(int64_t t) const { return static_cast<const uint32_t*>(buf->data()) + t * kp * kBf16MR; }
};
Result<PackedBf16A> PackBf16A(const float* a, int64_t M, int64_t K);

// Applied once per output element after the last K block: + bias, + residual, then
// clamp, then (GemmBf16* drivers only) GELU over the finished block while it is in cache.
struct Bf16Epilogue {
  const float* bias = nullptr;  // [N] (per column) or [M] when bias_per_row
  bool bias_per_row = false;
  const float* residual = nullptr;  // [M, N] with row stride ldr, added after the bias
  int64_t ldr = 0;
  float min = -std::numeric_limits<float>::infinity();
  float max = std::numeric_limits<float>::infinity();
  enum class Gelu { kNone, kErf, kTanh } gelu = Gelu::kNone;
  // SiLU or HardSwish before the clamp (NHWC convs; the AVX512_BF16 kernel only: the AMX
  // paths keep kClamp, MakeNhwcBf16Conv declines the others there).
  ActKind kind = ActKind::kClamp;
  // C is read: C += A x B, then the rest of the epilogue. Lets an output written over its
  // residual (OpKernel::InPlaceInput) add the product to it; residual must then be null.
  bool accumulate = false;
};

// C[M, N] (row stride ldc) = A x B + epilogue, where A is fp32 [M, K] with row stride lda
// (or, with trans_a, [K, M] with row stride lda) and B was packed by PackBf16. Parallel
// over M x N blocks on `pool` (may be null). Errors (unavailable CPU, bad strides) start
// with node.Describe().
Status GemmBf16(const Node& node, int64_t M, const float* a, int64_t lda, bool trans_a, const PackedBf16B& b, float* c,
                int64_t ldc, const Bf16Epilogue& ep, ThreadPool* pool);

// im2col-style A source: writes rows [row0, row0 + rows) x columns [k0, k0 + kc) of A
// as fp32, row-major with row stride ld, into dst (called per 12-row tile and K chunk).
using Bf16RowsFn = void (*)(const void* ctx, int64_t row0, int64_t rows, int64_t k0, int64_t kc, float* dst,
                            int64_t ld);

// GemmBf16 with A produced by `fill` (NHWC Conv: the gather of im2col rows): each tile
// is gathered into an L1-sized fp32 scratch and rounded to bf16 pairs at once.
Status GemmBf16Gathered(const Node& node, int64_t M, Bf16RowsFn fill, const void* fill_ctx, const PackedBf16B& b,
                        float* c, int64_t ldc, const Bf16Epilogue& ep, ThreadPool* pool);

// A source that is already bf16: writes K pairs [kp0, kp0 + kpc) of rows [row0, row0 + rows)
// of A as bf16 pairs (element 2k in the low half), row-major with row stride ldp pairs, into
// dst (called per 12-row tile and K chunk). Pairs past kpc need not be written.
using Bf16PairRowsFn = void (*)(const void* ctx, int64_t row0, int64_t rows, int64_t kp0, int64_t kpc, uint32_t* dst,
                                int64_t ldp);

// GemmBf16 with A produced by `fill` as bf16 pairs (NHWC Conv: im2col rows copied from a
// bf16 copy of X, so each input value is rounded once, not once per tap that reads it).
Status GemmBf16GatheredPairs(const Node& node, int64_t M, Bf16PairRowsFn fill, const void* fill_ctx,
                             const PackedBf16B& b, float* c, int64_t ldc, const Bf16Epilogue& ep, ThreadPool* pool);

// A read in place as bf16 pairs (NHWC Conv over a zero-padded bf16 copy of X: no gather, no
// packing). Each row's K is `segs` segments of seg_pairs consecutive pairs (one kernel row
// of a receptive field); `rows` writes, for rows [row0, row0 + n) (n <= 12), the address of
// row r's segment s to dst[s * 12 + r].
struct Bf16IndirectA {
  void (*rows)(const void* ctx, int64_t row0, int64_t n, const uint32_t** dst) = nullptr;
  const void* ctx = nullptr;
  int64_t segs = 0, seg_pairs = 0;
};

// GemmBf16 with A read through `a` (b.K must be 2 * a.segs * a.seg_pairs).
Status GemmBf16Indirect(const Node& node, int64_t M, const Bf16IndirectA& a, const PackedBf16B& b, float* c,
                        int64_t ldc, const Bf16Epilogue& ep, ThreadPool* pool);

// MatMul/Gemm with a constant float B when bf16 fast math applies; otherwise (option off,
// CPU without avx512_bf16, shapes it does not cover) the fp32 MakeFast* kernel.
Result<std::unique_ptr<OpKernel>> MakeBf16MatMul(const KernelInit& init);
Result<std::unique_ptr<OpKernel>> MakeBf16Gemm(const KernelInit& init);
// 2-D group-1 Conv with constant weights when bf16 fast math applies; otherwise MakeXnnConv.
Result<std::unique_ptr<OpKernel>> MakeBf16Conv(const KernelInit& init);
// Reserves the calling thread's packed-column buffer of MakeBf16Conv's kernel (see
// PrepareBf16ThreadScratch; run by pool workers at start).
void PrepareBf16ConvThreadScratch();
// True when MakeBf16Conv builds the bf16 kernel (the registry entry's `covers`).
bool Bf16ConvCovers(const KernelInit& init);
// Ungrouped strata.internal NhwcConv on the bf16 GEMM (conv_nhwc_bf16.cc) when bf16 fast
// math applies and at most kBf16ConvMaxConvsAfter convs follow it on the way to an output;
// kUnsupported otherwise (the caller keeps the fp32 kernels). Input 3, when present, is the
// fused residual (FuseNhwcConvResidual).
// Why: a deep CNN's output error grows from bf16 roundings made early, which every later
// conv amplifies (resnet50 with random weights: rounding only the input image already moves
// the output by 4.1-5.9e-2; with every conv on bf16, 8.7e-2-1.2e-1). So the early convs stay
// fp32 (their 3x3 ones run fast on Winograd). The bound is what keeps resnet50 within 1e-2
// on every seeded input tried, not just one: max relative error over 9 seeds 9.2e-3 (its
// 24-25-conv chains from layer3's first block stay fp32). The rule it replaces (also bf16
// on any map of at most 14x14, and 20 convs) put that block on bf16 and measured 9.6e-3 on
// seed 42 but 1.05-1.22e-2 on 6 of the 9. A shallow net keeps bf16 everywhere (resnet18's
// longest chain is 17 convs: 5.1-6.7e-3 with all on bf16).
inline constexpr int64_t kBf16ConvMaxConvsAfter = 23;
// Whether MakeNhwcBf16Conv would take an ungrouped conv: bf16 fast math applies to the
// node (session, CPU, STRATA_BF16_NODES) and the depth bound allows it. The fp32 Winograd
// kernels ask it, so a conv the bf16 GEMM leaves gets the kernel an fp32 session gives it.
bool NhwcBf16ConvTakes(const KernelInit& init);
Result<std::unique_ptr<OpKernel>> MakeNhwcBf16Conv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                   const FusedActivation& act);
// strata.internal FusedMatMul (bias, GELU or residual epilogue) on the bf16 GEMM when
// bf16 fast math applies (the registry entry's `covers`); otherwise the fp32 kernel.
bool Bf16FusedMatMulCovers(const KernelInit& init);
Result<std::unique_ptr<OpKernel>> MakeBf16FusedMatMul(const KernelInit& init);
// True if `k` is one of the bf16 kernels (tests: which implementation a factory chose).
bool IsBf16Kernel(const OpKernel& k);

// Registers the bf16 MatMul/Gemm/Conv kernels (impl "avx512_bf16"); they take precedence
// over the fp32 "xnnpack" kernels for the nodes they cover and pass the others on.
void RegisterBf16Kernels(KernelRegistry& r);

namespace bf16_internal {

// True when the bf16 GEMMs run on Intel AMX tiles (gemm_bf16_amx.cc): Bf16GemmAvailable(),
// a CPU with amx_tile + amx_bf16, Linux granted the tile state, and neither
// STRATA_CPU_DISABLE (containing "amx_bf16" or "amx_tile"; read once) nor
// SetAmxDisabledForTesting turned it off. Otherwise the AVX512_BF16 micro-kernel runs the
// same products.
bool AmxAvailable();
void SetAmxDisabledForTesting(bool disabled);
// Whether an indirect A whose kernel rows are seg_pairs pairs long can run on AMX tiles: a
// 16-pair step that ran into the next segment's rows of B would multiply them by the pad.
inline bool AmxTakesSegments(int64_t seg_pairs) { return seg_pairs % 16 == 0; }

// Marker base of the bf16 kernels (IsBf16Kernel). They name the tile kernel their products
// run on: "amx_bf16" where AmxAvailable(), else "avx512_bf16".
class Bf16KernelBase : public OpKernel {
 public:
  const char* ImplName() const override { return AmxAvailable() ? "amx_bf16" : "avx512_bf16"; }
};

// One K chunk (kpc pairs) of an m_rows x n_cols block of C. `a` points at the chunk of
// tile 0 ([kpc][12] per tile, tiles a_stride uint32 apart); `b` at the chunk of panel 0
// ([kpc][32] per panel, panels b_stride apart). accumulate: add C's current values;
// ep (non-null on the last chunk): bias, residual and clamp (not GELU), with the bias
// and residual offset by (m0, n0).
void Block(const uint32_t* a, int64_t a_stride, int64_t m_rows, const uint32_t* b, int64_t b_stride, int64_t n_cols,
           int64_t kpc, float* c, int64_t ldc, bool accumulate, const Bf16Epilogue* ep, int64_t m0, int64_t n0);

// Converts 32 floats of row k (lo) and row k+1 (hi; nullptr = zeros) into 32 bf16 pairs.
void PackPairs32(const float* lo, const float* hi, int n, uint32_t* dst);

// Block with A as m_rows rows of bf16 pairs a_rs uint32 apart (`a` at the chunk of row 0)
// instead of 12-row tiles: run-time A already rounded by its producer (the fused
// inverted-residual block, conv_nhwc_block_bf16.cc).
void BlockRows(const uint32_t* a, int64_t a_rs, int64_t m_rows, const uint32_t* b, int64_t b_stride, int64_t n_cols,
               int64_t kpc, float* c, int64_t ldc, bool accumulate, const Bf16Epilogue* ep, int64_t m0, int64_t n0);

// cs[rows16, panels * 32] (row stride ldcs floats) = (load_c ? cs : 0) + A x B over
// `steps` x 16 pairs of K: A is rows16 (a multiple of 16) rows of bf16 pairs ldp apart (ldp
// a multiple of 16), B `panels` 32-column panels b_stride uint32 apart, each at the chunk's
// first pair row. Loads the tile configuration and releases the tiles when done.
void AmxBlock(const uint32_t* a, int64_t ldp, int64_t rows16, const uint32_t* b, int64_t b_stride, int64_t panels,
              int64_t steps, float* cs, int64_t ldcs, bool load_c);

// c[rows, cols] = cs (+ c when ep.accumulate) + bias + residual, clamped to [ep.min, ep.max]
// (bias and residual offset by (m0, n0); GELU is the caller's).
void AmxEpilogue(const float* cs, int64_t ldcs, int64_t rows, int64_t cols, float* c, int64_t ldc,
                 const Bf16Epilogue& ep, int64_t m0, int64_t n0);

// Columns [n0, n0 + cols) (n0 a multiple of 32) of m rows of C = A x B + ep (bias,
// residual, clamp, accumulate; not GELU) on AMX, c pointing at the block's first element
// (row stride ldc) and the block's rows being rows [m0, m0 + m) of the product (the bias and
// residual offsets). A is read in place: m rows of bf16 pairs ldp words apart, ldp a
// multiple of 16 and at least b.kps, each row's pairs [b.kp, b.kps) zero (finite garbage
// there would be multiplied by B's zero pad, but an Inf or NaN would not vanish). The whole
// K runs in the tiles; each 32 x 32 block of C goes through an L1 scratch into the epilogue
// at once. Loads the tile configuration and releases the tiles when done.
void AmxRowsGemm(const uint32_t* a, int64_t ldp, int64_t m, const PackedBf16B& b, int64_t n0, int64_t cols, float* c,
                 int64_t ldc, const Bf16Epilogue& ep, int64_t m0);

// The same product (columns [n0, n0 + cols) of m rows, c at the block's first element, rows
// [m0, m0 + m) of the product) from m bf16 pair rows ldp words apart whose pairs [b.kp, ldp)
// are zero, on either tile kernel: on AMX with ldp a multiple of 16 and at least b.kps the
// tiles read the rows in place (AmxRowsGemm); otherwise 96-row blocks in K chunks (BlockRows).
void PairRowsProduct(const uint32_t* a, int64_t ldp, int64_t m, const PackedBf16B& b, int64_t n0, int64_t cols,
                     float* c, int64_t ldc, const Bf16Epilogue& ep, int64_t m0);

}  // namespace bf16_internal

}  // namespace strata
