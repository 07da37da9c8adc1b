#include "token_logprobs.hpp"

#include <cstdint>

#include "loom/compute/text/vocabulary.hpp"

namespace loom::actors::detail {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the well-formed character at the start of `s` (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), or 0.
std::size_t character_length(std::string_view s) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(s[i]); };
  const std::uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  std::uint8_t low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

proto::TokenAlternative alternative(const compute::Tokenizer& tokenizer, std::int32_t token, double logprob) {
  // A model may have more logits than its vocabulary has pieces (padding rows): such an id shows as "".
  const std::string piece = tokenizer.vocabulary().valid(token) ? tokenizer.piece(token, /*render_special=*/true) : "";
  return {token, lossy_utf8(piece), std::vector<std::uint8_t>(piece.begin(), piece.end()), logprob};
}

}  // namespace

std::string lossy_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  while (!bytes.empty()) {
    const std::size_t length = character_length(bytes);
    if (length == 0) {
      out += kReplacement;
      bytes.remove_prefix(1);
    } else {
      out += bytes.substr(0, length);
      bytes.remove_prefix(length);
    }
  }
  return out;
}

void set_logprobs(proto::TokenEvent& event, const compute::Tokenizer& tokenizer, float logprob,
                  const std::vector<compute::TokenLogprob>& top) {
  auto own = alternative(tokenizer, event.token, logprob);
  event.logprob = own.logprob;
  event.piece = std::move(own.text);
  event.bytes = std::move(own.bytes);
  event.top_logprobs.clear();
  event.top_logprobs.reserve(top.size());
  for (const auto& entry : top) event.top_logprobs.push_back(alternative(tokenizer, entry.token, entry.logprob));
}

}  // namespace loom::actors::detail
