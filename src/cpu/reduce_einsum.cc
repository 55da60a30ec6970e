// Einsum (opset 12+): a general, correctness-first implementation.
//
// The equation is parsed into labels; "..." expands to the broadcast of all inputs'
// ellipsis dims. Every label gets one size, and every input a stride per label (the sum
// of its strides for a repeated label, which walks the diagonal; 0 for a broadcast
// size-1 ellipsis dim). The kernel then walks all output labels and, for each output
// element, all contracted labels with an odometer, accumulating the product of inputs.
// This is O(product of all label sizes): fine for the small contractions Einsum usually
// expresses in inference graphs; large matmul-like equations should be rewritten to
// MatMul by the optimizer.
#include <algorithm>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "cpu/int_wrap.h"

namespace strata {

void RegisterEinsumKernels(KernelRegistry& r);

namespace {

// How often (in products, minus one) a thread checks the run's deadline and terminate calls.
constexpr int64_t kCheckEvery = (int64_t{1} << 16) - 1;

constexpr int kEllipsisBase = 1000;  // label ids for ellipsis dims: kEllipsisBase + i

struct Term {
  std::vector<int> labels;  // letter labels are the char code; ellipsis marked by -1
  bool has_ellipsis = false;
};

Result<Term> ParseTerm(const std::string& s, const Node& node) {
  Term t;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '.') {
      if (s.compare(i, 3, "...") != 0 || t.has_ellipsis)
        return InvalidArgument(node.Describe(), ": malformed ellipsis in equation term '", s, "'");
      t.has_ellipsis = true;
      t.labels.push_back(-1);
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      t.labels.push_back(c);
    } else {
      return InvalidArgument(node.Describe(), ": invalid character '", c, "' in equation term '", s, "'");
    }
  }
  return t;
}

