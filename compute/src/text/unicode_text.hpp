// Unicode text helpers (internal) for the tokenizers: UTF-8 decoding that never reads past the end of its
// input and turns every byte that does not start a well-formed sequence into a unit of its own (so the
// original bytes always survive a split), and the character classes the pre-tokenizer patterns are written
// in (\p{L}, \p{N}, \s, ...), answered from a table built once from ICU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace loom::compute::detail {

// No well-formed UTF-8 decodes to this: it stands for one byte that is not part of a valid sequence.
inline constexpr char32_t kInvalidCodePoint = 0x110000;

struct Utf8Unit {
  char32_t code_point = kInvalidCodePoint;
  std::uint32_t length = 1;  // bytes, 1..4
};

// The unit starting at text[offset] (offset < text.size()). Stray continuation bytes, overlong forms,
// surrogates, values past U+10FFFF and sequences cut short (by the end of the text or by a byte that is not
// a continuation) give {kInvalidCodePoint, 1}: one byte is consumed and decoding resumes after it.
Utf8Unit decode_utf8(std::string_view text, std::size_t offset) noexcept;

// Appends the UTF-8 form of `code_point` (which must be a Unicode scalar value).
void append_utf8(std::string& out, char32_t code_point);

// Character classes, as bits: a code point has at most one of the general-category bits (none for
// separators, controls, formats, unassigned and private-use characters), plus `whitespace` when it has the
// White_Space property (what `\s` matches in Unicode-aware regex engines).
using CharClasses = std::uint8_t;
namespace char_class {
inline constexpr CharClasses upper = 1u << 0;         // Lu, Lt
inline constexpr CharClasses lower = 1u << 1;         // Ll
inline constexpr CharClasses other_letter = 1u << 2;  // Lm, Lo
inline constexpr CharClasses mark = 1u << 3;          // Mn, Mc, Me
inline constexpr CharClasses number = 1u << 4;        // Nd, Nl, No
inline constexpr CharClasses punctuation = 1u << 5;   // Pc, Pd, Ps, Pe, Pi, Pf, Po
inline constexpr CharClasses symbol = 1u << 6;        // Sm, Sc, Sk, So; also kInvalidCodePoint, like U+FFFD
inline constexpr CharClasses whitespace = 1u << 7;    // White_Space
inline constexpr CharClasses letter = upper | lower | other_letter;
}  // namespace char_class

CharClasses char_classes(char32_t code_point) noexcept;

}  // namespace loom::compute::detail
