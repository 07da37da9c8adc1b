// ConstraintCache: a backend's compiled output constraints. A sequence that decodes under a constraint
// (proto::OutputConstraint) needs the compiled Grammar and a TokenMasker of that grammar over the model's
// vocabulary; both are immutable and shared, and the masker keeps the contexts it has worked out, so a
// constraint that many requests send (a JSON Schema of an application, json_object) is compiled once and its
// masks get faster with every sequence. The vocabulary's TokenTrie is built on first use (a backend that
// never sees a constraint never pays for it) and shared by every masker.
//
// Bounded: at most `capacity` constraints are kept, the least recently used one dropped first. A dropped
// entry lives on in the sequences that use it (they hold its shared_ptrs), so eviction never disturbs a
// running sequence; only a later sequence with that constraint compiles it again.
//
// Not thread-safe: one backend's step thread uses it (the maskers it returns may be used from any thread).
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/token_mask.hpp"
#include "loom/compute/grammar/token_masker.hpp"
#include "loom/proto/sampling_params.hpp"

namespace loom::compute {
class Tokenizer;
}

namespace loom::compute::grammar {

// A constraint ready to run: its grammar (a sequence's GrammarState starts from it) and its masker.
struct CompiledConstraint {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const TokenMasker> masker;
};

class ConstraintCache {
 public:
  struct Options {
    std::size_t capacity = 64;     // constraints kept (at least 1)
    GrammarLimits limits{};        // for compile_constraint
    TokenMasker::Options masker{}; // for each constraint's masker
  };

  // Over the tokenizer's vocabulary (TokenTrie::from_tokenizer, built on the first compile).
  explicit ConstraintCache(std::shared_ptr<const Tokenizer> tokenizer);
  ConstraintCache(std::shared_ptr<const Tokenizer> tokenizer, Options options);
  // Over a trie already built (tests and benchmarks with a vocabulary of their own).
  ConstraintCache(std::shared_ptr<const TokenTrie> trie, Options options);

  // The constraint compiled, from the cache or now. Throws as compile_constraint does (GrammarError,
  // SchemaError; both std::invalid_argument); a constraint that fails is not kept.
  CompiledConstraint get(const proto::OutputConstraint& constraint);

  // The vocabulary's trie (built now if it was not yet).
  const std::shared_ptr<const TokenTrie>& trie();

  std::size_t size() const noexcept { return entries_.size(); }
  std::size_t capacity() const noexcept { return options_.capacity; }
  // Compilations done (misses), for tests.
  std::size_t compilations() const noexcept { return compilations_; }

 private:
  struct Entry {
    std::string key;
    CompiledConstraint compiled;
  };

  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const TokenTrie> trie_;
  Options options_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  std::size_t compilations_ = 0;
};

}  // namespace loom::compute::grammar
