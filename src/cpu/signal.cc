// Signal ops (ai.onnx opset 17): DFT, STFT, Hann/Hamming/Blackman windows and
// MelWeightMatrix. Transforms are computed in double (radix-2 FFT for power-of-two lengths,
// Bluestein's algorithm for other long ones, a direct sum with an exact twiddle table for
// short ones), so bins that are mathematically zero come out below float resolution; this
// is what the float64 numpy reference produces.
#include <algorithm>
#include <bit>
#include <cmath>
#include <complex>
#include <numbers>
#include <string>
#include <vector>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "cpu/fn_kernel_def.h"
#include "cpu/register.h"

namespace strata {
namespace {

using Cd = std::complex<double>;

// Reads a scalar (or 1-element) integer tensor.
Result<int64_t> ScalarInt(const Tensor* t, const Node& node, const char* what) {
  if (!t) return InvalidArgument(node.Describe(), ": input '", what, "' is missing");
  if (t->num_elements() != 1)
    return InvalidArgument(node.Describe(), ": '", what, "' must be a scalar, got shape ", ShapeToString(t->shape()));
  if (t->dtype() == DataType::kInt64) return t->data<int64_t>()[0];
  if (t->dtype() == DataType::kInt32) return static_cast<int64_t>(t->data<int32_t>()[0]);
  return InvalidArgument(node.Describe(), ": '", what, "' must be int32 or int64, got ", DataTypeName(t->dtype()));
}

Result<double> ScalarFloat(const Tensor* t, const Node& node, const char* what) {
  if (!t) return InvalidArgument(node.Describe(), ": input '", what, "' is missing");
  if (t->num_elements() != 1)
    return InvalidArgument(node.Describe(), ": '", what, "' must be a scalar, got shape ", ShapeToString(t->shape()));
  double v = 0;
  const bool ok =
      DispatchNumeric(t->dtype(), [&]<typename T>() { v = static_cast<double>(static_cast<float>(t->data<T>()[0])); });
  if (t->dtype() == DataType::kDouble) v = t->data<double>()[0];
  if (!ok) return InvalidArgument(node.Describe(), ": '", what, "' has unsupported dtype ", DataTypeName(t->dtype()));
  return v;
}

Status CheckFloatDtype(const Tensor& t, const Node& node, const char* what) {
  if (t.dtype() == DataType::kFloat || t.dtype() == DataType::kDouble || t.dtype() == DataType::kFloat16 ||
      t.dtype() == DataType::kBFloat16)
    return Status::Ok();
  return InvalidArgument(node.Describe(), ": '", what, "' must be a float tensor, got ", DataTypeName(t.dtype()));
}

double LoadD(const Tensor& t, int64_t i) {
  double v = 0;
  DispatchNumeric(t.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, double>) {
      v = t.data<double>()[i];
    } else {
      v = static_cast<double>(static_cast<float>(t.data<T>()[i]));
    }
  });
  return v;
}

void StoreD(Tensor& t, int64_t i, double v) {
  DispatchNumeric(t.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, double>) {
      t.mutable_data<double>()[i] = v;
    } else if constexpr (std::is_floating_point_v<T>) {
      t.mutable_data<T>()[i] = static_cast<T>(v);
    } else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      t.mutable_data<T>()[i] = T(static_cast<float>(v));
    } else {
      t.mutable_data<T>()[i] = static_cast<T>(v);
    }
  });
}

// In-place iterative radix-2 FFT of a[0, n); n must be a power of two and tw the twiddles
// for n (FillTwiddles). inverse: conjugate twiddles, no 1/n.
void Fft(Cd* a, size_t n, const Cd* tw, bool inverse) {
  for (size_t i = 1, j = 0; i < n; ++i) {  // bit-reversal permutation
    size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  for (size_t len = 2; len <= n; len <<= 1) {
    const size_t step = n / len;
    for (size_t i = 0; i < n; i += len) {
      for (size_t k = 0; k < len / 2; ++k) {
        const Cd w = inverse ? std::conj(tw[k * step]) : tw[k * step];
        const Cd u = a[i + k], v = a[i + k + len / 2] * w;
        a[i + k] = u + v;
        a[i + k + len / 2] = u - v;
      }
    }
  }
}

// tw[i] = exp(-2 pi i / n), i < n.
void FillTwiddles(Cd* tw, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double a = -2.0 * std::numbers::pi * static_cast<double>(i) / static_cast<double>(n);
    tw[i] = Cd(std::cos(a), std::sin(a));
  }
}

