// Detection ops: NonMaxSuppression (opset 10/11) and RoiAlign (opset 10/16).
// Both follow the ONNX reference semantics, which match ONNX Runtime's CPU kernels.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "core/run_control.h"
#include "cpu/register.h"

namespace strata {
namespace {

double LoadF(const Tensor& t, int64_t i) {
  if (t.dtype() == DataType::kDouble) return t.data<double>()[i];
  if (t.dtype() == DataType::kFloat16) return static_cast<float>(t.data<Float16>()[i]);
  return t.data<float>()[i];
}

Status CheckFloat(const Tensor* t, const Node& node, const char* what) {
  if (!t) return InvalidArgument(node.Describe(), ": input '", what, "' is missing");
  if (t->dtype() != DataType::kFloat && t->dtype() != DataType::kDouble && t->dtype() != DataType::kFloat16)
    return InvalidArgument(node.Describe(), ": '", what, "' must be float, got ", DataTypeName(t->dtype()));
  return Status::Ok();
}

struct Box {
  double y1, x1, y2, x2;
};

double Iou(const Box& a, const Box& b) {
  const double ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  const double iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (ih <= 0 || iw <= 0) return 0;
  const double inter = ih * iw;
  const double uni = (a.y2 - a.y1) * (a.x2 - a.x1) + (b.y2 - b.y1) * (b.x2 - b.x1) - inter;
  return uni > 0 ? inter / uni : 0;
}

Status NonMaxSuppression(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* boxes = ctx.input(0);
  const Tensor* scores = ctx.input(1);
  RETURN_IF_ERROR(CheckFloat(boxes, node, "boxes"));
  RETURN_IF_ERROR(CheckFloat(scores, node, "scores"));
  if (boxes->rank() != 3 || boxes->dim(2) != 4)
    return InvalidArgument(node.Describe(), ": boxes must be [batches, boxes, 4], got ", ShapeToString(boxes->shape()));
  if (scores->rank() != 3 || scores->dim(0) != boxes->dim(0) || scores->dim(2) != boxes->dim(1))
    return InvalidArgument(node.Describe(), ": scores ", ShapeToString(scores->shape()),
                           " must be [batches, classes, boxes] matching boxes ", ShapeToString(boxes->shape()));
  int64_t max_out = 0;
  if (const Tensor* t = ctx.input(2); t && t->num_elements() > 0) {
    if (t->dtype() != DataType::kInt64 || t->num_elements() != 1)
      return InvalidArgument(node.Describe(), ": max_output_boxes_per_class must be an int64 scalar");
    max_out = t->data<int64_t>()[0];
  }
  double iou_thr = 0;
  if (const Tensor* t = ctx.input(3); t && t->num_elements() > 0) {
    RETURN_IF_ERROR(CheckFloat(t, node, "iou_threshold"));
    iou_thr = LoadF(*t, 0);
    if (iou_thr < 0 || iou_thr > 1)
      return InvalidArgument(node.Describe(), ": iou_threshold must be in [0, 1], got ", iou_thr);
  }
  bool has_score_thr = false;
  double score_thr = 0;
  if (const Tensor* t = ctx.input(4); t && t->num_elements() > 0) {
    RETURN_IF_ERROR(CheckFloat(t, node, "score_threshold"));
    has_score_thr = true;
    score_thr = LoadF(*t, 0);
  }
  const int64_t center = node.GetInt("center_point_box", 0);
  if (center != 0 && center != 1)
    return InvalidModel(node.Describe(), ": center_point_box must be 0 or 1, got ", center);

  const int64_t nb = boxes->dim(0), nbox = boxes->dim(1), ncls = scores->dim(1);
  std::vector<int64_t> selected;  // triples
  std::vector<Box> bx(static_cast<size_t>(nbox));
  std::vector<int64_t> order;
  std::vector<int64_t> kept;
  constexpr int64_t kIousPerCheck = int64_t{1} << 16;
  int64_t ious = 0;  // IoUs (at most) since the last check
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t i = 0; i < nbox; ++i) {
      const int64_t o = (b * nbox + i) * 4;
      const double v0 = LoadF(*boxes, o), v1 = LoadF(*boxes, o + 1), v2 = LoadF(*boxes, o + 2),
                   v3 = LoadF(*boxes, o + 3);
      if (center == 0) {  // [y1, x1, y2, x2], corners in either order
        bx[i] = {std::min(v0, v2), std::min(v1, v3), std::max(v0, v2), std::max(v1, v3)};
      } else {  // [x_center, y_center, width, height]
        bx[i] = {v1 - v3 / 2, v0 - v2 / 2, v1 + v3 / 2, v0 + v2 / 2};
      }
    }
    for (int64_t c = 0; c < ncls; ++c) {
      if (max_out <= 0) break;
      const int64_t so = (b * ncls + c) * nbox;
      order.clear();
      for (int64_t i = 0; i < nbox; ++i)
        if (const double s = LoadF(*scores, so + i); !std::isnan(s) && (!has_score_thr || s > score_thr))
          order.push_back(i);
      // Highest score first; ties keep the lower box index first.
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t c2) { return LoadF(*scores, so + a) > LoadF(*scores, so + c2); });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        // Greedy NMS is quadratic in the boxes kept (2^16 boxes that do not overlap: 2^31
        // IoUs per class): the run's deadline and terminate calls are checked every 2^16.
        ious += static_cast<int64_t>(kept.size());
        if (ious >= kIousPerCheck) {
          ious = 0;
          if (Status st = CheckRunControl(); !st.ok())
            return MakeStatus(st.code(), st.message(), ", in ", node.Describe());
        }
        bool keep = true;
        for (int64_t k : kept)
          if (Iou(bx[i], bx[k]) > iou_thr) {
            keep = false;
            break;
          }
        if (keep) kept.push_back(i);
      }
      for (int64_t k : kept) selected.insert(selected.end(), {b, c, k});
    }
  }
  const int64_t n = static_cast<int64_t>(selected.size() / 3);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kInt64, {n, 3}));
  std::copy(selected.begin(), selected.end(), y->mutable_data<int64_t>());
  return Status::Ok();
}

