#include "loom/compute/grammar/token_masker.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "stack_arena.hpp"
#include "trie_walk.hpp"

namespace loom::compute::grammar {

using detail::kEmptyStack;
using detail::kEscaped;
using detail::StackId;

// What a context does with the vocabulary (see the header).
struct TokenMasker::Context {
  std::vector<std::uint64_t> accepted;         // one bit per token id
  // Sorted, distinct: the bytes left when returning below, viewed in the trie's token bytes (the trie is
  // immutable and outlives the masker's contexts).
  std::vector<std::string_view> leftovers;
  std::vector<std::uint32_t> leftover_begin;   // tokens of leftovers[i]: leftover_tokens[begin[i], begin[i + 1])
  std::vector<std::int32_t> leftover_tokens;

  std::size_t bytes() const {
    return sizeof(*this) + accepted.size() * sizeof(std::uint64_t) + leftovers.size() * sizeof(std::string_view) +
           leftover_begin.size() * sizeof(std::uint32_t) + leftover_tokens.size() * sizeof(std::int32_t);
  }
};

TokenMasker::TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie)
    : TokenMasker(std::move(grammar), std::move(trie), Options{}) {}

namespace {

// Which rules end a context: the named ones, except "lexical" rules, those from which no other named rule
// can be reached and that cannot reach themselves (a JSON string's `char ::= [^"\\] | "\\" ...`, `ws`, a
// digit range). Stopping at such a rule would make its one character the whole context, so that every
// longer token leaves it and goes through the leftover check: inside `string ::= "\"" char* "\""` that is
// the whole vocabulary on every step (llama.cpp's schema converter writes strings that way). Looking through
// it to the rule that repeats it keeps those tokens inside one cached context.
std::vector<bool> context_boundaries(const Grammar& g) {
  const auto& rules = g.rules();
  std::vector<bool> boundary(rules.size());
  std::vector<std::uint32_t> todo;
  std::vector<bool> seen(rules.size());
  for (std::uint32_t r = 0; r < rules.size(); ++r) {
    if (rules[r].generated) continue;
    std::fill(seen.begin(), seen.end(), false);
    todo.assign(1, r);
    bool lexical = true;
    while (!todo.empty() && lexical) {
      const std::uint32_t at = todo.back();
      todo.pop_back();
      for (const std::uint32_t first : rules[at].alternatives) {
        for (std::uint32_t e = first; g.elements()[e].kind != ElementKind::end; ++e) {
          if (g.elements()[e].kind != ElementKind::rule_ref) continue;
          const std::uint32_t to = g.elements()[e].value;
          if (to == r || !rules[to].generated) lexical = false;
          if (!seen[to]) {
            seen[to] = true;
            todo.push_back(to);
          }
        }
      }
    }
    boundary[r] = !lexical;
  }
  return boundary;
}

}  // namespace

TokenMasker::TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie, Options options)
    : grammar_(std::move(grammar)), trie_(std::move(trie)), options_(options) {
  if (!grammar_ || !trie_) throw std::invalid_argument("TokenMasker needs a grammar and a token trie");
  context_boundary_ = context_boundaries(*grammar_);
}

TokenMasker::~TokenMasker() = default;

std::size_t TokenMasker::cached_contexts() const {
  const std::lock_guard lock(mutex_);
  return contexts_.size();
}

std::shared_ptr<const TokenMasker::Context> TokenMasker::context_for(const std::vector<std::uint32_t>& top_first,
                                                                     bool whole) const {
  thread_local std::string key;  // reused from lookup to lookup
  key.assign(reinterpret_cast<const char*>(top_first.data()), top_first.size() * sizeof(std::uint32_t));
  key.push_back(whole ? 'w' : 'p');
  {
    const std::lock_guard lock(mutex_);
    if (auto it = contexts_.find(key); it != contexts_.end()) return it->second;
  }
  auto context = build_context(top_first, whole);  // outside the lock: other sequences go on meanwhile
  const std::lock_guard lock(mutex_);
  if (auto it = contexts_.find(key); it != contexts_.end()) return it->second;
  const std::size_t size = context->bytes() + key.size();
  if (contexts_.size() < options_.max_contexts && kept_bytes_ + size <= options_.max_bytes) {
    contexts_.emplace(key, context);
    kept_bytes_ += size;
  }
  return context;
}

