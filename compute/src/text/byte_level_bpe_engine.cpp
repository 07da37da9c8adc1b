// Byte-level BPE (GPT-2 style): the text is split into pieces by the model's pre-tokenizer, each piece's
// bytes start as one symbol each (the tokens of the printable characters that GPT-2's byte map gives them),
// and adjacent symbols are merged by the lowest-ranked merge rule first (the leftmost pair on a tie) until no
// rule applies. Merges are looked up by token ids, so a piece never allocates strings.
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "pre_tokenizer.hpp"
#include "tokenizer_engine.hpp"
#include "unicode_text.hpp"

namespace loom::compute::detail {

namespace {

// GPT-2's byte map: bytes that are printable characters on their own (33..126, 161..172, 174..255) stand for
// themselves; the other 68 become U+0100, U+0101, ... in byte order, so every token is printable text.
struct ByteMap {
  static constexpr char32_t kFirstStandIn = 0x100;
  static constexpr std::size_t kStandIns = 68;
  std::array<char32_t, 256> code_point{};
  std::array<std::int16_t, kFirstStandIn + kStandIns> byte{};  // by code point; -1 where none

  ByteMap() {
    byte.fill(-1);
    char32_t next_stand_in = kFirstStandIn;
    for (std::uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      code_point[b] = printable ? b : next_stand_in++;
      byte[code_point[b]] = static_cast<std::int16_t>(b);
    }
  }

  // The byte a code point stands for, or -1 when it is not one of the 256.
  int byte_of(char32_t c) const { return c < byte.size() ? byte[c] : -1; }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

// Merge rules by the ids of their two parts: an open-addressing table (linear probing, a power-of-two size
// at most half full), since looking pairs up is most of the work of encoding.
class MergeTable {
 public:
  struct Merge {
    std::int32_t rank;
    std::int32_t result;
  };

  explicit MergeTable(std::size_t rules) {
    std::size_t size = 16;
    while (size < 2 * rules) size *= 2;
    slots_.assign(size, Slot{kEmpty, {}});
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(size));
  }

  // Keeps the first rule given for a pair.
  void insert(std::int32_t left, std::int32_t right, Merge merge) {
    const std::uint64_t key = pair_key(left, right);
    std::size_t i = home(key);
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & (slots_.size() - 1);
    if (slots_[i].key == kEmpty) slots_[i] = {key, merge};
  }

  const Merge* find(std::int32_t left, std::int32_t right) const {
    const std::uint64_t key = pair_key(left, right);
    for (std::size_t i = home(key);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == key) return &slots_[i].merge;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};  // ids are non-negative, so no pair has this key

  struct Slot {
    std::uint64_t key;
    Merge merge;
  };

  static std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
  }
  // Fibonacci hashing: the top bits of the key times 2^64 / golden ratio.
  std::size_t home(std::uint64_t key) const { return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }

  std::vector<Slot> slots_;
  unsigned shift_ = 0;
};

class ByteLevelBpeEngine final : public TokenizerEngine {
 public:
  explicit ByteLevelBpeEngine(const Vocabulary& vocabulary)
      : vocabulary_(vocabulary),
        pre_tokenizer_(vocabulary.pre),
        // Llama 3's tokenizer sets `ignore_merges`: a piece that is itself a token is that token, even when
        // the merges would not build it.
        whole_piece_first_(vocabulary.pre == "llama-bpe"),
        merges_(vocabulary.merges.size()) {
    token_ids_.reserve(vocabulary.tokens.size());
    for (std::int32_t id = 0; id < vocabulary.size(); ++id) {
      token_ids_.emplace(vocabulary.tokens[static_cast<std::size_t>(id)], id);  // the first of duplicates wins
    }
    for (std::size_t b = 0; b < 256; ++b) {
      std::string text;
      append_utf8(text, byte_map().code_point[b]);
      byte_tokens_[b] = find_token(text);
    }
    read_merges();
    pieces_.reserve(vocabulary.tokens.size());
    for (std::int32_t id = 0; id < vocabulary.size(); ++id) pieces_.push_back(unmapped_text(id));
  }

  void encode(std::string_view text, bool, std::vector<std::int32_t>& out) const override {
    std::vector<std::string_view> pieces;
    pre_tokenizer_.split(text, pieces);
    Scratch scratch;
    for (const std::string_view piece : pieces) {
      // Symbols are indexed with 32 bits; a longer piece (only absurd input has one) is encoded in parts.
      for (std::size_t offset = 0; offset < piece.size(); offset += kMaxPieceBytes) {
        encode_piece(piece.substr(offset, kMaxPieceBytes), scratch, out);
      }
    }
  }

  std::string piece(std::int32_t id) const override { return pieces_.at(static_cast<std::size_t>(id)); }

 private:
  struct Symbol {
    std::int32_t id;  // kNone for a byte the vocabulary has no token for, kRemoved once merged away
    std::int32_t prev;
    std::int32_t next;
  };

  // A pair that may be merged; it is stale once either side has changed.
  struct Candidate {
    std::int32_t rank;
    std::int32_t left;
    std::int32_t right;
    std::int32_t left_id;
    std::int32_t right_id;
    std::int32_t result;
    // The std heap functions keep the greatest on top: make that the lowest rank, then the leftmost.
    bool operator<(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : left > other.left;
    }
  };

  struct Scratch {
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
    std::string mapped;
  };

  static constexpr std::int32_t kRemoved = -2;
  static constexpr std::size_t kMaxPieceBytes = std::size_t{1} << 30;

  std::int32_t find_token(std::string_view text) const {
    const auto it = token_ids_.find(text);
    return it == token_ids_.end() ? Vocabulary::kNone : it->second;
  }

