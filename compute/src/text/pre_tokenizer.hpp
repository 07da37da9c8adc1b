// PreTokenizer (internal): splits text into the pieces that byte-level BPE then encodes one by one, following
// the split rules a model was trained with, named by `tokenizer.ggml.pre`. Each rule set is a list of
// patterns from the model's tokenizer configuration, applied in turn to every piece the previous one left
// (what a pattern matches becomes a piece, and so does the text between two matches). The patterns are
// written out by hand over code points, with the regex engine's semantics (leftmost match, alternatives in
// order, greedy quantifiers with backtracking, lookahead), so no regex library is involved.
//
// Bytes that are not valid UTF-8 stay in the pieces as they are (each counts as a symbol character), so the
// pieces always join back to exactly the input.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::compute::detail {

class PreTokenizerText;

class PreTokenizer {
 public:
  // Finds the next match of one pattern in code points [from, end) of a text: its [begin, end) in code
  // points, begin == end when there is none.
  struct Match {
    std::size_t begin;
    std::size_t end;
  };
  using Pattern = Match (*)(const PreTokenizerText& text, std::size_t from, std::size_t end);

  // Throws std::invalid_argument naming `name` and listing the known names when `name` is not one of them.
  explicit PreTokenizer(std::string_view name);

  // The names the constructor accepts.
  static std::span<const std::string_view> known_names() noexcept;

  // Appends the pieces of `text` to `pieces`: non-empty, in order, together exactly `text`. The views
  // point into `text`.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;

 private:
  std::span<const Pattern> patterns_;
};

}  // namespace loom::compute::detail