bool PowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// Lengths up to this that are not powers of two use the direct sum (exact twiddle index,
// what the small conformance cases were checked with); longer ones Bluestein's algorithm.
constexpr int64_t kDirectMax = 64;

// The DFT of one length n (forward or inverse), planned once per node call: a radix-2 FFT
// for powers of two from 8; Bluestein's chirp-z for other lengths above kDirectMax, which
// turns the DFT into a power-of-two circular convolution, O(n log n) (the direct O(n^2) sum
// needs 10^12 steps, about 40 minutes, for a one-sample input with dft_length 10^6 + 3, and
// dft_length may be 2^30); the direct sum otherwise.
// Buffers come from the session allocator, so the memory cap bounds them. Not thread-safe.
class DftPlan {
 public:
  Status Init(int64_t n, bool inverse, Allocator* alloc, const Node& node) {
    n_ = n;
    inverse_ = inverse;
    if (n >= 8 && PowerOfTwo(n)) {
      kind_ = Kind::kFft;
      m_ = n;
    } else if (n > kDirectMax) {
      kind_ = Kind::kBluestein;
      m_ = 1;
      while (m_ < 2 * n - 1) m_ <<= 1;
    } else {
      kind_ = Kind::kDirect;
      m_ = n;
    }
    ASSIGN_OR_RETURN(tw_, Buffer(m_, alloc, node, "twiddles"));
    ASSIGN_OR_RETURN(in_, Buffer(n_, alloc, node, "signal"));
    ASSIGN_OR_RETURN(work_, Buffer(m_, alloc, node, "spectrum"));
    FillTwiddles(Data(tw_), m_);
    if (kind_ != Kind::kBluestein) return Status::Ok();
    // c_j = exp(-+ pi i j^2 / n): j^2 is reduced mod 2n first (the chirp's period), so the
    // angle stays exact for large j. b = conj(c) laid out for a circular convolution of
    // length m (b[m - j] = b[j]), transformed once.
    ASSIGN_OR_RETURN(chirp_, Buffer(n_, alloc, node, "chirp"));
    ASSIGN_OR_RETURN(kernel_, Buffer(m_, alloc, node, "chirp spectrum"));
    Cd* c = Data(chirp_);
    Cd* b = Data(kernel_);
    const unsigned __int128 period = 2 * static_cast<unsigned __int128>(n);
    for (int64_t j = 0; j < n; ++j) {
      const auto r =
          static_cast<double>(static_cast<unsigned __int128>(j) * static_cast<unsigned __int128>(j) % period);
      const double a = (inverse ? 1.0 : -1.0) * std::numbers::pi * r / static_cast<double>(n);
      c[j] = Cd(std::cos(a), std::sin(a));
    }
    std::fill(b, b + m_, Cd(0, 0));
    b[0] = std::conj(c[0]);
    for (int64_t j = 1; j < n; ++j) b[j] = b[m_ - j] = std::conj(c[j]);
    Fft(b, static_cast<size_t>(m_), Data(tw_), false);
    return Status::Ok();
  }

  // The signal to transform: n values, filled by the caller before Run.
  Cd* input() { return Data(in_); }

  // Transforms input() and returns its first `bins` (<= n) bins, divided by n when inverse.
  const Cd* Run(int64_t bins) {
    Cd* in = Data(in_);
    Cd* out = Data(work_);
    switch (kind_) {
      case Kind::kFft:
        std::copy(in, in + n_, out);
        Fft(out, static_cast<size_t>(n_), Data(tw_), inverse_);
        break;
      case Kind::kBluestein: {
        const Cd* c = Data(chirp_);
        const Cd* b = Data(kernel_);
        for (int64_t j = 0; j < n_; ++j) out[j] = in[j] * c[j];
        std::fill(out + n_, out + m_, Cd(0, 0));
        Fft(out, static_cast<size_t>(m_), Data(tw_), false);
        for (int64_t j = 0; j < m_; ++j) out[j] *= b[j];
        Fft(out, static_cast<size_t>(m_), Data(tw_), true);
        const double inv_m = 1.0 / static_cast<double>(m_);
        for (int64_t k = 0; k < bins; ++k) out[k] *= c[k] * inv_m;
        break;
      }
      case Kind::kDirect: {
        const Cd* tw = Data(tw_);
        for (int64_t k = 0; k < bins; ++k) {
          Cd acc(0, 0);
          int64_t idx = 0;  // (j * k) mod n, updated incrementally to avoid overflow
          for (int64_t j = 0; j < n_; ++j) {
            acc += in[j] * (inverse_ ? std::conj(tw[idx]) : tw[idx]);
            idx += k;
            if (idx >= n_) idx %= n_;
          }
          out[k] = acc;
        }
        break;
      }
    }
    if (inverse_)
      for (int64_t k = 0; k < bins; ++k) out[k] /= static_cast<double>(n_);
    return out;
  }