std::shared_ptr<const TokenMasker::Context> TokenMasker::build_context(const std::vector<std::uint32_t>& top_first,
                                                                       bool whole) const {
  const TokenTrie& trie = *trie_;
  detail::StackArena arena(*grammar_);
  StackId id = whole ? kEmptyStack : arena.escape_node();
  for (auto it = top_first.rbegin(); it != top_first.rend(); ++it) id = arena.intern(*it, id);
  const std::vector<StackId> start{id};

  auto context = std::make_shared<Context>();
  context->accepted.assign(static_cast<std::size_t>(trie.vocab_size()) / 64 + 1, 0);
  std::vector<std::pair<std::string_view, std::int32_t>> leftovers;
  std::vector<std::size_t> runs;  // where each sorted run of leftovers begins
  const auto& nodes = trie.nodes();
  const auto& ids = trie.token_ids();
  const auto& subtree = trie.subtree_tokens();
  auto accept = [&](std::int32_t token) {
    context->accepted[static_cast<std::size_t>(token) >> 6] |= std::uint64_t{1} << (token & 63);
  };
  detail::walk_trie(arena, trie, start, Utf8Decoder{}, [&](std::uint32_t index, std::size_t depth, bool escaped) {
    const TokenTrie::Node& node = nodes[index];
    if (escaped) {
      // Returned below the context after `depth` bytes: longer tokens under this node go on in the rest.
      // A subtree in depth-first order with children by byte is sorted, so each escape adds a sorted run.
      runs.push_back(leftovers.size());
      const std::uint32_t own = node.tokens_end - node.tokens_begin;
      for (std::uint32_t t = node.subtree_begin + own; t < node.subtree_end; ++t) {
        leftovers.emplace_back(std::string_view(trie.bytes(subtree[t])).substr(depth), subtree[t]);
      }
    }
    // Alive here (inside the context, or just returned from it, which the rest always allows).
    for (std::uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) accept(ids[t]);
    return true;
  });

  // Merge the sorted runs pairwise (a few runs of up to ~100k leftovers: cheaper than sorting them).
  runs.push_back(leftovers.size());
  while (runs.size() > 2) {
    std::vector<std::size_t> merged{0};
    for (std::size_t r = 0; r + 2 < runs.size(); r += 2) {
      std::inplace_merge(leftovers.begin() + static_cast<std::ptrdiff_t>(runs[r]),
                         leftovers.begin() + static_cast<std::ptrdiff_t>(runs[r + 1]),
                         leftovers.begin() + static_cast<std::ptrdiff_t>(runs[r + 2]));
      merged.push_back(runs[r + 2]);
    }
    if (runs.size() % 2 == 0) merged.push_back(runs.back());  // an odd run out waits for the next round
    runs = std::move(merged);
  }
  for (std::size_t i = 0; i < leftovers.size(); ++i) {
    if (i == 0 || leftovers[i].first != leftovers[i - 1].first) {
      context->leftovers.push_back(leftovers[i].first);
      context->leftover_begin.push_back(static_cast<std::uint32_t>(context->leftover_tokens.size()));
    }
    context->leftover_tokens.push_back(leftovers[i].second);  // (token, depth) is unique: one node per depth
  }
  context->leftover_begin.push_back(static_cast<std::uint32_t>(context->leftover_tokens.size()));
  return context;
}