class RoiAlignKernel final : public OpKernel {
 public:
  RoiAlignKernel(bool max_mode, bool half_pixel, int64_t oh, int64_t ow, int64_t sampling, double scale)
      : max_mode_(max_mode), half_pixel_(half_pixel), oh_(oh), ow_(ow), sampling_(sampling), scale_(scale) {}

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    const Tensor* rois = ctx.input(1);
    const Tensor* bidx = ctx.input(2);
    RETURN_IF_ERROR(CheckFloat(x, node, "X"));
    RETURN_IF_ERROR(CheckFloat(rois, node, "rois"));
    if (!bidx) return InvalidArgument(node.Describe(), ": input 'batch_indices' is missing");
    if (x->rank() != 4)
      return InvalidArgument(node.Describe(), ": X must be 4-D NCHW, got ", ShapeToString(x->shape()));
    if (rois->rank() != 2 || rois->dim(1) != 4)
      return InvalidArgument(node.Describe(), ": rois must be [num_rois, 4], got ", ShapeToString(rois->shape()));
    if (bidx->rank() != 1 || bidx->dim(0) != rois->dim(0) ||
        (bidx->dtype() != DataType::kInt64 && bidx->dtype() != DataType::kInt32))
      return InvalidArgument(node.Describe(), ": batch_indices must be int64 [num_rois]");
    const int64_t N = x->dim(0), C = x->dim(1), H = x->dim(2), W = x->dim(3), R = rois->dim(0);
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), {R, C, oh_, ow_}));
    const double off = half_pixel_ ? 0.5 : 0.0;
    // Up to 2^20 samples per bin times the bins (sampling_ratio 1024 over a 1024 x 1024
    // output is 2^40): the run's limits are read every 2^20 samples, per output bin.
    KernelStop stop(node);
    int64_t pending = 0;
    for (int64_t r = 0; r < R; ++r) {
      const int64_t b = bidx->dtype() == DataType::kInt64 ? bidx->data<int64_t>()[r] : bidx->data<int32_t>()[r];
      if (b < 0 || b >= N)
        return InvalidArgument(node.Describe(), ": batch_indices[", r, "] = ", b, " is outside [0, ", N, ")");
      for (int64_t k = 0; k < 4; ++k)
        if (!std::isfinite(LoadF(*rois, r * 4 + k)))
          return InvalidArgument(node.Describe(), ": rois[", r, "] contains a non-finite value");
      const double sw = LoadF(*rois, r * 4) * scale_ - off, sh = LoadF(*rois, r * 4 + 1) * scale_ - off;
      const double ew = LoadF(*rois, r * 4 + 2) * scale_ - off, eh = LoadF(*rois, r * 4 + 3) * scale_ - off;
      double rw = ew - sw, rh = eh - sh;
      if (!half_pixel_) {  // legacy behaviour: rois are at least one pixel
        rw = std::max(rw, 1.0);
        rh = std::max(rh, 1.0);
      }
      const double bh = rh / static_cast<double>(oh_), bw = rw / static_cast<double>(ow_);
      // The adaptive grid grows with the roi: a huge (finite) roi made the conversion below
      // undefined and the sampling loops run for ever. No real roi needs 2^20 samples per bin
      // (a 7x7 output over a 7168-pixel square is 1024 x 1024); checked as doubles first.
      const double gh_d = sampling_ > 0 ? static_cast<double>(sampling_) : std::ceil(rh / static_cast<double>(oh_));
      const double gw_d = sampling_ > 0 ? static_cast<double>(sampling_) : std::ceil(rw / static_cast<double>(ow_));
      if (gh_d * gw_d > static_cast<double>(int64_t{1} << 20))
        return InvalidArgument(node.Describe(), ": rois[", r, "] (", rh, " x ", rw,
                               " after spatial_scale) needs a sampling grid of ", gh_d, " x ", gw_d,
                               " per output bin; at most 2^20 samples per bin are supported (set sampling_ratio)");
      const int64_t gh = static_cast<int64_t>(gh_d), gw = static_cast<int64_t>(gw_d);
      const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
      for (int64_t c = 0; c < C; ++c) {
        const int64_t plane = (b * C + c) * H * W;
        for (int64_t ph = 0; ph < oh_; ++ph) {
          for (int64_t pw = 0; pw < ow_; ++pw) {
            if (!stop.Continue(pending, std::max<int64_t>(gh * gw, 1))) return stop.status();
            double acc = 0;
            bool first = true;
            for (int64_t iy = 0; iy < gh; ++iy) {
              double yy = sh + ph * bh + (iy + 0.5) * bh / static_cast<double>(gh);
              for (int64_t ix = 0; ix < gw; ++ix) {
                double xx = sw + pw * bw + (ix + 0.5) * bw / static_cast<double>(gw);
                double v = 0;
                if (yy >= -1.0 && yy <= H && xx >= -1.0 && xx <= W) {
                  double y = std::max(yy, 0.0), xv = std::max(xx, 0.0);
                  int64_t yl = static_cast<int64_t>(y), xl = static_cast<int64_t>(xv), yh, xh;
                  if (yl >= H - 1) {
                    yh = yl = H - 1;
                    y = static_cast<double>(yl);
                  } else {
                    yh = yl + 1;
                  }
                  if (xl >= W - 1) {
                    xh = xl = W - 1;
                    xv = static_cast<double>(xl);
                  } else {
                    xh = xl + 1;
                  }
                  const double ly = y - yl, lx = xv - xl, hy = 1 - ly, hx = 1 - lx;
                  const double p1 = hy * hx * LoadF(*x, plane + yl * W + xl);
                  const double p2 = hy * lx * LoadF(*x, plane + yl * W + xh);
                  const double p3 = ly * hx * LoadF(*x, plane + yh * W + xl);
                  const double p4 = ly * lx * LoadF(*x, plane + yh * W + xh);
                  // Max mode takes the largest weighted corner, as the reference does.
                  v = max_mode_ ? std::max(std::max(p1, p2), std::max(p3, p4)) : p1 + p2 + p3 + p4;
                }
                if (max_mode_) {
                  acc = first ? v : std::max(acc, v);
                  first = false;
                } else {
                  acc += v;
                }
              }
            }
            if (!max_mode_) acc /= count;
            const int64_t o = ((r * C + c) * oh_ + ph) * ow_ + pw;
            if (y->dtype() == DataType::kDouble) {
              y->mutable_data<double>()[o] = acc;
            } else if (y->dtype() == DataType::kFloat16) {
              y->mutable_data<Float16>()[o] = Float16(static_cast<float>(acc));
            } else {
              y->mutable_data<float>()[o] = static_cast<float>(acc);
            }
          }
        }
      }
    }
    return Status::Ok();
  }

 private:
  bool max_mode_, half_pixel_;
  int64_t oh_, ow_, sampling_;
  double scale_;
};

