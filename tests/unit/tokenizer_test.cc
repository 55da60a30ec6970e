// com.microsoft Tokenizer (cpu/string_tokenizer.cc): the three modes, marks, padding, shapes,
// mincharnum, UTF-8, and one error per bad attribute or input. Expected tokens are written out
// by hand from ONNX Runtime 1.30's rules (bench/compare-ort/text_parity.py checks the same
// behaviour against it).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernel_harness.h"

namespace strata {
namespace {

using testing::OpSpec;
using testing::RunKernel;
using testing::ToVector;

Tensor Str(const Shape& s, const std::vector<std::string>& v) { return Tensor::FromVector<std::string>(v, s); }

OpSpec Tok(int64_t mark = 0, int64_t mincharnum = 1, const std::string& pad = "#") {
  return OpSpec("Tokenizer", 1, "com.microsoft")
      .Attr("mark", mark)
      .Attr("mincharnum", mincharnum)
      .Attr("pad_value", pad);
}

void Expect(const OpSpec& spec, const Tensor& x, const Shape& shape, const std::vector<std::string>& want) {
  auto out = RunKernel(spec, {x});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(ShapeToString((*out)[0].shape()), ShapeToString(shape));
  EXPECT_EQ(ToVector<std::string>((*out)[0]), want);
}

void ExpectError(const OpSpec& spec, const Tensor& x, const std::string& needle) {
  auto out = RunKernel(spec, {x});
  ASSERT_FALSE(out.ok()) << "expected an error naming '" << needle << "'";
  EXPECT_NE(out.status().message().find(needle), std::string::npos) << out.status().ToString();
}

TEST(Tokenizer, TokenExpressionPadsRowsToTheLongest) {
  // skl2onnx's default pattern; the second string gives fewer tokens and is padded.
  Expect(Tok().Attr("tokenexp", "[a-zA-Z0-9_]+"), Str({2}, {"the cat, sat!", "a dog"}), {2, 3},
         {"the", "cat", "sat", "a", "dog", "#"});
}

TEST(Tokenizer, MincharnumSkipsShortMatchesByOneCharacter) {
  // With leftmost-longest matching, "a" is too short and is skipped; "bb" and "ccc" stay.
  Expect(Tok(0, 2).Attr("tokenexp", "[a-z]+"), Str({1}, {"a bb ccc"}), {1, 2}, {"bb", "ccc"});
  // A short match is skipped one character at a time, so a longer match inside it is found:
  // "a" (too short) then "b1".
  Expect(Tok(0, 2).Attr("tokenexp", "[a-z][0-9]*"), Str({1}, {"ab1"}), {1, 1}, {"b1"});
}

TEST(Tokenizer, SeparatorsSplitInTurn) {
  // The first separator splits the string, the second the pieces; empty pieces vanish.
  Expect(Tok().Attr("separators", std::vector<std::string>{" ", ","}), Str({2}, {"a,b c", "d  e,,f"}), {2, 3},
         {"a", "b", "c", "d", "e", "f"});
  // Separators are regular expressions (here one or more spaces or a dot).
  Expect(Tok().Attr("separators", std::vector<std::string>{"[ .]+"}), Str({1}, {" one. two  "}), {1, 2},
         {"one", "two"});
  // Pieces under mincharnum characters are dropped.
  Expect(Tok(0, 3).Attr("separators", std::vector<std::string>{" "}), Str({1}, {"ab abc abcd"}), {1, 2},
         {"abc", "abcd"});
}

TEST(Tokenizer, CharactersAndMarks) {
  // separators [""] or tokenexp ".": one token per UTF-8 character; the marks go around the
  // tokens, before the padding.
  Expect(Tok(1).Attr("separators", std::vector<std::string>{""}), Str({2}, {"ab", "\xc3\xa9"}), {2, 4},
         {"\x02", "a", "b", "\x03", "\x02", "\xc3\xa9", "\x03", "#"});
  Expect(Tok().Attr("tokenexp", "."), Str({1}, {"xyz"}), {1, 3}, {"x", "y", "z"});
  Expect(Tok(1).Attr("tokenexp", "[a-z]+"), Str({1}, {"hi there"}), {1, 4}, {"\x02", "hi", "there", "\x03"});
}

TEST(Tokenizer, ShapesOfBatchesAndEmptyInputs) {
  Expect(Tok().Attr("tokenexp", "[a-z]+"), Str({2, 2}, {"a b", "c", "", "d e f"}), {2, 2, 3},
         {"a", "b", "#", "c", "#", "#", "#", "#", "#", "d", "e", "f"});
  // No token anywhere: a last dimension of 0, without marks.
  Expect(Tok(1).Attr("tokenexp", "[a-z]+"), Str({2}, {"12", ""}), {2, 0}, {});
  Expect(Tok().Attr("tokenexp", "[a-z]+"), Str({0}, {}), {0}, {});
  Expect(Tok().Attr("tokenexp", "[a-z]+"), Str({3, 0}, {}), {3, 0}, {});
}

TEST(Tokenizer, Utf8Tokens) {
  Expect(Tok(0, 2).Attr("tokenexp", "\\pL+"), Str({1}, {"\xc3\xa9t\xc3\xa9 \xc3\xa0 na\xc3\xafve"}), {1, 2},
         {"\xc3\xa9t\xc3\xa9", "na\xc3\xafve"});
}

// The byte-table scan of "[...]+" patterns against RE2 (KernelConfig::prefer_reference) on
// random text mixing ASCII letters, digits, punctuation, spaces and multi-byte characters.
TEST(Tokenizer, AsciiClassScanMatchesRe2) {
  const std::vector<std::string> alphabet = {
      "a", "Z", "q", "7", "_", " ", ",", "-", ".", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9d\x84\x9e", "\n", "x"};
  std::mt19937 rng(3);
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i) {
    std::string s;
    const int len = static_cast<int>(rng() % 40);
    for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
    texts.push_back(s);
  }
  const Tensor x = Str({8, 8}, texts);
  for (const std::string pattern : {"[a-zA-Z0-9_]+", "[a-z]+", "[0-9_-]+", "[.,]+", "[x]+"}) {
    for (int64_t minchars : {1, 2, 3}) {
      for (int64_t mark : {0, 1}) {
        SCOPED_TRACE(pattern + " mincharnum " + std::to_string(minchars) + " mark " + std::to_string(mark));
        OpSpec spec = Tok(mark, minchars).Attr("tokenexp", pattern);
        testing::RunOptions ref;
        ref.config.prefer_reference = true;
        auto fast = RunKernel(spec, {x});
        auto slow = RunKernel(spec, {x}, ref);
        ASSERT_TRUE(fast.ok() && slow.ok());
        EXPECT_EQ(ShapeToString((*fast)[0].shape()), ShapeToString((*slow)[0].shape()));
        EXPECT_EQ(ToVector<std::string>((*fast)[0]), ToVector<std::string>((*slow)[0]));
      }
    }
  }
}

TEST(Tokenizer, Errors) {
  const Tensor x = Str({1}, {"a b"});
  ExpectError(OpSpec("Tokenizer", 1, "com.microsoft").Attr("tokenexp", "a"), x,
              "mark, pad_value and mincharnum are required");
  ExpectError(Tok(0, 0).Attr("tokenexp", "a"), x, "mincharnum must be positive");
  ExpectError(Tok(), x, "one of separators and tokenexp");
  ExpectError(Tok().Attr("tokenexp", "("), x, "tokenexp '(' is not a regular expression");
  ExpectError(Tok().Attr("separators", std::vector<std::string>{" ", "[z-a]"}), x,
              "separator 1 '[z-a]' is not a regular expression");
  ExpectError(Tok(0, 2).Attr("tokenexp", "."), x, "too big for character tokens");
  ExpectError(Tok().Attr("tokenexp", "[a-z]+"), Str({1}, {"ok \xff"}), "input string 0 is not valid UTF-8");
  ExpectError(Tok().Attr("tokenexp", "[a-z]+"), Str({1, 1, 1}, {"a"}), "[C] or [N, C]");
  ExpectError(Tok().Attr("tokenexp", "[a-z]+"), Tensor::FromVector<float>({1.0f}, {1}), "string tensor");
}

}  // namespace
}  // namespace strata
