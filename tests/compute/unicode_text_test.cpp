// UTF-8 decoding and character classes used by the pre-tokenizers.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "text/unicode_text.hpp"

namespace loom::compute::detail {
namespace {

TEST(UnicodeText, EveryScalarValueRoundTrips) {
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    std::string bytes;
    append_utf8(bytes, c);
    const std::size_t expected_length = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    ASSERT_EQ(bytes.size(), expected_length) << std::hex << static_cast<std::uint32_t>(c);
    const Utf8Unit unit = decode_utf8(bytes, 0);
    ASSERT_EQ(unit.code_point, c);
    ASSERT_EQ(unit.length, expected_length);
  }
}

TEST(UnicodeText, MalformedSequencesGiveOneInvalidByte) {
  const std::string_view cases[] = {
      "\x80",              // stray continuation byte
      "\xC0\x80",          // overlong NUL
      "\xC1\xBF",          // overlong
      "\xE0\x80\x80",      // overlong 3-byte form
      "\xED\xA0\x80",      // UTF-16 surrogate U+D800
      "\xF0\x80\x80\x80",  // overlong 4-byte form
      "\xF4\x90\x80\x80",  // U+110000
      "\xF5\x80\x80\x80",  // lead byte past U+10FFFF
      "\xFF",
      "\xC3",              // cut short by the end of the text
      "\xE4\xBD",
      "\xF0\x9F\x98",
      "\xC3(",             // cut short by a byte that is not a continuation
      "\xE4\xBD(",
  };
  for (const std::string_view text : cases) {
    const Utf8Unit unit = decode_utf8(text, 0);
    EXPECT_EQ(unit.code_point, kInvalidCodePoint) << ::testing::PrintToString(std::string(text));
    EXPECT_EQ(unit.length, 1u) << ::testing::PrintToString(std::string(text));
  }
}

TEST(UnicodeText, NeverReadsPastTheEnd) {
  // A view that ends inside a valid sequence: the bytes after the view must not be looked at.
  const std::string backing = "a\xE4\xBD\xA0";  // "a" then U+4F60 (你)
  EXPECT_EQ(decode_utf8(std::string_view(backing).substr(0, 3), 1).code_point, kInvalidCodePoint);
  EXPECT_EQ(decode_utf8(backing, 1).code_point, U'\u4F60');
}

TEST(UnicodeText, CharacterClasses) {
  namespace cc = char_class;
  EXPECT_EQ(char_classes(U'a'), cc::lower);
  EXPECT_EQ(char_classes(U'A'), cc::upper);
  EXPECT_EQ(char_classes(U'\u01C5'), cc::upper);         // Dž, titlecase (Lt)
  EXPECT_EQ(char_classes(U'\u02B0'), cc::other_letter);  // ʰ, modifier letter (Lm)
  EXPECT_EQ(char_classes(U'\u6211'), cc::other_letter);  // 我 (Lo)
  EXPECT_EQ(char_classes(U'\u0301'), cc::mark);          // combining acute accent (Mn)
  EXPECT_EQ(char_classes(U'7'), cc::number);
  EXPECT_EQ(char_classes(U'\u00B2'), cc::number);         // ² (No)
  EXPECT_EQ(char_classes(U'\U0001D7D8'), cc::number);     // 𝟘, outside the BMP (Nd)
  EXPECT_EQ(char_classes(U'!'), cc::punctuation);
  EXPECT_EQ(char_classes(U'+'), cc::symbol);
  EXPECT_EQ(char_classes(U'\U0001F601'), cc::symbol);     // 😁 (So)
  EXPECT_EQ(char_classes(kInvalidCodePoint), cc::symbol);
  // Separators (Z*) and controls (Cc) have no category bit; White_Space ones have the whitespace bit.
  EXPECT_EQ(char_classes(U' '), cc::whitespace);
  EXPECT_EQ(char_classes(U'\n'), cc::whitespace);
  EXPECT_EQ(char_classes(U'\u0085'), cc::whitespace);     // NEL
  EXPECT_EQ(char_classes(U'\u3000'), cc::whitespace);     // ideographic space
  EXPECT_EQ(char_classes(U'\u200B'), 0);                  // zero-width space: a format character, not White_Space
  EXPECT_EQ(char_classes(U'\u0001'), 0);
}

}  // namespace
}  // namespace loom::compute::detail
