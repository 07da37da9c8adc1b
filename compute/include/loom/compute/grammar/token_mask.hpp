// Token masks: which tokens of a vocabulary may come next under a grammar. TokenTrie is a prefix tree over
// every token's bytes (the text the detokenizer would produce for it: SentencePiece's U+2581 as a space,
// byte-fallback <0xNN> as that byte, byte-level BPE's byte map undone), built once per vocabulary and shared
// by every sequence and grammar. allowed_tokens() walks the trie along a GrammarState: a byte shared by many
// tokens' prefixes is matched once, and a branch the grammar rejects is left with all its tokens. Special
// tokens (control, unknown, unused: those whose text the detokenizer drops) never match a grammar; EOS is
// allowed exactly where the state can end.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loom/compute/grammar/grammar_state.hpp"

namespace loom::compute {
class Tokenizer;
}

namespace loom::compute::grammar {

class TokenTrie {
 public:
  struct Node {
    std::uint32_t first_child = 0;  // children are nodes[first_child, first_child + child_count), by byte
    std::uint32_t child_count = 0;
    std::uint32_t tokens_begin = 0;  // tokens whose bytes end here: token_ids()[tokens_begin, tokens_end)
    std::uint32_t tokens_end = 0;
    std::uint32_t subtree_begin = 0;  // every token at or below this node: subtree_tokens()[begin, end)
    std::uint32_t subtree_end = 0;
    std::uint8_t byte = 0;  // the byte on the edge from the parent
  };

  // token_bytes[id] is token id's text; special[id] (same length, or empty: none special) excludes it, as
  // does empty text. Throws std::invalid_argument when the lengths differ.
  static std::shared_ptr<const TokenTrie> build(const std::vector<std::string>& token_bytes,
                                                const std::vector<bool>& special);
  // The vocabulary of `tokenizer`: each token's piece (Tokenizer::piece, so the same bytes the detokenizer
  // gives); control, unknown, unused and undefined tokens are special.
  static std::shared_ptr<const TokenTrie> from_tokenizer(const Tokenizer& tokenizer);

  std::int32_t vocab_size() const noexcept { return static_cast<std::int32_t>(bytes_.size()); }
  const std::vector<Node>& nodes() const noexcept { return nodes_; }
  const std::vector<std::int32_t>& token_ids() const noexcept { return token_ids_; }
  // The tokens in depth-first order, so that a subtree's tokens are one run.
  const std::vector<std::int32_t>& subtree_tokens() const noexcept { return subtree_tokens_; }
  const std::string& bytes(std::int32_t id) const { return bytes_[static_cast<std::size_t>(id)]; }
  bool in_trie(std::int32_t id) const { return in_trie_[static_cast<std::size_t>(id)]; }

 private:
  std::vector<Node> nodes_;  // nodes_[0] is the root (no bytes)
  std::vector<std::int32_t> token_ids_;
  std::vector<std::int32_t> subtree_tokens_;
  std::vector<std::string> bytes_;
  std::vector<bool> in_trie_;
};

// Sets mask[id] to 1 for each token that `state` can accept (its bytes keep some alternative alive), 0 for
// the rest; mask is resized to the vocabulary. Each of `end_tokens` (EOS, and EOT where the vocabulary has
// one; ids outside the vocabulary are ignored) is 1 exactly when state.can_end(). Throws GrammarLimitError
// as GrammarState::accept does.
void allowed_tokens(const GrammarState& state, const TokenTrie& trie, std::span<const std::int32_t> end_tokens,
                    std::vector<std::uint8_t>& mask);
// The same with one end token (or -1 for none).
void allowed_tokens(const GrammarState& state, const TokenTrie& trie, std::int32_t eos, std::vector<std::uint8_t>& mask);

// After a token is sampled: accepts its bytes into `state` (false, state unchanged, when the grammar refuses
// them or the token is special, which no grammar allows). End tokens are for the caller to handle: they
// carry no bytes and finish the sequence where can_end() allowed them.
bool accept_token(GrammarState& state, const TokenTrie& trie, std::int32_t id);

}  // namespace loom::compute::grammar
