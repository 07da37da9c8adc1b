#include "unicode_text.hpp"

#include <unicode/uchar.h>

#include <array>

namespace loom::compute::detail {

namespace {

bool is_continuation(unsigned char byte) { return (byte & 0xC0u) == 0x80u; }

CharClasses classes_from_icu(char32_t code_point) {
  const auto c = static_cast<UChar32>(code_point);
  const std::uint32_t category = U_GET_GC_MASK(c);
  CharClasses classes = 0;
  if (category & (U_GC_LU_MASK | U_GC_LT_MASK)) classes |= char_class::upper;
  if (category & U_GC_LL_MASK) classes |= char_class::lower;
  if (category & (U_GC_LM_MASK | U_GC_LO_MASK)) classes |= char_class::other_letter;
  if (category & U_GC_M_MASK) classes |= char_class::mark;
  if (category & U_GC_N_MASK) classes |= char_class::number;
  if (category & U_GC_P_MASK) classes |= char_class::punctuation;
  if (category & U_GC_S_MASK) classes |= char_class::symbol;
  if (u_isUWhiteSpace(c)) classes |= char_class::whitespace;
  return classes;
}

// The Basic Multilingual Plane holds nearly all text, so it is answered from a 64 KiB table; ICU's own
// lookup serves the rest.
using BmpTable = std::array<CharClasses, 0x10000>;

const BmpTable& bmp_table() {
  static const BmpTable table = [] {
    BmpTable classes{};
    for (char32_t c = 0; c < 0x10000; ++c) classes[c] = classes_from_icu(c);
    return classes;
  }();
  return table;
}

}  // namespace

Utf8Unit decode_utf8(std::string_view text, std::size_t offset) noexcept {
  const std::size_t left = text.size() - offset;
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[offset + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {lead, 1};
  if (lead < 0xC2 || lead > 0xF4) return {};  // a continuation byte, an overlong lead (C0, C1) or past U+10FFFF
  if (lead < 0xE0) {
    if (left < 2 || !is_continuation(byte(1))) return {};
    return {static_cast<char32_t>(((lead & 0x1Fu) << 6) | (byte(1) & 0x3Fu)), 2};
  }
  // The second byte's range excludes overlong forms (E0, F0), surrogates (ED) and values past U+10FFFF (F4).
  const unsigned char low = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80;
  const unsigned char high = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
  if (left < 2 || byte(1) < low || byte(1) > high) return {};
  if (lead < 0xF0) {
    if (left < 3 || !is_continuation(byte(2))) return {};
    return {static_cast<char32_t>(((lead & 0x0Fu) << 12) | ((byte(1) & 0x3Fu) << 6) | (byte(2) & 0x3Fu)), 3};
  }
  if (left < 4 || !is_continuation(byte(2)) || !is_continuation(byte(3))) return {};
  return {static_cast<char32_t>(((lead & 0x07u) << 18) | ((byte(1) & 0x3Fu) << 12) | ((byte(2) & 0x3Fu) << 6) |
                                (byte(3) & 0x3Fu)),
          4};
}

void append_utf8(std::string& out, char32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

CharClasses char_classes(char32_t code_point) noexcept {
  if (code_point < 0x10000) return bmp_table()[code_point];
  if (code_point == kInvalidCodePoint) return char_class::symbol;
  return classes_from_icu(code_point);
}

}  // namespace loom::compute::detail