Status EinsumCompute(KernelContext& ctx) {
  const Node& node = ctx.node();
  std::string eq;
  for (char c : node.GetString("equation", "")) {
    if (c != ' ') eq += c;
  }
  if (eq.empty()) return InvalidArgument(node.Describe(), ": attribute 'equation' is missing or empty");
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<Term> terms;
  {
    size_t start = 0;
    while (true) {
      size_t comma = lhs.find(',', start);
      ASSIGN_OR_RETURN(Term t, ParseTerm(lhs.substr(start, comma - start), node));
      terms.push_back(std::move(t));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  const size_t ninputs = ctx.num_inputs();
  if (terms.size() != ninputs)
    return InvalidArgument(node.Describe(), ": equation '", eq, "' has ", terms.size(),
                           " input terms but the node has ", ninputs, " inputs");
  std::vector<const Tensor*> xs(ninputs);
  DataType dtype = DataType::kUndefined;
  for (size_t i = 0; i < ninputs; ++i) {
    xs[i] = ctx.input(i);
    if (!xs[i]) return InvalidArgument(node.Describe(), ": input ", i, " is missing");
    if (i == 0) dtype = xs[i]->dtype();
    if (xs[i]->dtype() != dtype)
      return InvalidArgument(node.Describe(), ": all inputs must share one dtype; input ", i, " is ",
                             DataTypeName(xs[i]->dtype()), ", input 0 is ", DataTypeName(dtype));
  }
  // Ellipsis rank per input and the broadcast ellipsis shape.
  std::vector<int64_t> ell_rank(ninputs, 0);
  int64_t max_ell = 0;
  for (size_t i = 0; i < ninputs; ++i) {
    int64_t letters = static_cast<int64_t>(terms[i].labels.size()) - (terms[i].has_ellipsis ? 1 : 0);
    int64_t rank = static_cast<int64_t>(xs[i]->rank());
    if (terms[i].has_ellipsis ? rank < letters : rank != letters)
      return InvalidArgument(node.Describe(), ": input ", i, " has rank ", rank, " but its equation term names ",
                             letters, " dimensions", terms[i].has_ellipsis ? " plus an ellipsis" : "");
    ell_rank[i] = terms[i].has_ellipsis ? rank - letters : 0;
    max_ell = std::max(max_ell, ell_rank[i]);
  }
  std::vector<int64_t> ell_shape(max_ell, 1);
  std::map<int, int64_t> label_size;
  std::map<int, int> label_count;  // occurrences across inputs, for the implicit output
  for (size_t i = 0; i < ninputs; ++i) {
    size_t dim = 0;
    for (int lab : terms[i].labels) {
      if (lab == -1) {
        for (int64_t e = 0; e < ell_rank[i]; ++e, ++dim) {
          int64_t& s = ell_shape[max_ell - ell_rank[i] + e];
          int64_t d = xs[i]->dim(dim);
          if (s != d && s != 1 && d != 1)
            return InvalidArgument(node.Describe(), ": ellipsis dimensions of input ", i, " (",
                                   ShapeToString(xs[i]->shape()), ") do not broadcast with the other inputs");
          if (s == 1) s = d;
        }
        continue;
      }
      int64_t d = xs[i]->dim(dim++);
      auto it = label_size.find(lab);
      if (it != label_size.end() && it->second != d)
        return InvalidArgument(node.Describe(), ": label '", static_cast<char>(lab), "' has size ", it->second, " and ",
                               d, " in different places");
      label_size[lab] = d;
      label_count[lab]++;
    }
  }
  // Output labels.
  std::vector<int> out_labels;
  bool any_ellipsis = false;
  for (const auto& t : terms) any_ellipsis = any_ellipsis || t.has_ellipsis;
  if (arrow != std::string::npos) {
    ASSIGN_OR_RETURN(Term out, ParseTerm(eq.substr(arrow + 2), node));
    for (int lab : out.labels) {
      if (lab == -1) {
        for (int64_t e = 0; e < max_ell; ++e) out_labels.push_back(kEllipsisBase + static_cast<int>(e));
        continue;
      }
      if (!label_size.count(lab))
        return InvalidArgument(node.Describe(), ": output label '", static_cast<char>(lab),
                               "' does not appear in any input");
      if (std::count(out.labels.begin(), out.labels.end(), lab) > 1)
        return InvalidArgument(node.Describe(), ": output label '", static_cast<char>(lab), "' is repeated");
      out_labels.push_back(lab);
    }
    // Ellipsis dims not named in an explicit output are summed over (numpy semantics).
  } else {
    for (int64_t e = 0; e < max_ell; ++e) out_labels.push_back(kEllipsisBase + static_cast<int>(e));
    // Implicit mode: letters that appear exactly once, in alphabetical order (std::map order
    // puts upper case before lower case, as numpy does).
    for (const auto& [lab, cnt] : label_count)
      if (cnt == 1) out_labels.push_back(lab);
  }
  for (int64_t e = 0; e < max_ell; ++e) label_size[kEllipsisBase + static_cast<int>(e)] = ell_shape[e];
  // All labels: output first, then contracted.
  std::vector<int> all = out_labels;
  for (const auto& [lab, size] : label_size)
    if (std::find(all.begin(), all.end(), lab) == all.end()) all.push_back(lab);
  const size_t nout = out_labels.size(), nall = all.size();
  std::vector<int64_t> sizes(nall);
  for (size_t k = 0; k < nall; ++k) sizes[k] = label_size[all[k]];
  // Per-input strides over `all`.
  std::vector<std::vector<int64_t>> strides(ninputs, std::vector<int64_t>(nall, 0));
  for (size_t i = 0; i < ninputs; ++i) {
    const Shape& sh = xs[i]->shape();
    std::vector<int64_t> st(sh.size(), 1);
    for (size_t d = sh.size(); d-- > 1;) st[d - 1] = st[d] * sh[d];
    size_t dim = 0;
    for (int lab : terms[i].labels) {
      if (lab == -1) {
        for (int64_t e = 0; e < ell_rank[i]; ++e, ++dim) {
          if (sh[dim] == 1) continue;  // broadcast
          int id = kEllipsisBase + static_cast<int>(max_ell - ell_rank[i] + e);
          size_t k = std::find(all.begin(), all.end(), id) - all.begin();
          strides[i][k] += st[dim];
        }
        continue;
      }
      size_t k = std::find(all.begin(), all.end(), lab) - all.begin();
      strides[i][k] += st[dim++];
    }
  }
  Shape out_shape(sizes.begin(), sizes.begin() + nout);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, dtype, out_shape));
  // The cost is out_total * inner_total products, which the inputs' size does not bound (a
  // chain "ab,bc,cd,...,gh->ah" of 100 x 100 inputs sums 100^6 terms per output): the count
  // is checked for overflow, and the loop below stops for the run's deadline or a
  // terminate call (core/kernel_stop.h) instead of running for ever.
  const int64_t out_total = NumElements(out_shape);
  int64_t inner_total = 1;
  for (size_t k = nout; k < nall; ++k)
    if (__builtin_mul_overflow(inner_total, sizes[k], &inner_total) && out_total > 0)
      return InvalidArgument(node.Describe(), ": the contraction sums more than 2^63 terms per output element");
  KernelStop stop(node);
  bool ok = DispatchNumeric(dtype, [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      return;
    } else {
      constexpr bool kFloat = std::is_floating_point_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;
      using A = std::conditional_t<kFloat, double, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;
      auto load = [](const T& v) -> A {
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
          return static_cast<float>(v);
        else
          return static_cast<A>(v);
      };
      std::vector<const T*> ptr(ninputs);
      for (size_t i = 0; i < ninputs; ++i) ptr[i] = xs[i]->data<T>();
      T* yp = y->mutable_data<T>();
      auto run = [&](int64_t begin, int64_t end) {
        std::vector<int64_t> idx(nall, 0), base(ninputs), off(ninputs);
        int64_t steps = 0;
        for (int64_t o = begin; o < end; ++o) {
          int64_t rem = o;
          for (size_t k = nout; k-- > 0;) {
            idx[k] = rem % sizes[k];
            rem /= sizes[k];
          }
          for (size_t i = 0; i < ninputs; ++i) {
            base[i] = 0;
            for (size_t k = 0; k < nout; ++k) base[i] += idx[k] * strides[i][k];
            off[i] = base[i];
          }
          for (size_t k = nout; k < nall; ++k) idx[k] = 0;
          A acc = 0;
          for (int64_t r = 0; r < inner_total; ++r) {
            // Every 2^16 products of this thread.
            if ((++steps & kCheckEvery) == 0 && !stop.CheckNow()) return;
            A prod = 1;
            // Integer products and sums wrap, as numpy's einsum does, instead of overflowing.
            for (size_t i = 0; i < ninputs; ++i) prod = WrapMul(prod, load(ptr[i][off[i]]));
            acc = WrapAdd(acc, prod);
            // Advance the contracted odometer and the per-input offsets incrementally.
            for (size_t k = nall; k-- > nout;) {
              if (++idx[k] < sizes[k]) {
                for (size_t i = 0; i < ninputs; ++i) off[i] += strides[i][k];
                break;
              }
              idx[k] = 0;
              for (size_t i = 0; i < ninputs; ++i) off[i] -= strides[i][k] * (sizes[k] - 1);
            }
          }
          if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
            yp[o] = T(static_cast<float>(acc));
          else
            yp[o] = static_cast<T>(acc);
        }
      };
      if (ctx.pool())
        ctx.pool()->ParallelFor(out_total, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner_total, 1)), run);
      else
        run(0, out_total);
    }
  });
  if (!ok || dtype == DataType::kBool)
    return Unsupported(node.Describe(), ": unsupported input dtype ", DataTypeName(dtype));
  return stop.status();
}

}  // namespace

void RegisterEinsumKernels(KernelRegistry& r) {
  KernelDef d;
  d.op_type = "Einsum";
  d.since_version = 12;
  d.types = {DataType::kFloat, DataType::kDouble, DataType::kFloat16, DataType::kBFloat16,
             DataType::kInt32, DataType::kInt64,  DataType::kUInt32,  DataType::kUInt64};
  d.factory = [](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> { return MakeFnKernel(EinsumCompute); };
  r.Register(std::move(d));
}

}  // namespace strata
