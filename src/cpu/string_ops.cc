// String ops: StringNormalizer (opset 10), TfIdfVectorizer (opset 9), and opset 20's
// StringConcat, StringSplit and RegexFullMatch (RE2, the engine ONNX Runtime uses).
//
// StringNormalizer's case folding and case-insensitive stopword matching use ASCII
// rules only: the `locale` attribute is accepted but ignored (bytes outside A-Z/a-z are
// left unchanged), which matches the en_US behaviour for ASCII text.
#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "cpu/fn_kernel_def.h"
#include "cpu/register.h"

namespace strata {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

class StringNormalizerKernel final : public OpKernel {
 public:
  StringNormalizerKernel(int action, bool case_sensitive, std::vector<std::string> stop)
      : action_(action), case_sensitive_(case_sensitive) {
    for (auto& s : stop) stop_.insert(case_sensitive_ ? s : Lower(s));
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument(node.Describe(), ": input is missing");
    if (x->dtype() != DataType::kString)
      return InvalidArgument(node.Describe(), ": input must be a string tensor, got ", DataTypeName(x->dtype()));
    const bool two_d = x->rank() == 2;
    if (!(x->rank() == 1 || (two_d && x->dim(0) == 1)))
      return InvalidArgument(node.Describe(), ": input must be [C] or [1, C], got ", ShapeToString(x->shape()));
    std::vector<std::string> kept;
    const std::string* in = x->data<std::string>();
    for (int64_t i = 0, n_elems = x->num_elements(); i < n_elems; ++i) {
      if (!stop_.empty() && stop_.count(case_sensitive_ ? in[i] : Lower(in[i]))) continue;
      kept.push_back(action_ == 1 ? Lower(in[i]) : action_ == 2 ? Upper(in[i]) : in[i]);
    }
    // All strings filtered out: the output is one empty string (spec).
    if (kept.empty()) kept.emplace_back();
    const int64_t k = static_cast<int64_t>(kept.size());
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kString, two_d ? Shape{1, k} : Shape{k}));
    std::string* out = y->mutable_data<std::string>();
    for (int64_t i = 0; i < k; ++i) out[i] = std::move(kept[i]);
    return Status::Ok();
  }

 private:
  int action_;  // 0 none, 1 lower, 2 upper
  bool case_sensitive_;
  std::set<std::string> stop_;
};

Result<std::unique_ptr<OpKernel>> MakeStringNormalizer(const KernelInit& init) {
  const Node& node = init.node;
  const std::string a = node.GetString("case_change_action", "NONE");
  int action;
  if (a == "NONE") {
    action = 0;
  } else if (a == "LOWER") {
    action = 1;
  } else if (a == "UPPER") {
    action = 2;
  } else {
    return InvalidModel(node.Describe(), ": case_change_action must be NONE, LOWER or UPPER, got '", a, "'");
  }
  return std::unique_ptr<OpKernel>(std::make_unique<StringNormalizerKernel>(
      action, node.GetInt("is_case_sensitive", 0) != 0, node.GetStrings("stopwords")));
}

enum class TfIdfMode { kTf, kIdf, kTfIdf };