  void read_merges() {
    const auto& merges = vocabulary_.merges;
    std::string joined;
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
      const std::string& merge = merges[rank];
      const std::size_t space = merge.find(' ');
      if (space == 0 || space == std::string::npos || space + 1 == merge.size() ||
          merge.find(' ', space + 1) != std::string::npos) {
        constexpr std::size_t kMaxShown = 64;  // the merge comes from a file
        throw std::invalid_argument("tokenizer: merge " + std::to_string(rank) + " (\"" +
                                    merge.substr(0, kMaxShown) + (merge.size() > kMaxShown ? "..." : "") +
                                    "\") is not two tokens separated by one space");
      }
      const std::string_view left(merge.data(), space);
      const std::string_view right(merge.data() + space + 1, merge.size() - space - 1);
      joined.assign(left);
      joined += right;
      const std::int32_t left_id = find_token(left);
      const std::int32_t right_id = find_token(right);
      const std::int32_t result = find_token(joined);
      // A rule whose parts or result are not tokens can never produce a token: it is left out.
      if (left_id == Vocabulary::kNone || right_id == Vocabulary::kNone || result == Vocabulary::kNone) continue;
      merges_.insert(left_id, right_id, {static_cast<std::int32_t>(rank), result});
    }
  }

  // A token's text with the byte map undone. User-defined tokens are matched verbatim in the input, so they
  // stand for their text as it is; a character outside the byte map is kept as it is too.
  std::string unmapped_text(std::int32_t id) const {
    const std::string& text = vocabulary_.tokens[static_cast<std::size_t>(id)];
    if (vocabulary_.kinds[static_cast<std::size_t>(id)] == TokenKind::user_defined) return text;
    std::string bytes;
    bytes.reserve(text.size());
    for (std::size_t offset = 0; offset < text.size();) {
      const Utf8Unit unit = decode_utf8(text, offset);
      const int b = byte_map().byte_of(unit.code_point);
      if (b >= 0) {
        bytes += static_cast<char>(b);
      } else {
        bytes.append(text, offset, unit.length);
      }
      offset += unit.length;
    }
    return bytes;
  }

  void push_candidate(Scratch& scratch, std::int32_t left, std::int32_t right) const {
    if (left < 0 || right < 0) return;
    const Symbol& l = scratch.symbols[static_cast<std::size_t>(left)];
    const Symbol& r = scratch.symbols[static_cast<std::size_t>(right)];
    if (l.id < 0 || r.id < 0) return;
    const MergeTable::Merge* merge = merges_.find(l.id, r.id);
    if (merge == nullptr) return;
    scratch.heap.push_back({merge->rank, left, right, l.id, r.id, merge->result});
    std::push_heap(scratch.heap.begin(), scratch.heap.end());
  }

  void encode_piece(std::string_view piece, Scratch& scratch, std::vector<std::int32_t>& out) const {
    if (whole_piece_first_) {
      scratch.mapped.clear();
      for (const char c : piece) append_utf8(scratch.mapped, byte_map().code_point[static_cast<unsigned char>(c)]);
      if (const std::int32_t id = find_token(scratch.mapped); id != Vocabulary::kNone) {
        out.push_back(id);
        return;
      }
    }
    auto& symbols = scratch.symbols;
    symbols.clear();
    const auto count = static_cast<std::int32_t>(piece.size());
    for (std::int32_t i = 0; i < count; ++i) {
      symbols.push_back({byte_tokens_[static_cast<unsigned char>(piece[static_cast<std::size_t>(i)])], i - 1,
                         i + 1 < count ? i + 1 : -1});
    }
    scratch.heap.clear();
    for (std::int32_t i = 0; i + 1 < count; ++i) push_candidate(scratch, i, i + 1);
    while (!scratch.heap.empty()) {
      std::pop_heap(scratch.heap.begin(), scratch.heap.end());
      const Candidate c = scratch.heap.back();
      scratch.heap.pop_back();
      Symbol& left = symbols[static_cast<std::size_t>(c.left)];
      Symbol& right = symbols[static_cast<std::size_t>(c.right)];
      if (left.next != c.right || left.id != c.left_id || right.id != c.right_id) continue;
      left.id = c.result;
      right.id = kRemoved;
      left.next = right.next;
      if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = c.left;
      push_candidate(scratch, left.prev, c.left);
      push_candidate(scratch, c.left, left.next);
    }
    // The first symbol is never merged away (a merge folds the right symbol into the left one); pieces are
    // never empty.
    for (std::int32_t i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
      const std::int32_t id = symbols[static_cast<std::size_t>(i)].id;
      if (id >= 0) {
        out.push_back(id);
      } else if (vocabulary_.unknown != Vocabulary::kNone) {
        // A byte the vocabulary cannot spell (GPT-2-style vocabularies have all 256, so only a damaged or
        // trimmed one gets here) becomes the unknown token; without one it is dropped, as Hugging Face's BPE
        // does.
        out.push_back(vocabulary_.unknown);
      }
    }
  }

  const Vocabulary& vocabulary_;
  PreTokenizer pre_tokenizer_;
  bool whole_piece_first_;
  std::unordered_map<std::string_view, std::int32_t> token_ids_;  // views into vocabulary_.tokens
  std::array<std::int32_t, 256> byte_tokens_{};
  MergeTable merges_;
  std::vector<std::string> pieces_;
};

}  // namespace

std::unique_ptr<TokenizerEngine> make_byte_level_bpe_engine(const Vocabulary& vocabulary) {
  return std::make_unique<ByteLevelBpeEngine>(vocabulary);
}

}  // namespace loom::compute::detail
