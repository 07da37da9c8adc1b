// SentencePiece text conventions (internal), shared by the vocabulary loaders and the SentencePiece engine:
// pieces write a space as U+2581 ("▁"), and byte-fallback tokens are named `<0xNN>`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace loom::compute::detail {

inline constexpr std::string_view kSentencePieceSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// The byte a `<0xNN>` piece stands for (either case of hex digit); nullopt for any other text.
inline std::optional<std::uint8_t> parse_byte_piece(std::string_view text) noexcept {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int high = digit(text[3]);
  const int low = digit(text[4]);
  if (high < 0 || low < 0) return std::nullopt;
  return static_cast<std::uint8_t>(high * 16 + low);
}

// `<0xNN>` with upper-case digits, the spelling SentencePiece vocabularies use.
inline std::string byte_piece(std::uint8_t byte) {
  constexpr std::string_view kHex = "0123456789ABCDEF";
  return std::string("<0x") + kHex[byte >> 4] + kHex[byte & 15] + '>';
}

}  // namespace loom::compute::detail