class TfIdfKernel final : public OpKernel {
 public:
  Status Init(const Node& node) {
    const std::string m = node.GetString("mode", "");
    if (m == "TF") {
      mode_ = TfIdfMode::kTf;
    } else if (m == "IDF") {
      mode_ = TfIdfMode::kIdf;
    } else if (m == "TFIDF") {
      mode_ = TfIdfMode::kTfIdf;
    } else {
      return InvalidModel(node.Describe(), ": mode must be TF, IDF or TFIDF, got '", m, "'");
    }
    min_n_ = node.GetInt("min_gram_length", 0);
    max_n_ = node.GetInt("max_gram_length", 0);
    max_skip_ = node.GetInt("max_skip_count", 0);
    if (min_n_ < 1 || max_n_ < min_n_)
      return InvalidModel(node.Describe(), ": need 1 <= min_gram_length <= max_gram_length, got ", min_n_, " and ",
                          max_n_);
    if (max_skip_ < 0) return InvalidModel(node.Describe(), ": max_skip_count must be >= 0");
    const std::vector<int64_t> counts = node.GetInts("ngram_counts");
    const std::vector<int64_t> indexes = node.GetInts("ngram_indexes");
    weights_ = node.GetFloats("weights");
    const std::vector<int64_t> pool_i = node.GetInts("pool_int64s");
    const std::vector<std::string> pool_s = node.GetStrings("pool_strings");
    strings_ = !pool_s.empty();
    if (strings_ == !pool_i.empty())
      return InvalidModel(node.Describe(), ": exactly one of pool_strings and pool_int64s must be given");
    const int64_t pool_size = strings_ ? static_cast<int64_t>(pool_s.size()) : static_cast<int64_t>(pool_i.size());
    for (int64_t idx : indexes) out_size_ = std::max(out_size_, idx + 1);
    if (!weights_.empty() && static_cast<int64_t>(weights_.size()) < out_size_)
      return InvalidModel(node.Describe(), ": weights has ", weights_.size(), " entries but the output has ", out_size_,
                          " columns");
    // ngram_counts[i] is where the (i+1)-grams start in the pool.
    int64_t k = 0;
    for (size_t g = 0; g < counts.size(); ++g) {
      const int64_t n = static_cast<int64_t>(g) + 1;
      const int64_t begin = counts[g];
      const int64_t end = g + 1 < counts.size() ? counts[g + 1] : pool_size;
      if (begin < 0 || end > pool_size || begin > end || (end - begin) % n != 0)
        return InvalidModel(node.Describe(), ": ngram_counts ", g, " gives a pool range [", begin, ", ", end,
                            ") that does not hold whole ", n, "-grams");
      for (int64_t p = begin; p < end; p += n, ++k) {
        if (k >= static_cast<int64_t>(indexes.size()))
          return InvalidModel(node.Describe(), ": the pool has more n-grams than ngram_indexes entries");
        if (indexes[k] < 0) return InvalidModel(node.Describe(), ": ngram_indexes must be non-negative");
        if (strings_) {
          // String n-grams are matched as n-grams of vocabulary ids (each distinct pool string
          // gets one), so a lookup compares integers instead of copying strings.
          std::vector<int64_t> key;
          for (int64_t j = 0; j < n; ++j)
            key.push_back(ids_.emplace(pool_s[p + j], static_cast<int64_t>(ids_.size())).first->second);
          int_map_[key] = {indexes[k], k};
          if (n == 1) {
            unigrams_.resize(ids_.size(), {-1, -1});
            unigrams_[static_cast<size_t>(key[0])] = {indexes[k], k};
          }
        } else {
          int_map_[std::vector<int64_t>(pool_i.begin() + p, pool_i.begin() + p + n)] = {indexes[k], k};
        }
      }
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument(node.Describe(), ": input is missing");
    const bool is_str = x->dtype() == DataType::kString;
    if (is_str != strings_ || (!is_str && x->dtype() != DataType::kInt64 && x->dtype() != DataType::kInt32))
      return InvalidArgument(node.Describe(), ": input dtype ", DataTypeName(x->dtype()), " does not match the ",
                             strings_ ? "string" : "int64", " pool");
    if (x->rank() != 1 && x->rank() != 2)
      return InvalidArgument(node.Describe(), ": input must be [C] or [N, C], got ", ShapeToString(x->shape()));
    const int64_t rows = x->rank() == 2 ? x->dim(0) : 1;
    const int64_t cols = x->rank() == 2 ? x->dim(1) : x->dim(0);
    // String tokens become their vocabulary ids (-1: in no pool n-gram, so matching nothing).
    std::vector<int64_t> token_ids;
    if (is_str) {
      const std::string* tokens = x->data<std::string>();
      token_ids.resize(static_cast<size_t>(rows * cols));
      for (int64_t e = 0; e < rows * cols; ++e) {
        auto it = ids_.find(tokens[e]);
        token_ids[static_cast<size_t>(e)] = it == ids_.end() ? -1 : it->second;
      }
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat,
                                                    x->rank() == 2 ? Shape{rows, out_size_} : Shape{out_size_}));
    float* out = y->mutable_data<float>();
    std::fill(out, out + rows * out_size_, 0.0f);
    std::vector<int64_t> counts(static_cast<size_t>(out_size_));
    std::vector<int64_t> ikey;
    // The shortest n-gram with gaps: once it no longer fits after position s at some skip,
    // no n-gram fits at a wider one (max_skip_count is an attribute: 2^20 of them per
    // position ran for hours over a short input). What fits is still quadratic in the row
    // (every start times every gap): the run's limits are read every 2^20 lookups.
    const int64_t gapped = std::max<int64_t>(min_n_, 2);
    KernelStop stop(ctx.node());
    int64_t pending = 0;
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(counts.begin(), counts.end(), 0);
      for (int64_t s = 0; s < cols; ++s) {
        if (!stop.Continue(pending, max_n_ - min_n_ + 1)) return stop.status();
        for (int64_t skip = 0; skip <= max_skip_; ++skip) {
          // (s + (gapped - 1) * (skip + 1) >= cols, without the product: gapped may be 2^62)
          if (skip > 0 && (gapped > max_n_ || gapped - 1 > (cols - 1 - s) / (skip + 1))) break;
          if (skip > 0 && !stop.Continue(pending, max_n_ - min_n_ + 1)) return stop.status();
          for (int64_t n = min_n_; n <= max_n_; ++n) {
            if (n == 1 && skip > 0) continue;  // unigrams have no gaps: count them once
            if (s + (n - 1) * (skip + 1) >= cols) break;
            const std::pair<int64_t, int64_t>* hit = nullptr;
            if (is_str && n == 1) {  // the common case (bag of words): a table lookup
              const int64_t id = token_ids[static_cast<size_t>(r * cols + s)];
              if (id >= 0 && static_cast<size_t>(id) < unigrams_.size() &&
                  unigrams_[static_cast<size_t>(id)].first >= 0)
                ++counts[unigrams_[static_cast<size_t>(id)].first];
              continue;
            }
            ikey.clear();
            for (int64_t j = 0; j < n; ++j) {
              const int64_t e = r * cols + s + j * (skip + 1);
              ikey.push_back(is_str ? token_ids[static_cast<size_t>(e)]
                                    : (x->dtype() == DataType::kInt64 ? x->data<int64_t>()[e] : x->data<int32_t>()[e]));
            }
            if (!is_str || std::find(ikey.begin(), ikey.end(), -1) == ikey.end()) {
              auto it = int_map_.find(ikey);
              if (it != int_map_.end()) hit = &it->second;
            }
            if (hit) {
              ++counts[hit->first];
            }
          }
        }
      }
      for (int64_t i = 0; i < out_size_; ++i) {
        if (counts[i] == 0) continue;
        // Weights are indexed by output column, as ONNX Runtime and the ONNX reference do (the
        // spec text says pool order; the two agree when ngram_indexes is the identity).
        const float w = weights_.empty() ? 1.0f : weights_[i];
        float v = static_cast<float>(counts[i]);
        if (mode_ == TfIdfMode::kIdf) v = w;
        if (mode_ == TfIdfMode::kTfIdf) v *= w;
        out[r * out_size_ + i] = v;
      }
    }
    return Status::Ok();
  }

 private:
  TfIdfMode mode_ = TfIdfMode::kTf;
  int64_t min_n_ = 1, max_n_ = 1, max_skip_ = 0, out_size_ = 0;
  bool strings_ = false;
  std::vector<float> weights_;
  // n-gram (of int64 values, or of the vocabulary ids of pool strings) -> (output column,
  // n-gram ordinal in the pool)
  std::map<std::vector<int64_t>, std::pair<int64_t, int64_t>> int_map_;
  std::unordered_map<std::string, int64_t> ids_;  // pool string -> vocabulary id
  // String unigrams by vocabulary id: (output column, ordinal), or (-1, -1) when the string
  // only occurs inside longer n-grams.
  std::vector<std::pair<int64_t, int64_t>> unigrams_;
};