 private:
  enum class Kind { kFft, kBluestein, kDirect };
  static Cd* Data(Tensor& t) { return reinterpret_cast<Cd*>(t.mutable_data<double>()); }
  static Result<Tensor> Buffer(int64_t count, Allocator* alloc, const Node& node, const char* what) {
    auto t = Tensor::Allocate(DataType::kDouble, {2 * std::max<int64_t>(count, 1)}, alloc);
    if (!t.ok()) return MakeStatus(t.status().code(), node.Describe(), ": DFT ", what, ": ", t.status().message());
    return std::move(t).value();
  }

  Kind kind_ = Kind::kDirect;
  int64_t n_ = 0, m_ = 0;
  bool inverse_ = false;
  Tensor tw_, in_, work_, chirp_, kernel_;
};

Status DftOp(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  if (!x) return InvalidArgument(node.Describe(), ": input is missing");
  RETURN_IF_ERROR(CheckFloatDtype(*x, node, "input"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  if (rank < 2 || (x->shape().back() != 1 && x->shape().back() != 2))
    return InvalidArgument(node.Describe(),
                           ": input must have rank >= 2 with last dimension 1 (real) or 2 (complex), got ",
                           ShapeToString(x->shape()));
  // Opset 20 moved the axis from an attribute (default 1) to an optional scalar input
  // (default -2, the last signal axis).
  int64_t axis = node.GetInt("axis", 1);
  if (node.opset >= 20) {
    axis = -2;
    if (ctx.input(2) && ctx.input(2)->num_elements() > 0) {
      ASSIGN_OR_RETURN(axis, ScalarInt(ctx.input(2), node, "axis"));
    }
  }
  const int64_t given_axis = axis;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank - 1)
    return InvalidArgument(node.Describe(), ": axis ", given_axis, " is out of range for input shape ",
                           ShapeToString(x->shape()));
  const bool inverse = node.GetInt("inverse", 0) != 0;
  const bool onesided = node.GetInt("onesided", 0) != 0;
  const bool complex_in = x->shape().back() == 2;
  if (onesided && complex_in) return InvalidArgument(node.Describe(), ": onesided output needs a real input");
  const int64_t in_len = x->dim(axis);
  int64_t n = in_len;
  if (ctx.input(1) && ctx.input(1)->num_elements() > 0) {
    ASSIGN_OR_RETURN(n, ScalarInt(ctx.input(1), node, "dft_length"));
    if (n <= 0 || n > (int64_t{1} << 30))
      return InvalidArgument(node.Describe(), ": dft_length must be in [1, 2^30], got ", n);
  }
  const int64_t bins = onesided ? n / 2 + 1 : n;
  Shape out_shape = x->shape();
  out_shape[axis] = bins;
  out_shape.back() = 2;
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x->dim(d);
  for (int64_t d = axis + 1; d < rank - 1; ++d) inner *= x->dim(d);
  const int64_t c_in = x->shape().back();
  DftPlan plan;
  RETURN_IF_ERROR(plan.Init(n, inverse, ctx.allocator(), node));
  Cd* sig = plan.input();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        if (j >= in_len) {
          sig[j] = Cd(0, 0);  // zero padding up to dft_length
          continue;
        }
        const int64_t base = ((o * in_len + j) * inner + i) * c_in;
        sig[j] = Cd(LoadD(*x, base), complex_in ? LoadD(*x, base + 1) : 0.0);
      }
      const Cd* spec = plan.Run(bins);
      for (int64_t k = 0; k < bins; ++k) {
        const int64_t base = ((o * bins + k) * inner + i) * 2;
        StoreD(*y, base, spec[k].real());
        StoreD(*y, base + 1, spec[k].imag());
      }
    }
  }
  return Status::Ok();
}

