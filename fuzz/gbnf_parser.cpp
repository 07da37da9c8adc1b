// The GBNF reader and the constraint engine on arbitrary input. The input is a grammar, then (after the first
// NUL byte, if any) text to match under it. Properties: parse_gbnf returns or throws GrammarError, nothing
// else; matching throws nothing but GrammarLimitError; accepting the text whole or in pieces of three bytes
// gives the same verdict and state; after each piece, TokenMasker gives the same mask as the plain trie walk
// (allowed_tokens) over a small vocabulary of every byte and some multi-byte strings, and a token it allows
// is accepted by the state.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/grammar_state.hpp"
#include "loom/compute/grammar/token_mask.hpp"
#include "loom/compute/grammar/token_masker.hpp"

namespace {

using namespace loom::compute::grammar;

const std::shared_ptr<const TokenTrie>& vocabulary() {
  static const std::shared_ptr<const TokenTrie> trie = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
    for (const char* t : {"ab", "abc", "\"a", "\": ", "{\"", "\"}", "12", " x", "\xc3\xa9", "\xe2\x82", "\xac!", "aa", "aaaa"}) {
      tokens.emplace_back(t);
    }
    return TokenTrie::build(tokens, {});
  }();
  return trie;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string_view text = input.substr(0, nul);
  const std::string_view sample = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  GrammarLimits limits;
  limits.max_text_bytes = 4096;
  limits.max_elements = 20'000;
  limits.max_stacks = 256;
  limits.max_stack_depth = 128;
  std::shared_ptr<const Grammar> grammar;
  try {
    grammar = parse_gbnf(text, limits);
  } catch (const GrammarError& e) {
    loom::fuzz::check(std::string_view(e.what()).find(e.message()) != std::string_view::npos, "error text holds its message");
    return 0;
  }
  try {
    GrammarState whole(grammar);
    const bool whole_ok = whole.accept(sample);
    GrammarState pieces(grammar);
    bool pieces_ok = true;
    const TokenMasker masker(grammar, vocabulary());
    std::vector<std::uint8_t> walked;
    std::vector<std::uint8_t> masked;
    for (std::size_t at = 0; at < sample.size() && pieces_ok; at += 3) {
      pieces_ok = pieces.accept(sample.substr(at, 3));
      allowed_tokens(pieces, *vocabulary(), -1, walked);
      masker.fill(pieces, -1, masked);
      loom::fuzz::check(walked == masked, "TokenMasker equals the plain trie walk");
      for (std::size_t id = 0; id < masked.size(); id += 17) {
        const bool accepted = pieces.can_accept(vocabulary()->bytes(static_cast<std::int32_t>(id)));
        loom::fuzz::check(accepted == (masked[id] != 0), "a token is allowed exactly when the state accepts it");
      }
    }
    loom::fuzz::check(whole_ok == pieces_ok, "whole and in pieces give the same verdict");
    if (whole_ok) loom::fuzz::check(whole == pieces, "whole and in pieces give the same state");
  } catch (const GrammarLimitError&) {
    // A runaway grammar stopped by its limits: the documented outcome.
  }
  return 0;
}
