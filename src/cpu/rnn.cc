// Recurrent kernels: RNN, GRU and LSTM. This file holds attribute/input validation
// and the reference implementation (double accumulation, any float dtype, every
// feature: directions, activations with alpha/beta, clip, input_forget, peepholes,
// initial states, sequence_lens, layout 0/1). The optimised fp32 LSTM lives in
// cpu/rnn_lstm_fast.cc and is checked against this one in the tests.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "cpu/register.h"
#include "cpu/rnn_common.h"

namespace strata {
namespace rnn {

namespace {

bool NameIs(const std::string& a, const char* b) {
  std::string x = a, y = b;
  for (auto& c : x) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (auto& c : y) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return x == y;
}

template <typename T>
double ToDouble(const T& v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
    return static_cast<float>(v);
  else
    return static_cast<double>(v);
}
template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

std::vector<double> ReadAll(const Tensor* t) {
  if (!t) return {};
  std::vector<double> out(static_cast<size_t>(t->num_elements()));
  DispatchFloat(t->dtype(), [&]<typename T>() {
    const T* p = t->data<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = ToDouble(p[i]);
  });
  return out;
}

Status CheckShape(const Node& node, const Tensor* t, const char* name, const Shape& want) {
  if (t->shape() != want)
    return InvalidArgument(node.Describe(), ": input ", name, " has shape ", ShapeToString(t->shape()), ", expected ",
                           ShapeToString(want));
  return Status::Ok();
}

}  // namespace

Result<Attrs> ParseAttrs(const Node& node, Cell cell) {
  Attrs a;
  a.cell = cell;
  const std::string dir = node.GetString("direction", "forward");
  if (dir == "forward") {
    a.num_directions = 1;
  } else if (dir == "reverse") {
    a.num_directions = 1;
    a.reverse = true;
  } else if (dir == "bidirectional") {
    a.num_directions = 2;
  } else {
    return InvalidArgument(node.Describe(), ": direction must be forward, reverse or bidirectional, got '", dir, "'");
  }
  a.hidden_size = node.GetInt("hidden_size", -1);
  if (node.HasAttr("hidden_size") && a.hidden_size <= 0)
    return InvalidArgument(node.Describe(), ": hidden_size must be positive, got ", a.hidden_size);
  a.clip = node.GetFloat("clip", 0.0f);
  if (node.HasAttr("clip") && !(a.clip > 0))
    return InvalidArgument(node.Describe(), ": clip must be a positive threshold, got ", a.clip);
  a.input_forget = cell == Cell::kLstm && node.GetInt("input_forget", 0) != 0;
  a.linear_before_reset = cell == Cell::kGru && node.GetInt("linear_before_reset", 0) != 0;
  a.layout = node.opset >= 14 ? node.GetInt("layout", 0) : 0;
  if (a.layout != 0 && a.layout != 1)
    return InvalidArgument(node.Describe(), ": layout must be 0 or 1, got ", a.layout);
  const int per_dir = Attrs::ActsPerDirection(cell);
  std::vector<std::string> names = node.GetStrings("activations");
  if (names.empty()) {
    if (cell == Cell::kLstm) names = {"Sigmoid", "Tanh", "Tanh"};
    if (cell == Cell::kGru) names = {"Sigmoid", "Tanh"};
    if (cell == Cell::kRnn) names = {"Tanh"};
    if (a.num_directions == 2) {
      const std::vector<std::string> one = names;
      names.insert(names.end(), one.begin(), one.end());
    }
  }
  if (static_cast<int64_t>(names.size()) != per_dir * a.num_directions)
    return InvalidArgument(node.Describe(), ": expected ", per_dir * a.num_directions, " activations for ",
                           a.num_directions, " direction(s), got ", names.size());
  const std::vector<float> alphas = node.GetFloats("activation_alpha");
  const std::vector<float> betas = node.GetFloats("activation_beta");
  // alpha/beta values are consumed in order by the activations that take them.
  size_t ai = 0, bi = 0;
  for (const std::string& n : names) {
    Activation act;
    using K = Activation::Kind;
    auto alpha = [&](float def) { return ai < alphas.size() ? alphas[ai++] : def; };
    auto beta = [&](float def) { return bi < betas.size() ? betas[bi++] : def; };
    if (NameIs(n, "Relu")) {
      act.kind = K::kRelu;
    } else if (NameIs(n, "Tanh")) {
      act.kind = K::kTanh;
    } else if (NameIs(n, "Sigmoid")) {
      act.kind = K::kSigmoid;
    } else if (NameIs(n, "Affine")) {
      act.kind = K::kAffine;
      act.alpha = alpha(1.0f);
      act.beta = beta(0.0f);
    } else if (NameIs(n, "LeakyRelu")) {
      act.kind = K::kLeakyRelu;
      act.alpha = alpha(0.01f);
    } else if (NameIs(n, "ThresholdedRelu")) {
      act.kind = K::kThresholdedRelu;
      act.alpha = alpha(1.0f);
    } else if (NameIs(n, "ScaledTanh")) {
      act.kind = K::kScaledTanh;
      act.alpha = alpha(1.0f);
      act.beta = beta(1.0f);
    } else if (NameIs(n, "HardSigmoid")) {
      act.kind = K::kHardSigmoid;
      act.alpha = alpha(0.2f);
      act.beta = beta(0.5f);
    } else if (NameIs(n, "Elu")) {
      act.kind = K::kElu;
      act.alpha = alpha(1.0f);
    } else if (NameIs(n, "Softsign")) {
      act.kind = K::kSoftsign;
    } else if (NameIs(n, "Softplus")) {
      act.kind = K::kSoftplus;
    } else {
      return InvalidArgument(node.Describe(), ": unsupported activation '", n, "'");
    }
    a.acts.push_back(act);
  }
  return a;
}

Result<Inputs> GetInputs(const KernelContext& ctx, const Attrs& attrs) {
  const Node& node = ctx.node();
  Inputs in;
  in.x = ctx.input(0);
  in.w = ctx.input(1);
  in.r = ctx.input(2);
  if (!in.x || !in.w || !in.r) return InvalidArgument(node.Describe(), ": inputs X, W and R are required");
  const DataType dt = in.x->dtype();
  if (!IsFloatType(dt)) return Unsupported(node.Describe(), ": unsupported input dtype ", DataTypeName(dt));
  if (in.x->rank() != 3) return InvalidArgument(node.Describe(), ": X must be 3-D, got ", ShapeToString(in.x->shape()));
  if (in.w->rank() != 3 || in.r->rank() != 3)
    return InvalidArgument(node.Describe(), ": W and R must be 3-D, got ", ShapeToString(in.w->shape()), " and ",
                           ShapeToString(in.r->shape()));
  in.seq = attrs.layout == 0 ? in.x->dim(0) : in.x->dim(1);
  in.batch = attrs.layout == 0 ? in.x->dim(1) : in.x->dim(0);
  in.input = in.x->dim(2);
  in.dirs = attrs.num_directions;
  in.hidden = attrs.hidden_size > 0 ? attrs.hidden_size : in.r->dim(2);
  const int64_t g = Attrs::NumGates(attrs.cell);
  RETURN_IF_ERROR(CheckShape(node, in.w, "W", {in.dirs, g * in.hidden, in.input}));
  RETURN_IF_ERROR(CheckShape(node, in.r, "R", {in.dirs, g * in.hidden, in.hidden}));
  auto optional = [&](size_t i) { return ctx.input(i); };
  in.b = optional(3);
  in.seq_lens = optional(4);
  in.init_h = optional(5);
  if (attrs.cell == Cell::kLstm) {
    in.init_c = optional(6);
    in.p = optional(7);
  }
  for (const Tensor* t : {in.w, in.r, in.b, in.init_h, in.init_c, in.p})
    if (t && t->dtype() != dt)
      return InvalidArgument(node.Describe(), ": all float inputs must have X's dtype ", DataTypeName(dt), ", got ",
                             DataTypeName(t->dtype()));
  if (in.b) RETURN_IF_ERROR(CheckShape(node, in.b, "B", {in.dirs, 2 * g * in.hidden}));
  const Shape state = StateShape(in, attrs.layout);
  if (in.init_h) RETURN_IF_ERROR(CheckShape(node, in.init_h, "initial_h", state));
  if (in.init_c) RETURN_IF_ERROR(CheckShape(node, in.init_c, "initial_c", state));
  if (in.p) RETURN_IF_ERROR(CheckShape(node, in.p, "P", {in.dirs, 3 * in.hidden}));
  in.lens.assign(static_cast<size_t>(in.batch), in.seq);
  if (in.seq_lens) {
    if (in.seq_lens->dtype() != DataType::kInt32 || in.seq_lens->num_elements() != in.batch)
      return InvalidArgument(node.Describe(), ": sequence_lens must be int32 with ", in.batch, " elements, got ",
                             DataTypeName(in.seq_lens->dtype()), ShapeToString(in.seq_lens->shape()));
    const int32_t* l = in.seq_lens->data<int32_t>();
    for (int64_t b = 0; b < in.batch; ++b) {
      if (l[b] < 0 || l[b] > in.seq)
        return InvalidArgument(node.Describe(), ": sequence_lens[", b, "] = ", l[b], " is outside [0, ", in.seq, "]");
      in.lens[b] = l[b];
    }
  }
  return in;
}

Shape YShape(const Inputs& in, int64_t layout) {
  return layout == 0 ? Shape{in.seq, in.dirs, in.batch, in.hidden} : Shape{in.batch, in.seq, in.dirs, in.hidden};
}
Shape StateShape(const Inputs& in, int64_t layout) {
  return layout == 0 ? Shape{in.dirs, in.batch, in.hidden} : Shape{in.batch, in.dirs, in.hidden};
}

Status ReferenceCompute(KernelContext& ctx, Cell cell) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(Attrs attrs, ParseAttrs(node, cell));
  ASSIGN_OR_RETURN(Inputs in, GetInputs(ctx, attrs));
  const int64_t T = in.seq, B = in.batch, I = in.input, H = in.hidden, D = in.dirs;
  const int64_t G = Attrs::NumGates(cell);
  const int per_dir = Attrs::ActsPerDirection(cell);
  const std::vector<double> x = ReadAll(in.x), w = ReadAll(in.w), r = ReadAll(in.r), bias = ReadAll(in.b),
                            h0 = ReadAll(in.init_h), c0 = ReadAll(in.init_c), p = ReadAll(in.p);
  std::vector<double> y(static_cast<size_t>(T * D * B * H), 0.0), yh(static_cast<size_t>(D * B * H), 0.0),
      yc(static_cast<size_t>(D * B * H), 0.0);
  const double clip = attrs.clip;
  auto clipv = [&](double v) { return clip > 0 ? std::min(clip, std::max(-clip, v)) : v; };
  std::vector<double> gx(G * H), gh(G * H), h(H), c(H);
  // Steps times weights, which no one input bounds: the run's limits are checked per step.
  KernelStop stop(node);
  int64_t pending = 0;
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = D == 2 ? d == 1 : attrs.reverse;
    const double* wd = w.data() + d * G * H * I;
    const double* rd = r.data() + d * G * H * H;
    const Activation* act = &attrs.acts[d * per_dir];
    for (int64_t b = 0; b < B; ++b) {
      const int64_t so = StateOffset(d, b, in, attrs.layout);
      for (int64_t j = 0; j < H; ++j) {
        h[j] = h0.empty() ? 0.0 : h0[so + j];
        c[j] = c0.empty() ? 0.0 : c0[so + j];
      }
      const int64_t len = in.lens[b];
      for (int64_t s = 0; s < len; ++s) {
        if (!stop.Continue(pending, G * H * (I + H + 1))) return stop.status();
        const int64_t t = reverse ? len - 1 - s : s;
        const double* xt = x.data() + XRow(t, b, in, attrs.layout) * I;
        // gx = W x + Wb, gh = R h + Rb (kept apart for GRU's linear_before_reset).
        for (int64_t k = 0; k < G * H; ++k) {
          double sx = bias.empty() ? 0.0 : bias[d * 2 * G * H + k];
          for (int64_t i = 0; i < I; ++i) sx += wd[k * I + i] * xt[i];
          double sh = bias.empty() ? 0.0 : bias[d * 2 * G * H + G * H + k];
          for (int64_t i = 0; i < H; ++i) sh += rd[k * H + i] * h[i];
          gx[k] = sx;
          gh[k] = sh;
        }
        if (cell == Cell::kRnn) {
          for (int64_t j = 0; j < H; ++j) h[j] = act[0].Apply(clipv(gx[j] + gh[j]));
        } else if (cell == Cell::kGru) {
          // Gate order z, r, h.
          std::vector<double> hn(H), rv(H);
          for (int64_t j = 0; j < H; ++j) rv[j] = act[0].Apply(clipv(gx[H + j] + gh[H + j]));
          for (int64_t j = 0; j < H; ++j) {
            const double z = act[0].Apply(clipv(gx[j] + gh[j]));
            const double rr = rv[j];
            double pre;
            if (attrs.linear_before_reset) {
              pre = gx[2 * H + j] + rr * gh[2 * H + j];
            } else {
              // (r .* h) R_h^T + Rb_h: recompute with the reset-gated state.
              double acc = bias.empty() ? 0.0 : bias[d * 2 * G * H + G * H + 2 * H + j];
              for (int64_t i = 0; i < H; ++i) acc += rd[(2 * H + j) * H + i] * rv[i] * h[i];
              pre = gx[2 * H + j] + acc;
            }
            const double hh = act[1].Apply(clipv(pre));
            hn[j] = (1 - z) * hh + z * h[j];
          }
          h = hn;
        } else {
          // Gate order i, o, f, c; peepholes P = [Pi, Po, Pf].
          const double* pd = p.empty() ? nullptr : p.data() + d * 3 * H;
          for (int64_t j = 0; j < H; ++j) {
            const double cp = c[j];
            const double ig = act[0].Apply(clipv(gx[j] + gh[j] + (pd ? pd[j] * cp : 0.0)));
            const double fg = attrs.input_forget
                                  ? 1.0 - ig
                                  : act[0].Apply(clipv(gx[2 * H + j] + gh[2 * H + j] + (pd ? pd[2 * H + j] * cp : 0)));
            const double cg = act[1].Apply(clipv(gx[3 * H + j] + gh[3 * H + j]));
            c[j] = fg * cp + ig * cg;
            const double og = act[0].Apply(clipv(gx[H + j] + gh[H + j] + (pd ? pd[H + j] * c[j] : 0.0)));
            h[j] = og * act[2].Apply(c[j]);
          }
        }
        const int64_t yo = YOffset(t, d, b, in, attrs.layout);
        for (int64_t j = 0; j < H; ++j) y[yo + j] = h[j];
      }
      for (int64_t j = 0; j < H; ++j) {
        yh[so + j] = h[j];
        yc[so + j] = c[j];
      }
    }
  }
  const DataType dt = in.x->dtype();
  const std::vector<double>* results[] = {&y, &yh, &yc};
  const Shape shapes[] = {YShape(in, attrs.layout), StateShape(in, attrs.layout), StateShape(in, attrs.layout)};
  const size_t nout = cell == Cell::kLstm ? 3 : 2;
  for (size_t o = 0; o < nout && o < ctx.num_outputs(); ++o) {
    if (!ctx.output_requested(o)) continue;
    ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(o, dt, shapes[o]));
    DispatchFloat(dt, [&]<typename T>() {
      T* out = t->mutable_data<T>();
      for (size_t i = 0; i < results[o]->size(); ++i) out[i] = FromDouble<T>((*results[o])[i]);
    });
  }
  return Status::Ok();
}

}  // namespace rnn

namespace {

void RegCell(KernelRegistry& r, const char* op, rnn::Cell cell, const std::vector<int>& versions) {
  for (size_t i = 0; i < versions.size(); ++i) {
    KernelDef d;
    d.op_type = op;
    d.since_version = versions[i];
    d.end_version = i + 1 < versions.size() ? versions[i + 1] - 1 : INT_MAX;
    d.types = {DataType::kFloat, DataType::kDouble, DataType::kFloat16, DataType::kBFloat16};
    d.factory = [cell](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
      return MakeFnKernel([cell](KernelContext& ctx) { return rnn::ReferenceCompute(ctx, cell); });
    };
    r.Register(std::move(d));
  }
}

}  // namespace

void RegisterRnnKernels(KernelRegistry& r) {
  RegCell(r, "RNN", rnn::Cell::kRnn, {1, 7, 14});
  RegCell(r, "GRU", rnn::Cell::kGru, {1, 3, 7, 14});
  RegCell(r, "LSTM", rnn::Cell::kLstm, {1, 7, 14});
  RegisterFastLstmKernels(r);
}

}  // namespace strata