Result<std::unique_ptr<OpKernel>> MakeRoiAlign(const KernelInit& init) {
  const Node& node = init.node;
  const std::string mode = node.GetString("mode", "avg");
  if (mode != "avg" && mode != "max")
    return InvalidModel(node.Describe(), ": mode must be 'avg' or 'max', got '", mode, "'");
  // Opset 10 has no attribute and uses the legacy (output_half_pixel) coordinates.
  const std::string ct =
      node.GetString("coordinate_transformation_mode", node.opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (ct != "half_pixel" && ct != "output_half_pixel")
    return InvalidModel(node.Describe(), ": unknown coordinate_transformation_mode '", ct, "'");
  const int64_t oh = node.GetInt("output_height", 1), ow = node.GetInt("output_width", 1);
  const int64_t sampling = node.GetInt("sampling_ratio", 0);
  if (oh <= 0 || ow <= 0) return InvalidModel(node.Describe(), ": output_height/output_width must be positive");
  if (sampling < 0) return InvalidModel(node.Describe(), ": sampling_ratio must be >= 0");
  return std::unique_ptr<OpKernel>(std::make_unique<RoiAlignKernel>(mode == "max", ct == "half_pixel", oh, ow, sampling,
                                                                    node.GetFloat("spatial_scale", 1.0f)));
}

}  // namespace

void RegisterDetectionKernels(KernelRegistry& r) {
  KernelDef nms;
  nms.op_type = "NonMaxSuppression";
  nms.since_version = 10;
  nms.type_input = -1;
  nms.factory = [](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> { return MakeFnKernel(NonMaxSuppression); };
  r.Register(nms);
  // RoiAlign-22 only added bfloat16 to the types.
  for (auto [since, end] : {std::pair{10, 15}, std::pair{16, INT_MAX}}) {
    KernelDef d;
    d.op_type = "RoiAlign";
    d.since_version = since;
    d.end_version = end;
    d.type_input = 0;
    d.types = {DataType::kFloat, DataType::kDouble, DataType::kFloat16};
    d.factory = MakeRoiAlign;
    r.Register(d);
  }
}

}  // namespace strata