Status StftOp(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  if (!x) return InvalidArgument(node.Describe(), ": signal is missing");
  RETURN_IF_ERROR(CheckFloatDtype(*x, node, "signal"));
  if (x->rank() != 3 || (x->dim(2) != 1 && x->dim(2) != 2))
    return InvalidArgument(node.Describe(), ": signal must be [batch, length, 1|2], got ", ShapeToString(x->shape()));
  ASSIGN_OR_RETURN(int64_t step, ScalarInt(ctx.input(1), node, "frame_step"));
  if (step <= 0) return InvalidArgument(node.Describe(), ": frame_step must be positive, got ", step);
  const Tensor* window = ctx.input(2);
  if (window && window->num_elements() == 0 && window->rank() == 1 && window->dim(0) == 0) window = nullptr;
  int64_t frame_len = -1;
  if (window) {
    RETURN_IF_ERROR(CheckFloatDtype(*window, node, "window"));
    if (window->rank() != 1) return InvalidArgument(node.Describe(), ": window must be 1-D");
    frame_len = window->dim(0);
  }
  if (ctx.input(3)) {
    ASSIGN_OR_RETURN(int64_t fl, ScalarInt(ctx.input(3), node, "frame_length"));
    if (frame_len >= 0 && fl != frame_len)
      return InvalidArgument(node.Describe(), ": frame_length ", fl, " differs from the window length ", frame_len);
    frame_len = fl;
  }
  if (frame_len <= 0) return InvalidArgument(node.Describe(), ": a window or a positive frame_length is required");
  const bool complex_in = x->dim(2) == 2;
  const bool onesided = node.GetInt("onesided", 1) != 0;
  if (onesided && complex_in) return InvalidArgument(node.Describe(), ": onesided output needs a real signal");
  const int64_t batch = x->dim(0), len = x->dim(1);
  if (frame_len > len)
    return InvalidArgument(node.Describe(), ": frame length ", frame_len, " exceeds the signal length ", len);
  const int64_t frames = (len - frame_len) / step + 1;
  const int64_t bins = onesided ? frame_len / 2 + 1 : frame_len;
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), {batch, frames, bins, 2}));
  DftPlan plan;
  RETURN_IF_ERROR(plan.Init(frame_len, false, ctx.allocator(), node));
  Cd* sig = plan.input();
  const int64_t c = x->dim(2);
  // frames x an FFT of frame_len (with step 1, every sample starts a frame): the run's limits
  // are read every 2^20 units of work, an FFT counted as 16 frame_len log2(frame_len).
  KernelStop stop(node);
  int64_t pending = 0;
  const int64_t frame_work = 16 * frame_len * std::max<int64_t>(1, std::bit_width(static_cast<uint64_t>(frame_len)));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      if (!stop.Continue(pending, frame_work)) return stop.status();
      for (int64_t j = 0; j < frame_len; ++j) {
        const int64_t base = (b * len + f * step + j) * c;
        const double w = window ? LoadD(*window, j) : 1.0;
        sig[j] = Cd(LoadD(*x, base) * w, complex_in ? LoadD(*x, base + 1) * w : 0.0);
      }
      const Cd* spec = plan.Run(bins);
      for (int64_t k = 0; k < bins; ++k) {
        const int64_t base = ((b * frames + f) * bins + k) * 2;
        StoreD(*y, base, spec[k].real());
        StoreD(*y, base + 1, spec[k].imag());
      }
    }
  }
  return Status::Ok();
}

// Generalised cosine window: sum_i a_i * cos(2*pi*i*n / N) with alternating signs folded in.
Status CosineWindow(KernelContext& ctx, std::vector<double> a) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(int64_t size, ScalarInt(ctx.input(0), node, "size"));
  if (size < 0) return InvalidArgument(node.Describe(), ": window size must be non-negative, got ", size);
  const auto dt = static_cast<DataType>(node.GetInt("output_datatype", 1));
  if (!IsFloatType(dt) && !IsIntegerType(dt))
    return InvalidArgument(node.Describe(), ": unsupported output_datatype ", static_cast<int>(dt));
  const bool periodic = node.GetInt("periodic", 1) != 0;
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, dt, {size}));
  const double denom = periodic ? static_cast<double>(size) : static_cast<double>(size - 1);
  for (int64_t n = 0; n < size; ++n) {
    double v = a[0];
    for (size_t i = 1; i < a.size(); ++i)
      v += a[i] * std::cos(2.0 * std::numbers::pi * static_cast<double>(i * n) / (denom > 0 ? denom : 1.0));
    StoreD(*y, n, v);
  }
  return Status::Ok();
}

