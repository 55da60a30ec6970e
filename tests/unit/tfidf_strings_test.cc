// TfIdfVectorizer on string tokens (cpu/string_ops.cc matches them as vocabulary ids, with a
// table for unigrams) against a plain count written here: every n-gram of every allowed gap,
// compared as strings. Random token rows over a small vocabulary plus words outside it and the
// Tokenizer's pad, with unigrams, bigrams, trigrams, skips and a word that occurs only inside a
// bigram; and hand-checked counts for one row.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernel_harness.h"

namespace strata {
namespace {

using testing::OpSpec;
using testing::RunKernel;
using testing::ToVector;

struct Pool {
  std::vector<std::string> strings;
  std::vector<int64_t> counts;  // ngram_counts
  std::vector<int64_t> indexes;
};

// unigrams a b c d, bigrams (a b) (x y) (b a), trigram (a b c); "x" and "y" only in a bigram.
Pool MakePool() {
  Pool p;
  p.strings = {"a", "b", "c", "d", "a", "b", "x", "y", "b", "a", "a", "b", "c"};
  p.counts = {0, 4, 10};
  p.indexes = {3, 0, 1, 2, 4, 5, 6, 7};
  return p;
}

OpSpec Spec(const Pool& p, int64_t min_n, int64_t max_n, int64_t skip, const std::string& mode,
            const std::vector<float>& weights) {
  OpSpec s("TfIdfVectorizer", 9);
  s.Attr("mode", mode)
      .Attr("min_gram_length", min_n)
      .Attr("max_gram_length", max_n)
      .Attr("max_skip_count", skip)
      .Attr("ngram_counts", p.counts)
      .Attr("ngram_indexes", p.indexes)
      .Attr("pool_strings", p.strings);
  if (!weights.empty()) s.Attr("weights", weights);
  return s;
}

// The plain count: every n-gram in [min_n, max_n] at every gap up to `skip` (unigrams once).
std::vector<float> Reference(const Pool& p, const std::vector<std::string>& row, int64_t min_n, int64_t max_n,
                             int64_t skip, const std::string& mode, const std::vector<float>& weights) {
  std::map<std::vector<std::string>, int64_t> column;
  int64_t k = 0;
  for (size_t g = 0; g < p.counts.size(); ++g) {
    const int64_t n = static_cast<int64_t>(g) + 1;
    const int64_t end = g + 1 < p.counts.size() ? p.counts[g + 1] : static_cast<int64_t>(p.strings.size());
    for (int64_t i = p.counts[g]; i < end; i += n, ++k)
      column[std::vector<std::string>(p.strings.begin() + i, p.strings.begin() + i + n)] = p.indexes[k];
  }
  std::vector<float> out(8, 0.0f);
  const int64_t cols = static_cast<int64_t>(row.size());
  for (int64_t s = 0; s < cols; ++s)
    for (int64_t n = min_n; n <= max_n; ++n)
      for (int64_t gap = 0; gap <= (n == 1 ? 0 : skip); ++gap) {
        if (s + (n - 1) * (gap + 1) >= cols) continue;
        std::vector<std::string> key;
        for (int64_t j = 0; j < n; ++j) key.push_back(row[s + j * (gap + 1)]);
        auto it = column.find(key);
        if (it != column.end()) out[it->second] += 1.0f;
      }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0) continue;
    const float w = weights.empty() ? 1.0f : weights[i];
    if (mode == "IDF") out[i] = w;
    if (mode == "TFIDF") out[i] *= w;
  }
  return out;
}

TEST(TfIdfStrings, HandCheckedRow) {
  const Pool p = MakePool();
  // a b c: unigrams a, b, c; bigram (a b); trigram (a b c). "q" and "#" match nothing.
  auto out = RunKernel(Spec(p, 1, 3, 0, "TF", {}), {Tensor::FromVector<std::string>({"q", "a", "b", "c", "#"}, {5})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(ToVector<float>((*out)[0]), (std::vector<float>{1, 1, 0, 1, 1, 0, 0, 1}));
}

TEST(TfIdfStrings, MatchesPlainCountOnRandomRows) {
  const Pool p = MakePool();
  const std::vector<std::string> words = {"a", "b", "c", "d", "x", "y", "zz", "#", ""};
  std::mt19937 rng(11);
  const std::vector<float> weights = {0.5f, 1.5f, 2.0f, 3.0f, 0.25f, 4.0f, 1.0f, 2.5f};
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t rows = 1 + trial % 3, cols = trial % 9;
    std::vector<std::string> tokens;
    for (int64_t i = 0; i < rows * cols; ++i) tokens.push_back(words[rng() % words.size()]);
    const int64_t min_n = 1 + trial % 2, max_n = min_n + trial % 3 > 3 ? 3 : min_n + trial % 3, skip = trial % 3;
    const std::string mode = trial % 3 == 0 ? "TF" : (trial % 3 == 1 ? "IDF" : "TFIDF");
    SCOPED_TRACE("trial " + std::to_string(trial));
    auto out =
        RunKernel(Spec(p, min_n, max_n, skip, mode, weights), {Tensor::FromVector<std::string>(tokens, {rows, cols})});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const std::vector<float> got = ToVector<float>((*out)[0]);
    ASSERT_EQ(got.size(), static_cast<size_t>(rows * 8));
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<std::string> row(tokens.begin() + r * cols, tokens.begin() + (r + 1) * cols);
      const std::vector<float> want = Reference(p, row, min_n, max_n, skip, mode, weights);
      EXPECT_EQ(std::vector<float>(got.begin() + r * 8, got.begin() + (r + 1) * 8), want) << "row " << r;
    }
  }
}

}  // namespace
}  // namespace strata
