// The properties both tokenizer targets check on one input (tokenizer_spm.cpp, tokenizer_bpe.cpp):
// - encoding any bytes, with or without special tokens, gives ids inside the vocabulary;
// - decode(encode(text)) == text where the tokenizer promises it (`round_trips`, the target's call);
// - the StreamingDetokenizer's output is always valid UTF-8, and for valid UTF-8 text it is exactly decode's;
// - ids read from the input's bytes decode (or, past the vocabulary, throw std::out_of_range) without harm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "loom/compute/text/streaming_detokenizer.hpp"
#include "loom/compute/text/tokenizer.hpp"

namespace loom::fuzz {

inline constexpr compute::EncodeOptions kPlainText{.add_special = false, .parse_special = false};

inline void check_ids_valid(const compute::Tokenizer& tokenizer, const std::vector<std::int32_t>& ids) {
  for (const std::int32_t id : ids) check(tokenizer.vocabulary().valid(id), "encode gave an id outside the vocabulary");
}

// A tokenizer a model file gave (the loader targets): a sample text encodes to ids inside the vocabulary,
// and they decode without harm.
inline void check_sample_text(const compute::Tokenizer& tokenizer, std::string_view text,
                              compute::EncodeOptions options) {
  const std::vector<std::int32_t> ids = tokenizer.encode(text, options);
  check_ids_valid(tokenizer, ids);
  (void)tokenizer.decode(ids, {.render_special = true});
}

// Streams `ids` through a StreamingDetokenizer; its output must be valid UTF-8 and, when decode's is valid
// UTF-8 too, the same text.
inline void check_streaming(const compute::Tokenizer& tokenizer, const std::vector<std::int32_t>& ids,
                            compute::DecodeOptions options) {
  compute::StreamingDetokenizer stream(tokenizer, options);
  std::string streamed;
  for (const std::int32_t id : ids) streamed += stream.push(id);
  streamed += stream.finish();
  check(is_valid_utf8(streamed), "the streaming detokenizer produced invalid UTF-8");
  const std::string decoded = tokenizer.decode(ids, options);
  if (is_valid_utf8(decoded)) check(streamed == decoded, "streamed text differs from decode's");
}

// Ids taken two bytes at a time, some of them past the vocabulary's end.
inline void check_decode_of_any_ids(const compute::Tokenizer& tokenizer, std::string_view bytes) {
  std::vector<std::int32_t> ids;
  bool any_invalid = false;
  const auto range = static_cast<std::uint32_t>(tokenizer.vocabulary().size()) + 16;
  for (std::size_t at = 0; at + 1 < bytes.size() && ids.size() < 256; at += 2) {
    const auto raw = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at])) << 8 |
                     static_cast<unsigned char>(bytes[at + 1]);
    const auto id = static_cast<std::int32_t>(raw * 2654435761u % range);  // spread over the whole vocabulary
    any_invalid = any_invalid || !tokenizer.vocabulary().valid(id);
    ids.push_back(id);
  }
  try {
    (void)tokenizer.decode(ids, {.render_special = true});
    check(!any_invalid, "decode accepted an id outside the vocabulary");
  } catch (const std::out_of_range&) {
    check(any_invalid, "decode threw std::out_of_range for ids inside the vocabulary");
    return;
  }
  check_streaming(tokenizer, ids, {});
}

inline void check_tokenizer(const compute::Tokenizer& tokenizer, std::string_view text, bool round_trips,
                            compute::DecodeOptions round_trip_options) {
  const std::vector<std::int32_t> plain = tokenizer.encode(text, kPlainText);
  check_ids_valid(tokenizer, plain);
  if (round_trips) {
    check(tokenizer.decode(plain, round_trip_options) == std::string(text), "decode(encode(text)) != text");
  }
  check_streaming(tokenizer, plain, {});

  const std::vector<std::int32_t> with_specials = tokenizer.encode(text, {.add_special = true, .parse_special = true});
  check_ids_valid(tokenizer, with_specials);
  (void)tokenizer.decode(with_specials, {.render_special = true});

  check_decode_of_any_ids(tokenizer, text);
}

}  // namespace loom::fuzz
