#include "loom/compute/text/streaming_detokenizer.hpp"

#include <string_view>

namespace loom::compute {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the UTF-8 sequence that `lead` starts; 0 when it cannot start one (a continuation byte,
// C0/C1 which would only make overlong forms, F5..FF which lie beyond U+10FFFF).
std::size_t sequence_length(unsigned char lead) noexcept {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Whether `byte` may follow `lead` at position `index` (1..3) of its sequence. The second byte is narrowed
// for E0 / F0 (no overlong forms), ED (no surrogates) and F4 (nothing past U+10FFFF).
bool valid_continuation(unsigned char lead, std::size_t index, unsigned char byte) noexcept {
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (index == 1) {
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  }
  return byte >= low && byte <= high;
}

}  // namespace

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, DecodeOptions options)
    : tokenizer_(&tokenizer),
      options_(options),
      strip_leading_space_(options.strip_leading_space &&
                           tokenizer.vocabulary().model == TokenizerModel::sentencepiece &&
                           tokenizer.vocabulary().add_space_prefix) {}

std::string StreamingDetokenizer::push(std::int32_t id) {
  std::string piece = tokenizer_->piece(id, options_.render_special);
  if (at_start_ && !piece.empty()) {
    at_start_ = false;
    // As Tokenizer::decode does: only the first byte of the whole text, and only a space.
    if (strip_leading_space_ && piece.front() == ' ') piece.erase(0, 1);
  }
  held_ += piece;
  return take_complete();
}

std::string StreamingDetokenizer::finish() {
  // push() leaves only the start of a possible character held back, which will now never be completed.
  std::string text;
  for (std::size_t i = 0; i < held_.size(); ++i) text += kReplacement;
  held_.clear();
  at_start_ = true;
  return text;
}

std::string StreamingDetokenizer::take_complete() {
  std::string text;
  text.reserve(held_.size());
  const std::size_t end = held_.size();
  std::size_t at = 0;
  while (at < end) {
    const auto lead = static_cast<unsigned char>(held_[at]);
    const std::size_t length = sequence_length(lead);
    if (length == 1) {
      text += held_[at++];
      continue;
    }
    std::size_t valid = 1;  // bytes of the sequence seen so far that fit it
    while (length > 0 && valid < length && at + valid < end &&
           valid_continuation(lead, valid, static_cast<unsigned char>(held_[at + valid]))) {
      ++valid;
    }
    if (length > 0 && valid == length) {
      text.append(held_, at, length);
      at += length;
      continue;
    }
    if (length > 0 && at + valid == end) break;  // a possible character whose rest has not arrived yet
    // The byte at `at` cannot start a character (here). Each invalid byte is one U+FFFD; the bytes after it
    // are looked at again on their own.
    text += kReplacement;
    ++at;
  }
  held_.erase(0, at);
  return text;
}

}  // namespace loom::compute
