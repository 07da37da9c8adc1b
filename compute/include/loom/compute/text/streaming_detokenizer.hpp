// StreamingDetokenizer: turns generated tokens, one at a time, into text that can be sent to a client as it
// comes. A token's piece is not always whole characters (byte-fallback tokens split a character over several
// tokens), so the bytes of a character that is not yet complete are held back until it is; every string
// push() returns is valid UTF-8. Bytes that can never become a valid character (a stray continuation byte, a
// sequence broken off by another character) come out as U+FFFD at once, so bad output cannot stall the
// stream. For valid text, the pushes and finish() together give exactly Tokenizer::decode of the same ids.
//
// One object per stream and not thread-safe; the Tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <string>

#include "loom/compute/text/tokenizer.hpp"

namespace loom::compute {

class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, DecodeOptions options = {});

  // Adds the text of one token; returns the bytes that now complete UTF-8 characters and were not
  // returned before (a character split across byte tokens is held back until complete).
  // options.strip_leading_space applies to the start of the stream only.
  // Throws std::out_of_range for an id outside the vocabulary (nothing is added then).
  std::string push(std::int32_t id);

  // What is still held back (an incomplete character at the end) with each invalid byte as U+FFFD;
  // the stream starts afresh after it.
  std::string finish();

  // Whether bytes are held back (the start of a character not yet complete): finish() would return text.
  bool holding() const noexcept { return !held_.empty(); }

 private:
  // Moves every complete character (and U+FFFD for each invalid byte) from held_ to the result, leaving an
  // unfinished but still possible character in held_.
  std::string take_complete();

  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  bool strip_leading_space_;  // options_.strip_leading_space where decode() would honour it
  bool at_start_ = true;      // no byte of this stream has been seen yet
  std::string held_;          // at most 3 bytes: the start of a character still waiting for its rest
};

}  // namespace loom::compute
