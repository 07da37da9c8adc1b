#include "loom/compute/grammar/token_mask.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "stack_arena.hpp"
#include "trie_walk.hpp"
#include "loom/compute/text/tokenizer.hpp"

namespace loom::compute::grammar {

std::shared_ptr<const TokenTrie> TokenTrie::build(const std::vector<std::string>& token_bytes,
                                                  const std::vector<bool>& special) {
  if (!special.empty() && special.size() != token_bytes.size()) {
    throw std::invalid_argument("TokenTrie: " + std::to_string(special.size()) + " special flags for " +
                                std::to_string(token_bytes.size()) + " tokens");
  }
  auto trie = std::make_shared<TokenTrie>();
  trie->bytes_ = token_bytes;
  trie->in_trie_.assign(token_bytes.size(), false);
  std::vector<std::int32_t> order;
  for (std::size_t id = 0; id < token_bytes.size(); ++id) {
    if (token_bytes[id].empty() || (!special.empty() && special[id])) continue;
    trie->in_trie_[id] = true;
    order.push_back(static_cast<std::int32_t>(id));
  }
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return token_bytes[static_cast<std::size_t>(a)] < token_bytes[static_cast<std::size_t>(b)];
  });
  // Breadth first, so that each node's children are consecutive. A node covers a run of `order` whose
  // tokens share its bytes; the shortest (ending here) sort first.
  struct Pending {
    std::uint32_t node;
    std::size_t begin;
    std::size_t end;
    std::size_t depth;
  };
  std::vector<Pending> queue{{0, 0, order.size(), 0}};
  trie->nodes_.emplace_back();
  for (std::size_t q = 0; q < queue.size(); ++q) {
    const Pending p = queue[q];
    std::size_t i = p.begin;
    auto length = [&](std::size_t k) { return token_bytes[static_cast<std::size_t>(order[k])].size(); };
    auto byte_at = [&](std::size_t k) {
      return static_cast<std::uint8_t>(token_bytes[static_cast<std::size_t>(order[k])][p.depth]);
    };
    Node& node = trie->nodes_[p.node];
    node.tokens_begin = static_cast<std::uint32_t>(trie->token_ids_.size());
    while (i < p.end && length(i) == p.depth) trie->token_ids_.push_back(order[i++]);
    trie->nodes_[p.node].tokens_end = static_cast<std::uint32_t>(trie->token_ids_.size());
    trie->nodes_[p.node].first_child = static_cast<std::uint32_t>(trie->nodes_.size());
    while (i < p.end) {
      const std::uint8_t b = byte_at(i);
      std::size_t j = i;
      while (j < p.end && byte_at(j) == b) ++j;
      Node child;
      child.byte = b;
      queue.push_back(Pending{static_cast<std::uint32_t>(trie->nodes_.size()), i, j, p.depth + 1});
      trie->nodes_.push_back(child);
      ++trie->nodes_[p.node].child_count;
      i = j;
    }
  }
  // Depth first: each subtree's tokens become one run of subtree_tokens_.
  std::vector<std::pair<std::uint32_t, bool>> todo{{0, false}};
  while (!todo.empty()) {
    const auto [index, leaving] = todo.back();
    todo.pop_back();
    Node& node = trie->nodes_[index];
    if (leaving) {
      node.subtree_end = static_cast<std::uint32_t>(trie->subtree_tokens_.size());
      continue;
    }
    node.subtree_begin = static_cast<std::uint32_t>(trie->subtree_tokens_.size());
    for (std::uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) trie->subtree_tokens_.push_back(trie->token_ids_[t]);
    todo.emplace_back(index, true);
    for (std::uint32_t c = node.child_count; c-- > 0;) todo.emplace_back(node.first_child + c, false);
  }
  return trie;
}

std::shared_ptr<const TokenTrie> TokenTrie::from_tokenizer(const Tokenizer& tokenizer) {
  const Vocabulary& v = tokenizer.vocabulary();
  std::vector<std::string> bytes(static_cast<std::size_t>(v.size()));
  std::vector<bool> special(bytes.size(), false);
  for (std::int32_t id = 0; id < v.size(); ++id) {
    const TokenKind kind = v.kinds[static_cast<std::size_t>(id)];
    special[static_cast<std::size_t>(id)] = kind == TokenKind::control || kind == TokenKind::unknown ||
                                            kind == TokenKind::unused || kind == TokenKind::undefined;
    bytes[static_cast<std::size_t>(id)] = tokenizer.piece(id);
  }
  return build(bytes, special);
}

bool accept_token(GrammarState& state, const TokenTrie& trie, std::int32_t id) {
  if (id < 0 || id >= trie.vocab_size() || !trie.in_trie(id)) return false;
  return state.accept(trie.bytes(id));
}

void allowed_tokens(const GrammarState& state, const TokenTrie& trie, std::int32_t eos, std::vector<std::uint8_t>& mask) {
  allowed_tokens(state, trie, std::span<const std::int32_t>(&eos, 1), mask);
}

void allowed_tokens(const GrammarState& state, const TokenTrie& trie, std::span<const std::int32_t> end_tokens,
                    std::vector<std::uint8_t>& mask) {
  using detail::StackId;
  mask.assign(static_cast<std::size_t>(trie.vocab_size()), 0);
  if (state.can_end()) {
    for (const std::int32_t end : end_tokens) {
      if (end >= 0 && end < trie.vocab_size()) mask[static_cast<std::size_t>(end)] = 1;
    }
  }
  if (!state.can_continue()) return;

  detail::StackArena arena(state.grammar());
  std::vector<StackId> start;
  detail::load_stacks(state, arena, start);
  const auto& nodes = trie.nodes();
  const auto& ids = trie.token_ids();
  detail::walk_trie(arena, trie, start, state.partial(), [&](std::uint32_t index, std::size_t, bool) {
    const TokenTrie::Node& node = nodes[index];
    for (std::uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) mask[static_cast<std::size_t>(ids[t])] = 1;
    return true;
  });
}

}  // namespace loom::compute::grammar