namespace {

// Marks the tokens of every leftover of `context` that the stacks expanded from `rest` accept. Leftovers are
// sorted, so consecutive ones share prefixes: the stacks after each byte of the previous one are kept, and a
// prefix that fails skips every leftover starting with it.
template <class Context>
void check_leftovers(detail::StackArena& arena, StackId rest, const Context& context, std::vector<std::uint64_t>& bits) {
  thread_local std::vector<std::vector<StackId>> sets;
  thread_local std::vector<Utf8Decoder> decoders;
  if (sets.empty()) sets.resize(1);
  sets[0].clear();
  const auto& below = arena.node(rest);
  arena.expand(below.position, below.parent, sets[0]);
  arena.normalize(sets[0]);
  decoders.assign(1, Utf8Decoder{});

  const auto& leftovers = context.leftovers;
  const std::string_view* previous = nullptr;
  std::size_t valid = 0;  // sets[0..valid] hold the stacks after that many bytes of *previous
  std::size_t i = 0;
  while (i < leftovers.size()) {
    const std::string_view s = leftovers[i];
    std::size_t depth = 0;
    if (previous != nullptr) {
      const std::size_t limit = std::min({valid, s.size(), previous->size()});
      while (depth < limit && (*previous)[depth] == s[depth]) ++depth;
    }
    bool alive = true;
    for (; depth < s.size(); ++depth) {
      if (sets.size() <= depth + 1) sets.resize(depth + 2);
      if (decoders.size() <= depth + 1) decoders.resize(depth + 2);
      Utf8Decoder decoder = decoders[depth];
      const auto result = decoder.feed(static_cast<std::uint8_t>(s[depth]));
      if (result == Utf8Decoder::Result::invalid) {
        alive = false;
      } else if (result == Utf8Decoder::Result::partial) {
        alive = arena.accepts_some(sets[depth], decoder.range_lo(), decoder.range_hi());
        if (alive) sets[depth + 1] = sets[depth];
      } else {
        arena.advance(sets[depth], decoder.value, sets[depth + 1]);
        alive = !sets[depth + 1].empty();
      }
      if (!alive) break;
      decoders[depth + 1] = decoder;
    }
    previous = &leftovers[i];
    if (alive) {
      valid = s.size();
      for (std::uint32_t t = context.leftover_begin[i]; t < context.leftover_begin[i + 1]; ++t) {
        const auto token = context.leftover_tokens[t];
        bits[static_cast<std::size_t>(token) >> 6] |= std::uint64_t{1} << (token & 63);
      }
      ++i;
      continue;
    }
    // Every leftover that starts with s[0..depth] fails the same way.
    valid = depth;
    const std::string_view failed(s.data(), depth + 1);
    i = static_cast<std::size_t>(
        std::partition_point(leftovers.begin() + static_cast<std::ptrdiff_t>(i) + 1, leftovers.end(),
                             [&](std::string_view x) { return x.substr(0, failed.size()) == failed; }) -
        leftovers.begin());
  }
}

}  // namespace

void TokenMasker::fill(const GrammarState& state, std::span<const std::int32_t> end_tokens,
                       std::vector<std::uint8_t>& mask) const {
  if (state.shared_grammar() != grammar_) throw std::invalid_argument("TokenMasker::fill: the state is under another grammar");
  if (state.partial().needed != 0) {
    // A character begun by the last token: rare (byte-fallback tokens); the plain walk handles it.
    allowed_tokens(state, *trie_, end_tokens, mask);
    return;
  }
  const auto vocab = static_cast<std::size_t>(trie_->vocab_size());
  thread_local std::vector<std::uint64_t> bits;
  bits.assign(vocab / 64 + 1, 0);

  // Per-thread scratch, reused from step to step rather than allocated anew (not yet checked by a counting
  // operator new, as the sampler is).
  thread_local detail::StackArena arena(*grammar_);
  thread_local std::vector<StackId> set;
  thread_local std::vector<std::uint32_t> key;
  arena.reset(*grammar_);
  detail::load_stacks(state, arena, set);
  for (const StackId top : set) {
    if (top < 0) continue;
    // The context: frames from the top down to the first one in a named rule that is not lexical.
    key.clear();
    StackId id = top;
    for (;;) {
      const auto& n = arena.node(id);
      key.push_back(n.position);
      if (context_boundary_[grammar_->rule_at(n.position)] || n.parent == kEmptyStack) break;
      id = n.parent;
    }
    const StackId rest = arena.node(id).parent;
    const bool whole = rest == kEmptyStack;
    const auto context = context_for(key, whole);
    for (std::size_t w = 0; w < bits.size(); ++w) bits[w] |= context->accepted[w];
    if (!whole && !context->leftovers.empty()) check_leftovers(arena, rest, *context, bits);
  }

  // Bits to bytes eight at a time: each byte of the bitset looks up its eight 0/1 bytes.
  static const auto spread = [] {
    std::array<std::uint64_t, 256> table{};
    for (std::size_t b = 0; b < 256; ++b) {
      for (std::size_t k = 0; k < 8; ++k) table[b] |= static_cast<std::uint64_t>((b >> k) & 1u) << (8 * k);
    }
    return table;
  }();
  mask.resize(vocab);
  std::size_t id = 0;
  for (; id + 8 <= vocab; id += 8) {
    const auto byte = static_cast<std::uint8_t>(bits[id >> 6] >> (id & 63));
    const std::uint64_t eight = spread[byte];  // little-endian: byte k of `eight` is bit k (x86-64, as the kernels)
    std::memcpy(mask.data() + id, &eight, 8);
  }
  for (; id < vocab; ++id) mask[id] = static_cast<std::uint8_t>((bits[id >> 6] >> (id & 63)) & 1u);
  if (state.can_end()) {
    for (const std::int32_t end : end_tokens) {
      if (end >= 0 && static_cast<std::size_t>(end) < vocab) mask[static_cast<std::size_t>(end)] = 1;
    }
  }
}

}  // namespace loom::compute::grammar
