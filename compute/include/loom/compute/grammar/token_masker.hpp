// TokenMasker: token masks for one grammar over one vocabulary, fast enough for every decode step. The plain
// trie walk (allowed_tokens in token_mask.hpp) visits every token the grammar allows, which inside a JSON
// string is nearly the whole vocabulary; this reuses that work across steps and sequences.
//
// How: each live stack of a state splits into a context, its top frames down to (and including) the first
// frame of a rule named in the grammar text (the frames above it belong to groups and repetitions of that
// rule; a named rule that reaches no other named rule and not itself, such as a string's `char`, is looked
// through), and the rest below. Everything a token does while it stays inside the context depends on the
// context alone, so for each context met the masker walks the trie once and keeps (1) the tokens accepted
// inside it, and (2) for tokens that return below the context part-way, the bytes still left at that point
// (sorted, shared by the tokens that leave them). A step then ORs the kept sets of its stacks' contexts and
// checks only those leftover bytes against the real rest of each stack, skipping every leftover that starts
// with a prefix found to fail. A state holding a begun UTF-8 character (after a byte-fallback token) takes
// the plain walk instead. The result is exactly allowed_tokens' (tests compare them on real vocabularies).
//
// One masker is shared by every sequence under the same grammar and vocabulary; fill() may be called from
// many threads at once (the kept contexts sit behind a mutex: compute threads share them with no actor in
// between, and a message round-trip per step would cost more than the lookup). At most `max_contexts`
// contexts and `max_bytes` of them are kept; past that, contexts are computed for the call and dropped,
// still correct, only slower.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/grammar_state.hpp"
#include "loom/compute/grammar/token_mask.hpp"

namespace loom::compute::grammar {

class TokenMasker {
 public:
  struct Options {
    std::size_t max_contexts = 1024;
    std::size_t max_bytes = std::size_t{256} << 20;  // memory the kept contexts may hold
  };

  TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie);
  TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie, Options options);
  ~TokenMasker();

  // As allowed_tokens(state, trie, end_tokens, mask). `state` must be under this masker's grammar (else
  // std::invalid_argument). Throws GrammarLimitError as GrammarState::accept does.
  void fill(const GrammarState& state, std::span<const std::int32_t> end_tokens, std::vector<std::uint8_t>& mask) const;
  // The same with one end token (or -1 for none).
  void fill(const GrammarState& state, std::int32_t eos, std::vector<std::uint8_t>& mask) const {
    fill(state, std::span<const std::int32_t>(&eos, 1), mask);
  }

  // How many contexts are kept now.
  std::size_t cached_contexts() const;

  const Grammar& grammar() const noexcept { return *grammar_; }
  const TokenTrie& trie() const noexcept { return *trie_; }

 private:
  struct Context;
  std::shared_ptr<const Context> context_for(const std::vector<std::uint32_t>& top_first, bool whole) const;
  std::shared_ptr<const Context> build_context(const std::vector<std::uint32_t>& top_first, bool whole) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  Options options_;
  std::vector<bool> context_boundary_;  // per rule: a frame of it ends a context (named, not lexical)
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, std::shared_ptr<const Context>> contexts_;
  mutable std::size_t kept_bytes_ = 0;
};

}  // namespace loom::compute::grammar