Status MelWeightMatrixOp(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(int64_t mel_bins, ScalarInt(ctx.input(0), node, "num_mel_bins"));
  ASSIGN_OR_RETURN(int64_t dft_length, ScalarInt(ctx.input(1), node, "dft_length"));
  ASSIGN_OR_RETURN(int64_t sample_rate, ScalarInt(ctx.input(2), node, "sample_rate"));
  ASSIGN_OR_RETURN(double lower, ScalarFloat(ctx.input(3), node, "lower_edge_hertz"));
  ASSIGN_OR_RETURN(double upper, ScalarFloat(ctx.input(4), node, "upper_edge_hertz"));
  if (mel_bins <= 0 || dft_length <= 0 || sample_rate <= 0)
    return InvalidArgument(node.Describe(), ": num_mel_bins, dft_length and sample_rate must be positive");
  if (!(lower >= 0) || !(upper >= lower) || !(upper <= sample_rate / 2.0))  // NaN fails too
    return InvalidArgument(node.Describe(), ": need 0 <= lower_edge_hertz <= upper_edge_hertz <= sample_rate/2, got ",
                           lower, " and ", upper);
  const auto dt = static_cast<DataType>(node.GetInt("output_datatype", 1));
  if (!IsFloatType(dt) && !IsIntegerType(dt))
    return InvalidArgument(node.Describe(), ": unsupported output_datatype ", static_cast<int>(dt));
  const int64_t spec_bins = dft_length / 2 + 1;
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, dt, {spec_bins, mel_bins}));
  std::vector<double> out(static_cast<size_t>(spec_bins * mel_bins), 0.0);
  // Triangular filters between mel-spaced edges, mapped to DFT bins (ONNX reference formula).
  const double low_mel = 2595.0 * std::log10(1.0 + lower / 700.0);
  const double high_mel = 2595.0 * std::log10(1.0 + upper / 700.0);
  const double step = (high_mel - low_mel) / static_cast<double>(mel_bins + 2);
  std::vector<int64_t> edge(static_cast<size_t>(mel_bins + 2));
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    const double hz = 700.0 * (std::pow(10.0, (static_cast<double>(i) * step + low_mel) / 2595.0) - 1.0);
    edge[i] =
        static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate)));
  }
  auto at = [&](int64_t j, int64_t i) -> double* {
    return (j >= 0 && j < spec_bins) ? &out[static_cast<size_t>(j * mel_bins + i)] : nullptr;
  };
  for (int64_t i = 0; i < mel_bins; ++i) {
    const int64_t lo = edge[i], c = edge[i + 1], hi = edge[i + 2];
    if (c - lo == 0) {
      if (double* p = at(c, i)) *p = 1;
    } else {
      for (int64_t j = lo; j <= c; ++j)
        if (double* p = at(j, i)) *p = static_cast<double>(j - lo) / static_cast<double>(c - lo);
    }
    if (hi - c > 0)
      for (int64_t j = c; j < hi; ++j)
        if (double* p = at(j, i)) *p = static_cast<double>(hi - j) / static_cast<double>(hi - c);
  }
  for (int64_t k = 0; k < spec_bins * mel_bins; ++k) StoreD(*y, k, out[k]);
  return Status::Ok();
}

}  // namespace

void RegisterSignalKernels(KernelRegistry& r) {
  r.Register(UntypedFnDef("DFT", 17, DftOp));  // DftOp reads opset 20's axis input
  r.Register(UntypedFnDef("STFT", 17, StftOp));
  r.Register(UntypedFnDef("HannWindow", 17, [](KernelContext& c) { return CosineWindow(c, {0.5, -0.5}); }));
  r.Register(UntypedFnDef("HammingWindow", 17, [](KernelContext& c) {
    return CosineWindow(c, {25.0 / 46.0, -21.0 / 46.0});
  }));
  r.Register(UntypedFnDef("BlackmanWindow", 17, [](KernelContext& c) { return CosineWindow(c, {0.42, -0.5, 0.08}); }));
  r.Register(UntypedFnDef("MelWeightMatrix", 17, MelWeightMatrixOp));
}

}  // namespace strata