// ---------------------------------------------------------------- opset 20

Result<const Tensor*> StringInput(const KernelContext& ctx, size_t i, const char* what) {
  const Tensor* t = ctx.input(i);
  if (!t) return InvalidArgument(ctx.node().Describe(), ": input '", what, "' is missing");
  if (t->dtype() != DataType::kString)
    return InvalidArgument(ctx.node().Describe(), ": input '", what, "' must be a string tensor, got ",
                           DataTypeName(t->dtype()));
  return t;
}

// Z = X + Y elementwise, numpy broadcasting.
Status StringConcatOp(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* a, StringInput(ctx, 0, "X"));
  ASSIGN_OR_RETURN(const Tensor* b, StringInput(ctx, 1, "Y"));
  ASSIGN_OR_RETURN(Shape out_shape, BroadcastShapes(a->shape(), b->shape(), node));
  ASSIGN_OR_RETURN(Tensor * z, ctx.AllocateOutput(0, DataType::kString, out_shape));
  const size_t rank = out_shape.size();
  // Element strides of each input over the output's axes (0 where it is broadcast).
  auto strides = [&](const Tensor& t) {
    std::vector<int64_t> st(rank, 0);
    int64_t s = 1;
    for (size_t i = 0; i < t.rank(); ++i) {
      const size_t d = t.rank() - 1 - i, o = rank - 1 - i;
      st[o] = t.dim(d) == 1 ? 0 : s;
      s *= t.dim(d);
    }
    return st;
  };
  const std::vector<int64_t> sa = strides(*a), sb = strides(*b);
  const std::string* pa = a->data<std::string>();
  const std::string* pb = b->data<std::string>();
  std::string* pz = z->mutable_data<std::string>();
  std::vector<int64_t> idx(rank, 0);
  int64_t ia = 0, ib = 0;
  for (int64_t o = 0; o < z->num_elements(); ++o) {
    pz[o].reserve(pa[ia].size() + pb[ib].size());
    pz[o] = pa[ia];
    pz[o] += pb[ib];
    for (size_t d = rank; d-- > 0;) {
      ia += sa[d];
      ib += sb[d];
      if (++idx[d] < out_shape[d]) break;
      ia -= sa[d] * out_shape[d];
      ib -= sb[d] * out_shape[d];
      idx[d] = 0;
    }
  }
  return Status::Ok();
}

