// SentencePiece BPE as the reference GGUF implementation runs it for `tokenizer.ggml.model = llama`: spaces
// become U+2581 (with one more in front of a run that starts the text or follows a special token, when
// add_space_prefix), the text is split into UTF-8 characters, and the adjacent pair whose concatenation is the
// highest-scoring vocabulary token is merged, again and again (ties: the leftmost pair), until no pair is a
// token. Each remaining symbol is its token, or, for a character the vocabulary lacks, one byte token
// `<0xNN>` per byte (else the unknown token).
//
// Pairs wait in a priority queue; a merge makes the entries of its two old neighbour pairs stale, which is
// detected when they come out (a symbol only ever grows, so a pair whose total length changed is stale).
//
// Merges are local: two stretches of text that no vocabulary token can span evolve independently, in the
// same relative order as in one run. When no token has a U+2581 after another character (true of Llama's
// vocabulary: spaces only ever lead a piece), no token spans the point before a U+2581 that follows
// another character, so the text is cut there into words and each word is merged on its own. The result is
// the same; the queue stays small and in cache (a 1 MB text is about 4x faster than in one piece).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sentencepiece_text.hpp"
#include "tokenizer_engine.hpp"

namespace loom::compute::detail {
namespace {

// Byte length of a UTF-8 sequence from its first byte, by its high nibble. Stray continuation bytes count
// as one-byte characters (they can only become byte tokens), as in the reference.
constexpr std::size_t utf8_length(unsigned char first) noexcept {
  constexpr std::uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[first >> 4];
}

struct Symbol {
  std::uint32_t start;  // into the escaped text
  std::uint32_t size;   // 0 once merged into its left neighbour
  std::int32_t prev;
  std::int32_t next;
  std::int32_t id;  // the token, once known (after a merge); -1 for a symbol that is still one character
};

struct Pair {
  float score;
  std::int32_t left;
  std::int32_t right;
  std::uint32_t size;  // left.size + right.size when the pair was queued
  std::int32_t id;     // the token their concatenation is

