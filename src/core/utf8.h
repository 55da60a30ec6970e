// UTF-8 decoding and encoding shared by the string code (the Tokenizer, .npy 'U' strings).
// Strict: a stray or missing continuation byte, an overlong form, a surrogate or a value past
// U+10FFFF is not UTF-8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

// Bytes of the character whose first byte is `lead` (1 for a byte that cannot start one).
size_t Utf8SequenceLength(unsigned char lead);
// Decodes `s` into code points (cps may be null to only validate); false when `s` is not
// UTF-8. *count, if given, receives the number of characters.
bool Utf8Decode(std::string_view s, std::vector<uint32_t>* cps, size_t* count = nullptr);
// Appends code point `cp` (at most U+10FFFF, not a surrogate) to `out` as UTF-8.
void AppendUtf8(uint32_t cp, std::string* out);

}  // namespace strata