bool IsSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// Python's str.split: with a delimiter, every occurrence splits (empty pieces kept); without
// one (absent or ""), runs of whitespace split and leading/trailing whitespace is dropped.
// maxsplit >= 0 caps the splits; the rest of the string is the last piece. Two differences,
// ONNX Runtime 1.30's: an empty string has no pieces with a delimiter too (Python: [""]), and
// on whitespace the remainder after maxsplit loses its trailing whitespace (Python keeps it).
std::vector<std::string_view> SplitOne(std::string_view s, const std::string& delim, int64_t maxsplit) {
  std::vector<std::string_view> parts;
  int64_t splits = 0;
  if (s.empty()) return parts;
  if (!delim.empty()) {
    size_t start = 0;
    while (maxsplit < 0 || splits < maxsplit) {
      const size_t at = s.find(delim, start);
      if (at == std::string_view::npos) break;
      parts.push_back(s.substr(start, at - start));
      start = at + delim.size();
      ++splits;
    }
    parts.push_back(s.substr(start));
    return parts;
  }
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && IsSpace(s[i])) ++i;
    if (i == s.size()) break;
    if (maxsplit >= 0 && splits == maxsplit) {
      size_t end = s.size();
      while (end > i && IsSpace(s[end - 1])) --end;
      parts.push_back(s.substr(i, end - i));
      break;
    }
    size_t j = i;
    while (j < s.size() && !IsSpace(s[j])) ++j;
    parts.push_back(s.substr(i, j - i));
    ++splits;
    i = j;
  }
  return parts;
}

