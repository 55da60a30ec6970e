// com.microsoft Tokenizer: splits each string of a [C] or [N, C] string tensor into tokens,
// giving [C, T] or [N, C, T] padded with pad_value. scikit-learn text pipelines converted by
// skl2onnx (CountVectorizer, TfidfVectorizer) run StringNormalizer -> Tokenizer ->
// TfIdfVectorizer. Three modes, with ONNX Runtime 1.30's semantics (RE2, leftmost-longest):
//  - separators: each is a regular expression; the first splits the string, each next one
//    splits the pieces the previous left; pieces shorter than mincharnum characters are dropped;
//  - tokenexp: the tokens are the regular expression's successive matches of at least
//    mincharnum characters;
//  - characters: separators [""] or tokenexp ".": one token per UTF-8 character.
// With mark, each row starts with "\x02" and its tokens end with "\x03" (before the padding).
//
// Fast path: a tokenexp that is one ASCII character class repeated, "[...]+" (skl2onnx writes
// "[a-zA-Z0-9_]+"), is scanned with a byte table instead of RE2: its leftmost-longest matches
// are the maximal runs of class bytes (no byte of a multi-byte UTF-8 character is ASCII), and
// those of at least mincharnum characters are the tokens. KernelConfig::prefer_reference keeps
// RE2 for every pattern; the unit tests compare the two on random text.
#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/kernel.h"
#include "core/utf8.h"
#include "cpu/register.h"

namespace strata {
namespace {

// Characters in a piece of validated input (always UTF-8).
size_t CharsOf(std::string_view s) {
  size_t n = 0;
  Utf8Decode(s, nullptr, &n);
  return n;
}

using Row = std::vector<std::string_view>;

// The byte table of a pattern "[...]+" whose class lists printable ASCII characters and
// ranges only (no negation, escapes or nested classes); false for any other pattern.
bool AsciiClassRun(const std::string& p, std::array<bool, 256>* table) {
  if (p.size() < 4 || p[0] != '[' || p[p.size() - 2] != ']' || p.back() != '+' || p[1] == '^') return false;
  table->fill(false);
  const std::string body = p.substr(1, p.size() - 3);
  auto plain = [](char c) { return c >= 0x20 && c < 0x7F && c != '\\' && c != '[' && c != ']'; };
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (!plain(c)) return false;
    if (i + 2 < body.size() && body[i + 1] == '-') {  // a range c-d
      const char d = body[i + 2];
      if (!plain(d) || d < c) return false;
      for (int x = c; x <= d; ++x) (*table)[static_cast<unsigned char>(x)] = true;
      i += 2;
    } else {
      (*table)[static_cast<unsigned char>(c)] = true;
    }
  }
  return !body.empty();
}

class TokenizerKernel final : public OpKernel {
 public:
  Status Init(const Node& node, bool reference) {
    const Attribute* mark = node.FindAttr("mark");
    const Attribute* pad = node.FindAttr("pad_value");
    const Attribute* minchars = node.FindAttr("mincharnum");
    if (!mark || !pad || !minchars)
      return InvalidModel(node.Describe(), ": attributes mark, pad_value and mincharnum are required");
    mark_ = mark->i != 0;
    pad_ = pad->s;
    if (minchars->i <= 0) return InvalidModel(node.Describe(), ": mincharnum must be positive, got ", minchars->i);
    min_chars_ = static_cast<size_t>(minchars->i);
    const Attribute* seps = node.FindAttr("separators");
    const Attribute* exp = node.FindAttr("tokenexp");
    re2::RE2::Options options;
    options.set_longest_match(true);
    options.set_log_errors(false);
    if (seps) {
      if (seps->strings.empty()) return InvalidModel(node.Describe(), ": separators must not be empty");
      chars_ = seps->strings.size() == 1 && seps->strings[0].empty();
      for (size_t i = 0; !chars_ && i < seps->strings.size(); ++i) {
        auto re = std::make_unique<re2::RE2>(seps->strings[i], options);
        if (!re->ok())
          return InvalidModel(node.Describe(), ": separator ", i, " '", seps->strings[i],
                              "' is not a regular expression: ", re->error());
        separators_.push_back(std::move(re));
      }
    } else {
      if (!exp || exp->s.empty())
        return InvalidModel(node.Describe(), ": one of separators and tokenexp (non-empty) is required");
      chars_ = exp->s == ".";
      ascii_run_ = !chars_ && !reference && AsciiClassRun(exp->s, &table_);
      if (!chars_) {
        token_ = std::make_unique<re2::RE2>(exp->s, options);
        if (!token_->ok())
          return InvalidModel(node.Describe(), ": tokenexp '", exp->s,
                              "' is not a regular expression: ", token_->error());
      }
    }
    if (chars_ && min_chars_ >= 2)
      return InvalidModel(node.Describe(), ": mincharnum ", min_chars_, " is too big for character tokens");
    return Status::Ok();
  }