  // Priority order: the higher score first, on equal scores the leftmost.
  friend bool operator<(const Pair& a, const Pair& b) noexcept {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SentencePieceEngine final : public TokenizerEngine {
 public:
  explicit SentencePieceEngine(const Vocabulary& vocabulary) : vocabulary_(vocabulary) {
    ids_.reserve(vocabulary.tokens.size());
    for (std::int32_t id = 0; id < vocabulary.size(); ++id) {
      const std::string& text = vocabulary.tokens[static_cast<std::size_t>(id)];
      if (text.empty()) continue;
      // A later duplicate wins, as in the reference's text-to-id map.
      ids_.insert_or_assign(std::string_view(text), id);
      if (text.size() > max_token_bytes_) max_token_bytes_ = text.size();
      std::size_t leading_spaces = 0;
      while (text.compare(leading_spaces, kSentencePieceSpace.size(), kSentencePieceSpace) == 0) {
        leading_spaces += kSentencePieceSpace.size();
      }
      if (text.find(kSentencePieceSpace, leading_spaces) != std::string::npos) words_are_independent_ = false;
      if (vocabulary.kinds[static_cast<std::size_t>(id)] == TokenKind::byte && !parse_byte_piece(text)) {
        throw std::invalid_argument("sentencepiece: token " + std::to_string(id) + " \"" + text +
                                    "\" is marked as a byte token but is not of the form <0xNN>");
      }
    }
    // Fallback for a byte of a character the vocabulary lacks: its <0xNN> token, else a token that is just
    // that byte, else the unknown token (the reference's order).
    for (int byte = 0; byte < 256; ++byte) {
      const char as_char = static_cast<char>(byte);
      const std::string name = byte_piece(static_cast<std::uint8_t>(byte));
      std::int32_t id = find(name);
      if (id < 0) id = find(std::string_view(&as_char, 1));
      if (id < 0) id = vocabulary.unknown;
      if (!vocabulary.valid(id)) {
        throw std::invalid_argument("sentencepiece: the vocabulary has no token for byte " + name +
                                    " and no unknown token, so some text cannot be encoded");
      }
      byte_ids_[static_cast<std::size_t>(byte)] = id;
    }
  }

  void encode(std::string_view text, bool after_boundary, std::vector<std::int32_t>& out) const override {
    std::string escaped;
    escaped.reserve(text.size() + kSentencePieceSpace.size());
    if (after_boundary && vocabulary_.add_space_prefix) escaped += kSentencePieceSpace;
    for (const char c : text) {
      if (c == ' ') {
        escaped += kSentencePieceSpace;
      } else {
        escaped += c;
      }
    }
    if (escaped.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
      throw std::length_error("sentencepiece: a run of " + std::to_string(text.size()) +
                              " bytes is too long to encode");
    }

    Work work;
    std::size_t segment_start = 0;
    bool previous_is_space = false;
    for (std::size_t at = 0; at < escaped.size();) {
      const std::size_t size = character_size(escaped, at);
      const bool is_space = escaped.compare(at, size, kSentencePieceSpace) == 0;
      if (words_are_independent_ && is_space && !previous_is_space && at > segment_start) {
        encode_segment(escaped, segment_start, at, work, out);
        segment_start = at;
      }
      previous_is_space = is_space;
      at += size;
    }
    if (segment_start < escaped.size()) encode_segment(escaped, segment_start, escaped.size(), work, out);
  }

  std::string piece(std::int32_t id) const override {
    const std::string& text = vocabulary_.tokens[static_cast<std::size_t>(id)];
    switch (vocabulary_.kinds[static_cast<std::size_t>(id)]) {
      case TokenKind::byte:
        return std::string(1, static_cast<char>(*parse_byte_piece(text)));
      case TokenKind::normal: {
        std::string result;
        result.reserve(text.size());
        for (std::size_t at = 0; at < text.size();) {
          if (text.compare(at, kSentencePieceSpace.size(), kSentencePieceSpace) == 0) {
            result += ' ';
            at += kSentencePieceSpace.size();
          } else {
            result += text[at++];
          }
        }
        return result;
      }
      default:
        // User-defined pieces are text as written (the reference does not unescape them); the unknown token
        // shows as its own text, so that lost input stays visible.
        return text;
    }
  }

 private:
  // Buffers for encode_segment, reused from one segment to the next.
  struct Work {
    std::vector<Symbol> symbols;
    std::vector<Pair> queue;  // a max-heap
  };

  static std::size_t character_size(const std::string& text, std::size_t at) noexcept {
    return std::min(utf8_length(static_cast<unsigned char>(text[at])), text.size() - at);
  }

  // The ids of escaped[begin, end), which starts at a character boundary.
  void encode_segment(const std::string& escaped, std::size_t begin, std::size_t end, Work& work,
                      std::vector<std::int32_t>& out) const {
    auto& symbols = work.symbols;
    auto& queue = work.queue;
    symbols.clear();
    queue.clear();
    for (std::size_t at = begin; at < end;) {
      const std::size_t size = std::min(character_size(escaped, at), end - at);
      const auto index = static_cast<std::int32_t>(symbols.size());
      symbols.push_back({static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(size), index - 1,
                         at + size == end ? -1 : index + 1, -1});
      at += size;
    }

    auto try_pair = [&](std::int32_t left, std::int32_t right) {
      if (left < 0 || right < 0) return;
      const Symbol& a = symbols[static_cast<std::size_t>(left)];
      const std::uint32_t size = a.size + symbols[static_cast<std::size_t>(right)].size;
      if (size > max_token_bytes_) return;
      const std::int32_t id = find(std::string_view(escaped).substr(a.start, size));
      if (id < 0) return;
      float score = vocabulary_.scores[static_cast<std::size_t>(id)];
      if (std::isnan(score)) score = -std::numeric_limits<float>::infinity();  // keeps the order strict
      queue.push_back({score, left, right, size, id});
      std::push_heap(queue.begin(), queue.end());
    };
    for (std::int32_t i = 1; i < static_cast<std::int32_t>(symbols.size()); ++i) try_pair(i - 1, i);

    while (!queue.empty()) {
      std::pop_heap(queue.begin(), queue.end());
      const Pair pair = queue.back();
      queue.pop_back();
      Symbol& left = symbols[static_cast<std::size_t>(pair.left)];
      Symbol& right = symbols[static_cast<std::size_t>(pair.right)];
      if (left.size == 0 || right.size == 0 || left.size + right.size != pair.size) continue;  // stale
      left.size += right.size;
      left.id = pair.id;
      right.size = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = pair.left;
      try_pair(left.prev, pair.left);
      try_pair(pair.left, left.next);
    }

    for (std::int32_t i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
      const Symbol& symbol = symbols[static_cast<std::size_t>(i)];
      std::int32_t id = symbol.id;
      if (id < 0) id = find(std::string_view(escaped).substr(symbol.start, symbol.size));
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      for (std::uint32_t k = 0; k < symbol.size; ++k) {
        out.push_back(byte_ids_[static_cast<unsigned char>(escaped[symbol.start + k])]);
      }
    }
  }

  std::int32_t find(std::string_view text) const {
    const auto found = ids_.find(text);
    return found == ids_.end() ? -1 : found->second;
  }

  const Vocabulary& vocabulary_;
  std::unordered_map<std::string_view, std::int32_t> ids_;  // views into vocabulary_.tokens
  std::size_t max_token_bytes_ = 0;
  std::array<std::int32_t, 256> byte_ids_{};
  bool words_are_independent_ = true;  // no token has U+2581 after another character
};

}  // namespace

std::unique_ptr<TokenizerEngine> make_sentencepiece_engine(const Vocabulary& vocabulary) {
  return std::make_unique<SentencePieceEngine>(vocabulary);
}

}  // namespace loom::compute::detail