// X [...] -> Y [..., max pieces] (padded with ""), Z [...] int64 piece counts.
Status StringSplitOp(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, StringInput(ctx, 0, "X"));
  const std::string delim = node.GetString("delimiter", "");
  const int64_t maxsplit = node.HasAttr("maxsplit") ? node.GetInt("maxsplit", -1) : -1;
  const int64_t n = x->num_elements();
  const std::string* in = x->data<std::string>();
  std::vector<std::vector<std::string_view>> parts(static_cast<size_t>(n));
  int64_t widest = 0;
  for (int64_t i = 0; i < n; ++i) {
    parts[i] = SplitOne(in[i], delim, maxsplit);
    widest = std::max<int64_t>(widest, static_cast<int64_t>(parts[i].size()));
  }
  Shape y_shape = x->shape();
  y_shape.push_back(widest);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kString, y_shape));
  ASSIGN_OR_RETURN(Tensor * z, ctx.AllocateOutput(1, DataType::kInt64, x->shape()));
  std::string* py = y->mutable_data<std::string>();
  int64_t* pz = z->mutable_data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    pz[i] = static_cast<int64_t>(parts[i].size());
    for (size_t k = 0; k < parts[i].size(); ++k) py[i * widest + static_cast<int64_t>(k)] = std::string(parts[i][k]);
  }
  return Status::Ok();
}

// Y = whether each string matches `pattern` as a whole (RE2 syntax).
class RegexFullMatchKernel final : public OpKernel {
 public:
  static Result<std::unique_ptr<OpKernel>> Make(const KernelInit& init) {
    const Node& node = init.node;
    if (!node.HasAttr("pattern")) return InvalidModel(node.Describe(), ": attribute 'pattern' is required");
    auto k = std::make_unique<RegexFullMatchKernel>();
    RE2::Options opts;
    opts.set_log_errors(false);
    k->re_ = std::make_unique<RE2>(node.GetString("pattern", ""), opts);
    if (!k->re_->ok())
      return InvalidModel(node.Describe(), ": pattern '", node.GetString("pattern", ""), "' is not a valid RE2 ",
                          "regular expression: ", k->re_->error());
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    ASSIGN_OR_RETURN(const Tensor* x, StringInput(ctx, 0, "X"));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kBool, x->shape()));
    const std::string* in = x->data<std::string>();
    bool* out = y->mutable_data<bool>();
    for (int64_t i = 0; i < x->num_elements(); ++i) out[i] = RE2::FullMatch(in[i], *re_);
    return Status::Ok();
  }

 private:
  std::unique_ptr<RE2> re_;
};

}  // namespace

void RegisterStringKernels(KernelRegistry& r) {
  r.Register(UntypedFnDef("StringConcat", 20, StringConcatOp));
  r.Register(UntypedFnDef("StringSplit", 20, StringSplitOp));
  KernelDef re;
  re.op_type = "RegexFullMatch";
  re.since_version = 20;
  re.type_input = -1;
  re.factory = RegexFullMatchKernel::Make;
  r.Register(re);
  KernelDef sn;
  sn.op_type = "StringNormalizer";
  sn.since_version = 10;
  sn.type_input = -1;
  sn.factory = MakeStringNormalizer;
  r.Register(sn);
  KernelDef tf;
  tf.op_type = "TfIdfVectorizer";
  tf.since_version = 9;
  tf.type_input = -1;
  tf.factory = [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    auto k = std::make_unique<TfIdfKernel>();
    RETURN_IF_ERROR(k->Init(init.node));
    return std::unique_ptr<OpKernel>(std::move(k));
  };
  r.Register(tf);
}

}  // namespace strata
