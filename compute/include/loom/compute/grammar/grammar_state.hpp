// GrammarState: how far one sequence has come under a compiled Grammar. It is the set of live alternative
// stacks of a pushdown recognizer (each stack: the character set the next code point must match on top, the
// places to return to below it), deduplicated, plus the bytes of a UTF-8 character begun by one token and
// not yet finished by the next. Small and plainly copyable: a sequence saves it before preemption and
// restores it after, and the mask code copies it to try a token without committing.
//
// accept() takes bytes (a token's text, any split of UTF-8) and either moves on and returns true, or
// returns false and stays as it was. A state is viable while some stack is live; can_end() says whether the
// text so far is a whole sentence of the grammar (EOS allowed). Throws GrammarLimitError when the grammar
// needs more live stacks or deeper nesting than its limits allow.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "loom/compute/grammar/grammar.hpp"

namespace loom::compute::grammar {

// Incremental strict UTF-8 decoding (no overlongs, no surrogates, nothing past U+10FFFF).
struct Utf8Decoder {
  char32_t value = 0;
  std::uint8_t needed = 0;    // continuation bytes still to come
  std::uint8_t lower = 0x80;  // bounds of the next continuation byte (tighter after E0, ED, F0, F4)
  std::uint8_t upper = 0xBF;

  enum class Result { complete, partial, invalid };
  Result feed(std::uint8_t byte);
  // The code points a begun sequence can still become (only when needed > 0).
  char32_t range_lo() const {
    const unsigned rest = 6u * (needed - 1u);
    return (value << (6u * needed)) | (static_cast<char32_t>(lower & 0x3F) << rest);
  }
  char32_t range_hi() const {
    const unsigned rest = 6u * (needed - 1u);
    return (value << (6u * needed)) | (static_cast<char32_t>(upper & 0x3F) << rest) | ((char32_t{1} << rest) - 1);
  }
};

class GrammarState {
 public:
  explicit GrammarState(std::shared_ptr<const Grammar> grammar);

  // Consumes `bytes` if the grammar allows them (possibly ending inside a UTF-8 character that some live
  // alternative could still accept); otherwise returns false and the state is unchanged.
  bool accept(std::string_view bytes);
  // Whether accept(bytes) would succeed; the state is unchanged either way.
  bool can_accept(std::string_view bytes) const;
  // Whether the text so far is complete under the grammar (no character half-way either).
  bool can_end() const noexcept;
  // Whether more text can be accepted at all (false once only the end is left).
  bool can_continue() const noexcept;

  const Grammar& grammar() const noexcept { return *grammar_; }
  const std::shared_ptr<const Grammar>& shared_grammar() const noexcept { return grammar_; }
  const Utf8Decoder& partial() const noexcept { return partial_; }

  // The live stacks, flattened: stack i is positions()[ends()[i-1] .. ends()[i]), bottom to top; an empty
  // one is the grammar's end. For the mask code.
  const std::vector<std::uint32_t>& positions() const noexcept { return positions_; }
  const std::vector<std::uint32_t>& ends() const noexcept { return ends_; }

  // Equal: the same grammar, the same set of stacks (kept in one canonical order, however the bytes were
  // split) and the same begun character.
  friend bool operator==(const GrammarState& a, const GrammarState& b) noexcept {
    return a.grammar_ == b.grammar_ && a.positions_ == b.positions_ && a.ends_ == b.ends_ &&
           a.partial_.value == b.partial_.value && a.partial_.needed == b.partial_.needed &&
           a.partial_.lower == b.partial_.lower && a.partial_.upper == b.partial_.upper;
  }

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::vector<std::uint32_t> positions_;
  std::vector<std::uint32_t> ends_;
  Utf8Decoder partial_;
};

}  // namespace loom::compute::grammar
