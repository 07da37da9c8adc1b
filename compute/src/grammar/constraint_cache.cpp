#include "loom/compute/grammar/constraint_cache.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "loom/compute/grammar/output_constraint.hpp"
#include "loom/compute/text/tokenizer.hpp"

namespace loom::compute::grammar {

namespace {

// The kind and the text: two constraints with the same text but different kinds (a GBNF text that happens
// to be a schema's JSON) are different constraints.
std::string key_of(const proto::OutputConstraint& constraint) {
  std::string key;
  key.reserve(constraint.text.size() + 1);
  key.push_back(static_cast<char>('0' + static_cast<int>(constraint.kind)));
  key += constraint.text;
  return key;
}

}  // namespace

ConstraintCache::ConstraintCache(std::shared_ptr<const Tokenizer> tokenizer)
    : ConstraintCache(std::move(tokenizer), Options{}) {}

ConstraintCache::ConstraintCache(std::shared_ptr<const Tokenizer> tokenizer, Options options)
    : tokenizer_(std::move(tokenizer)), options_(std::move(options)) {
  if (!tokenizer_) throw std::invalid_argument("ConstraintCache needs a tokenizer");
  options_.capacity = std::max<std::size_t>(options_.capacity, 1);
}

ConstraintCache::ConstraintCache(std::shared_ptr<const TokenTrie> trie, Options options)
    : trie_(std::move(trie)), options_(std::move(options)) {
  if (!trie_) throw std::invalid_argument("ConstraintCache needs a token trie");
  options_.capacity = std::max<std::size_t>(options_.capacity, 1);
}

const std::shared_ptr<const TokenTrie>& ConstraintCache::trie() {
  if (!trie_) trie_ = TokenTrie::from_tokenizer(*tokenizer_);
  return trie_;
}

CompiledConstraint ConstraintCache::get(const proto::OutputConstraint& constraint) {
  std::string key = key_of(constraint);
  if (const auto found = index_.find(key); found != index_.end()) {
    entries_.splice(entries_.begin(), entries_, found->second);  // now the most recently used
    return found->second->compiled;
  }
  ++compilations_;
  CompiledConstraint compiled;
  compiled.grammar = compile_constraint(constraint, options_.limits);  // throws: nothing kept
  compiled.masker = std::make_shared<const TokenMasker>(compiled.grammar, trie(), options_.masker);
  if (entries_.size() >= options_.capacity) {
    index_.erase(entries_.back().key);
    entries_.pop_back();
  }
  entries_.push_front(Entry{std::move(key), compiled});
  index_.emplace(entries_.front().key, entries_.begin());
  return compiled;
}

}  // namespace loom::compute::grammar