  const char* ImplName() const override { return ascii_run_ ? "ascii-class-scan" : "re2"; }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    if (!x || x->dtype() != DataType::kString)
      return InvalidArgument(node.Describe(), ": input must be a string tensor");
    if (x->rank() != 1 && x->rank() != 2)
      return InvalidArgument(node.Describe(), ": input must be [C] or [N, C], got ", ShapeToString(x->shape()));
    const int64_t n = x->num_elements();
    if (n == 0) {  // as ONNX Runtime: [N, 0] for [N, 0], and [0] for [0]
      Shape empty;
      if (x->rank() == 2) empty.push_back(x->dim(0));
      empty.push_back(0);
      return ctx.AllocateOutput(0, DataType::kString, empty).status();
    }
    const std::string* in = x->data<std::string>();
    std::vector<Row> rows(static_cast<size_t>(n));
    size_t max_tokens = 0;
    for (int64_t i = 0; i < n; ++i) {
      size_t chars = 0;
      if (!Utf8Decode(in[i], nullptr, &chars))
        return InvalidArgument(node.Describe(), ": input string ", i, " is not valid UTF-8");
      Row& row = rows[static_cast<size_t>(i)];
      if (chars_) {
        SplitChars(in[i], &row);
      } else if (ascii_run_) {
        ClassRuns(in[i], &row);
      } else if (token_) {
        if (chars >= min_chars_) MatchTokens(in[i], &row);
      } else {
        SplitBySeparators(in[i], &row);
      }
      max_tokens = std::max(max_tokens, row.size());
    }
    Shape shape = x->shape();
    shape.push_back(max_tokens == 0 ? 0 : static_cast<int64_t>(max_tokens + (mark_ ? 2 : 0)));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kString, shape));
    if (max_tokens == 0) return Status::Ok();
    std::string* out = y->mutable_data<std::string>();
    for (const Row& row : rows) {
      if (mark_) (out++)->assign(1, '\x02');
      for (std::string_view t : row) (out++)->assign(t.data(), t.size());
      if (mark_) (out++)->assign(1, '\x03');
      for (size_t p = row.size(); p < max_tokens; ++p) *out++ = pad_;
    }
    return Status::Ok();
  }

 private:
  static void SplitChars(const std::string& s, Row* row) {
    for (size_t i = 0; i < s.size();) {
      const size_t len = Utf8SequenceLength(static_cast<unsigned char>(s[i]));
      row->emplace_back(s.data() + i, len);
      i += len;
    }
  }

  // The maximal runs of class bytes, those of at least mincharnum characters (all ASCII, so
  // one byte each).
  void ClassRuns(const std::string& s, Row* row) const {
    for (size_t i = 0; i < s.size();) {
      if (!table_[static_cast<unsigned char>(s[i])]) {
        ++i;
        continue;
      }
      size_t j = i + 1;
      while (j < s.size() && table_[static_cast<unsigned char>(s[j])]) ++j;
      if (j - i >= min_chars_) row->emplace_back(s.data() + i, j - i);
      i = j;
    }
  }

  // Successive leftmost-longest matches; a match shorter than mincharnum is skipped by one
  // character, so a longer match starting inside it can still be found.
  void MatchTokens(const std::string& s, Row* row) const {
    size_t start = 0;
    re2::StringPiece m;
    while (start <= s.size() && token_->Match(s, start, s.size(), re2::RE2::UNANCHORED, &m, 1)) {
      const size_t pos = static_cast<size_t>(m.data() - s.data());
      if (CharsOf(std::string_view(m.data(), m.size())) >= min_chars_) {
        row->emplace_back(m.data(), m.size());
        start = pos + m.size();
      } else {
        if (pos >= s.size()) break;
        start = pos + Utf8SequenceLength(static_cast<unsigned char>(s[pos]));
      }
    }
  }

  // Each separator splits the pieces the previous ones left; nothing left ends the row empty.
  void SplitBySeparators(const std::string& s, Row* row) const {
    row->assign(1, std::string_view(s));
    Row pieces;
    for (const auto& sep : separators_) {
      pieces.clear();
      for (std::string_view text : *row) {
        const re2::StringPiece sp(text.data(), text.size());
        size_t start = 0;
        re2::StringPiece m;
        while (start <= text.size() && sep->Match(sp, start, text.size(), re2::RE2::UNANCHORED, &m, 1)) {
          const size_t pos = static_cast<size_t>(m.data() - text.data());
          Keep(text.substr(start, pos - start), &pieces);
          // An empty match moves on by one character, so the loop always advances.
          start =
              pos + (m.size() > 0 ? m.size()
                                  : Utf8SequenceLength(static_cast<unsigned char>(pos < text.size() ? text[pos] : 0)));
        }
        if (start < text.size()) Keep(text.substr(start), &pieces);
      }
      if (pieces.empty()) {
        row->clear();
        return;
      }
      row->swap(pieces);
    }
  }

  void Keep(std::string_view piece, Row* out) const {
    if (!piece.empty() && CharsOf(piece) >= min_chars_) out->push_back(piece);
  }

  bool mark_ = false;
  bool chars_ = false;
  bool ascii_run_ = false;  // tokenexp "[...]+" of ASCII: the byte-table scan
  std::array<bool, 256> table_{};
  std::string pad_;
  size_t min_chars_ = 1;
  std::vector<std::unique_ptr<re2::RE2>> separators_;
  std::unique_ptr<re2::RE2> token_;
};

}  // namespace

void RegisterTokenizerKernels(KernelRegistry& r) {
  KernelDef d;
  d.domain = "com.microsoft";
  d.op_type = "Tokenizer";
  d.since_version = 1;
  d.type_input = -1;
  d.factory = [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    auto k = std::make_unique<TokenizerKernel>();
    RETURN_IF_ERROR(k->Init(init.node, init.config.prefer_reference));
    return std::unique_ptr<OpKernel>(std::move(k));
  };
  r.Register(std::move(d));
}

}  // namespace strata
