#include "pre_tokenizer.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <utility>

#include "unicode_text.hpp"

namespace loom::compute::detail {

// The text decoded once: code points, their classes, and where each starts in the bytes.
class PreTokenizerText {
 public:
  explicit PreTokenizerText(std::string_view text) {
    code_points_.reserve(text.size());
    classes_.reserve(text.size());
    offsets_.reserve(text.size() + 1);
    for (std::size_t offset = 0; offset < text.size();) {
      const Utf8Unit unit = decode_utf8(text, offset);
      code_points_.push_back(unit.code_point);
      classes_.push_back(char_classes(unit.code_point));
      offsets_.push_back(offset);
      offset += unit.length;
    }
    offsets_.push_back(text.size());
  }

  std::size_t size() const noexcept { return code_points_.size(); }
  char32_t operator[](std::size_t i) const noexcept { return code_points_[i]; }
  bool is(std::size_t i, CharClasses classes) const noexcept { return (classes_[i] & classes) != 0; }
  std::size_t offset(std::size_t i) const noexcept { return offsets_[i]; }

 private:
  std::vector<char32_t> code_points_;
  std::vector<CharClasses> classes_;
  std::vector<std::size_t> offsets_;
};

namespace {

using Text = PreTokenizerText;
using Match = PreTokenizer::Match;
namespace cc = char_class;

constexpr std::size_t kNoMatch = static_cast<std::size_t>(-1);

// ---- character sets used by the patterns ----------------------------------------------------------------

bool is_letter(const Text& t, std::size_t i) { return t.is(i, cc::letter); }
bool is_number(const Text& t, std::size_t i) { return t.is(i, cc::number); }
bool is_space(const Text& t, std::size_t i) { return t.is(i, cc::whitespace); }
bool is_punctuation(const Text& t, std::size_t i) { return t.is(i, cc::punctuation); }
bool is_line_break(const Text& t, std::size_t i) { return t[i] == U'\r' || t[i] == U'\n'; }
// [^\s\p{L}\p{N}]
bool is_other(const Text& t, std::size_t i) { return !t.is(i, cc::letter | cc::number | cc::whitespace); }
// [^\r\n\p{L}\p{N}]
bool is_word_prefix(const Text& t, std::size_t i) { return !t.is(i, cc::letter | cc::number) && !is_line_break(t, i); }
bool is_ascii_digit(const Text& t, std::size_t i) { return t[i] >= U'0' && t[i] <= U'9'; }
// [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and [\p{Ll}\p{Lm}\p{Lo}\p{M}] (gpt-4o)
bool is_cased_upper(const Text& t, std::size_t i) { return t.is(i, cc::upper | cc::other_letter | cc::mark); }
bool is_cased_lower(const Text& t, std::size_t i) { return t.is(i, cc::lower | cc::other_letter | cc::mark); }
// [\r\n/] (gpt-4o)
bool is_line_break_or_slash(const Text& t, std::size_t i) { return is_line_break(t, i) || t[i] == U'/'; }

struct CodePointRange {
  char32_t first;
  char32_t last;
};

bool in_ranges(std::span<const CodePointRange> ranges, char32_t c) {
  const auto it = std::upper_bound(ranges.begin(), ranges.end(), c,
                                   [](char32_t value, const CodePointRange& range) { return value < range.first; });
  return it != ranges.begin() && c <= std::prev(it)->last;
}

// deepseek-llm's letter class, [A-Za-zµÀ-ÖØ-öø-ƺ...𞤀-𞥃] in its tokenizer.json (cased letters), sorted.
constexpr CodePointRange kDeepseekLetters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},       {0xD8, 0xF6},
    {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},     {0x295, 0x2AF},     {0x370, 0x373},
    {0x376, 0x377},     {0x37B, 0x37D},     {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},
    {0x38C, 0x38C},     {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},
    {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
    {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},   {0xA722, 0xA76F},
    {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

// deepseek-llm's [!-/:-~！-／：-～‘-‟　-。] (ASCII and full-width punctuation, quotes, ideographic space and stops).
constexpr CodePointRange kDeepseekPunctuation[] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};

// [一-龥ࠀ-一가-퟿] of both deepseek rule sets (U+0800..U+4E00 and U+4E00..U+9FA5 overlap at U+4E00).
constexpr CodePointRange kDeepseekCjk[] = {{0x0800, 0x9FA5}, {0xAC00, 0xD7FF}};

bool is_deepseek_letter(const Text& t, std::size_t i) { return in_ranges(kDeepseekLetters, t[i]); }
bool is_deepseek_punctuation(const Text& t, std::size_t i) { return in_ranges(kDeepseekPunctuation, t[i]); }
bool is_deepseek_cjk(const Text& t, std::size_t i) { return in_ranges(kDeepseekCjk, t[i]); }
// [\p{P}\$\+<=>\^~\|`]: Unicode punctuation plus the ASCII punctuation characters that Unicode calls symbols.
bool is_falcon_punctuation(const Text& t, std::size_t i) {
  static constexpr std::u32string_view kAsciiSymbols = U"$+<=>^~|`";
  return is_punctuation(t, i) || kAsciiSymbols.find(t[i]) != std::u32string_view::npos;
}

using CharTest = bool (*)(const Text&, std::size_t);

// The end of the run of characters passing `test` that starts at `i`.
template <CharTest test>
std::size_t run(const Text& t, std::size_t i, std::size_t end) {
  while (i < end && test(t, i)) ++i;
  return i;
}

// ---- pattern pieces ---------------------------------------------------------------------------------------
// Each returns where its match starting at `pos` ends, or kNoMatch.

// 's|'t|'re|'ve|'m|'ll|'d, or the same under (?i:...). Unicode case folding makes U+017F (long s) match
// 's' case-insensitively too; no other character folds to one of these letters.
std::size_t contraction(const Text& t, std::size_t pos, std::size_t end, bool ignore_case) {
  if (pos + 1 >= end || t[pos] != U'\'') return kNoMatch;
  const auto folded = [&](std::size_t i) -> char32_t {
    const char32_t c = t[i];
    if (!ignore_case) return c;
    if (c >= U'A' && c <= U'Z') return c + (U'a' - U'A');
    return c == U'\u017F' ? U's' : c;
  };
  const char32_t first = folded(pos + 1);
  if (first == U's' || first == U't' || first == U'm' || first == U'd') return pos + 2;
  if (pos + 2 >= end) return kNoMatch;
  const char32_t second = folded(pos + 2);
  if ((first == U'r' && second == U'e') || (first == U'v' && second == U'e') || (first == U'l' && second == U'l')) {
    return pos + 3;
  }
  return kNoMatch;
}

// ` ?X+`: an optional space, taken only when X follows it (a space is never in X here).
template <CharTest test>
std::size_t optional_space_then_run(const Text& t, std::size_t pos, std::size_t end) {
  if (t[pos] == U' ' && pos + 1 < end && test(t, pos + 1)) return run<test>(t, pos + 1, end);
  if (test(t, pos)) return run<test>(t, pos, end);
  return kNoMatch;
}

// `\s?X+`: as above with any whitespace character, which may itself be in X (U+3000 in deepseek's sets).
template <CharTest test>
std::size_t optional_whitespace_then_run(const Text& t, std::size_t pos, std::size_t end) {
  if (is_space(t, pos) && pos + 1 < end && test(t, pos + 1)) return run<test>(t, pos + 1, end);
  if (test(t, pos)) return run<test>(t, pos, end);
  return kNoMatch;
}

// `\s+(?!\S)|\s+` at a whitespace character: the greedy run gives back its last character when a
// non-space follows, so that character can prefix the next word; a single one stays on its own.
std::size_t trailing_whitespace(const Text& t, std::size_t pos, std::size_t end) {
  const std::size_t run_end = run<is_space>(t, pos, end);
  return run_end == end || run_end - pos == 1 ? run_end : run_end - 1;
}

// `\s*[\r\n]+|\s+(?!\S)|\s+` at a whitespace character. The first alternative backtracks `\s*` to the last
// line break of the run and ends just after it; without a line break the other two decide.
std::size_t whitespace_with_line_breaks(const Text& t, std::size_t pos, std::size_t end) {
  const std::size_t run_end = run<is_space>(t, pos, end);
  for (std::size_t i = run_end; i > pos; --i) {
    if (is_line_break(t, i - 1)) return i;
  }
  return trailing_whitespace(t, pos, end);
}

// ---- whole patterns ----------------------------------------------------------------------------------------
// Each returns where its match at `pos` ends (always past `pos` for those that match every character).

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::size_t gpt2_at(const Text& t, std::size_t pos, std::size_t end) {
  if (const std::size_t e = contraction(t, pos, end, false); e != kNoMatch) return e;
  if (const std::size_t e = optional_space_then_run<is_letter>(t, pos, end); e != kNoMatch) return e;
  if (const std::size_t e = optional_space_then_run<is_number>(t, pos, end); e != kNoMatch) return e;
  if (const std::size_t e = optional_space_then_run<is_other>(t, pos, end); e != kNoMatch) return e;
  return trailing_whitespace(t, pos, end);
}

// Llama 3 (max_digits 3) and Qwen2 (1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
template <std::size_t max_digits>
std::size_t llama3_at(const Text& t, std::size_t pos, std::size_t end) {
  if (const std::size_t e = contraction(t, pos, end, true); e != kNoMatch) return e;
  if (is_letter(t, pos)) return run<is_letter>(t, pos, end);
  if (is_word_prefix(t, pos) && pos + 1 < end && is_letter(t, pos + 1)) return run<is_letter>(t, pos + 1, end);
  if (is_number(t, pos)) return std::min(run<is_number>(t, pos, end), pos + max_digits);
  if (const std::size_t e = optional_space_then_run<is_other>(t, pos, end); e != kNoMatch) {
    return run<is_line_break>(t, e, end);
  }
  return whitespace_with_line_breaks(t, pos, end);
}

// gpt-4o's two word alternatives, each after an optional [^\r\n\p{L}\p{N}]:
//   upper_first = false: [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?
//   upper_first = true:  [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|...)?
// The two classes overlap (Lm, Lo, M), so the first form backtracks its upper run to the last character
// that can start the lower one.
std::size_t gpt4o_word(const Text& t, std::size_t pos, std::size_t end, bool upper_first) {
  const bool can_prefix = is_word_prefix(t, pos);
  for (const std::size_t start : {pos + 1, pos}) {
    if (start == pos + 1 && (!can_prefix || start >= end)) continue;
    const std::size_t upper_end = run<is_cased_upper>(t, start, end);
    std::size_t word_end = kNoMatch;
    if (upper_first) {
      if (upper_end > start) word_end = run<is_cased_lower>(t, upper_end, end);
    } else if (upper_end < end && is_cased_lower(t, upper_end)) {
      word_end = run<is_cased_lower>(t, upper_end, end);
    } else {
      // Every character after the lower one given back is upper-only, so the lower run is that one character.
      for (std::size_t i = upper_end; i > start; --i) {
        if (is_cased_lower(t, i - 1)) {
          word_end = i;
          break;
        }
      }
    }
    if (word_end == kNoMatch) continue;
    const std::size_t with_contraction = contraction(t, word_end, end, true);
    return with_contraction != kNoMatch ? with_contraction : word_end;
  }
  return kNoMatch;
}

// gpt-4o (o200k):
// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
// |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
// |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
std::size_t gpt4o_at(const Text& t, std::size_t pos, std::size_t end) {
  if (const std::size_t e = gpt4o_word(t, pos, end, false); e != kNoMatch) return e;
  if (const std::size_t e = gpt4o_word(t, pos, end, true); e != kNoMatch) return e;
  if (is_number(t, pos)) return std::min(run<is_number>(t, pos, end), pos + 3);
  if (const std::size_t e = optional_space_then_run<is_other>(t, pos, end); e != kNoMatch) {
    return run<is_line_break_or_slash>(t, e, end);
  }
  return whitespace_with_line_breaks(t, pos, end);
}

// The leftmost match of a pattern given as "where does a match at pos end, if any".
template <std::size_t (*match_at)(const Text&, std::size_t, std::size_t)>
Match search(const Text& t, std::size_t from, std::size_t end) {
  for (std::size_t pos = from; pos < end; ++pos) {
    const std::size_t e = match_at(t, pos, end);
    if (e != kNoMatch) return {pos, e};
  }
  return {end, end};
}

template <CharTest test>
std::size_t one_of(const Text& t, std::size_t pos, std::size_t) {
  return test(t, pos) ? pos + 1 : kNoMatch;
}

template <CharTest test>
std::size_t run_of(const Text& t, std::size_t pos, std::size_t end) {
  return test(t, pos) ? run<test>(t, pos, end) : kNoMatch;
}

// [0-9][0-9][0-9]
std::size_t three_ascii_digits(const Text& t, std::size_t pos, std::size_t end) {
  return pos + 3 <= end && is_ascii_digit(t, pos) && is_ascii_digit(t, pos + 1) && is_ascii_digit(t, pos + 2)
             ? pos + 3
             : kNoMatch;
}

// \s+$: only the whitespace run that reaches the end of the piece can match, so look for it from the back
// rather than trying every position.
Match whitespace_at_end(const Text& t, std::size_t from, std::size_t end) {
  std::size_t begin = end;
  while (begin > from && is_space(t, begin - 1)) --begin;
  return {begin, end};
}

// ---- rule sets --------------------------------------------------------------------------------------------

using Pattern = PreTokenizer::Pattern;

constexpr Pattern kGpt2[] = {search<gpt2_at>};
constexpr Pattern kLlama3[] = {search<llama3_at<3>>};
constexpr Pattern kQwen2[] = {search<llama3_at<1>>};
constexpr Pattern kGpt4o[] = {search<gpt4o_at>};
// [\r\n], \s?[deepseek letters]+, \s?[deepseek punctuation]+, \s+$, [一-龥ࠀ-一가-퟿]+, \p{N}+
constexpr Pattern kDeepseekLlm[] = {
    search<one_of<is_line_break>>,
    search<optional_whitespace_then_run<is_deepseek_letter>>,
    search<optional_whitespace_then_run<is_deepseek_punctuation>>,
    whitespace_at_end,
    search<run_of<is_deepseek_cjk>>,
    search<run_of<is_number>>,
};
// [\r\n], \s?\p{L}+, \s?\p{P}+, [一-龥ࠀ-一가-퟿]+, \p{N}
constexpr Pattern kDeepseekCoder[] = {
    search<one_of<is_line_break>>,
    search<optional_whitespace_then_run<is_letter>>,
    search<optional_whitespace_then_run<is_punctuation>>,
    search<run_of<is_deepseek_cjk>>,
    search<one_of<is_number>>,
};
// [\p{P}\$\+<=>\^~\|`]+, the GPT-2 pattern, [0-9][0-9][0-9]
constexpr Pattern kFalcon[] = {search<run_of<is_falcon_punctuation>>, search<gpt2_at>, search<three_ascii_digits>};
// \p{N}, the GPT-2 pattern
constexpr Pattern kStarcoder[] = {search<one_of<is_number>>, search<gpt2_at>};

struct RuleSet {
  std::string_view name;
  std::span<const Pattern> patterns;
};

constexpr RuleSet kRuleSets[] = {
    {"default", kGpt2},       {"gpt-2", kGpt2},   {"mpt", kGpt2},
    {"llama-bpe", kLlama3},   {"qwen2", kQwen2},  {"deepseek-llm", kDeepseekLlm},
    {"deepseek-coder", kDeepseekCoder},           {"falcon", kFalcon},
    {"starcoder", kStarcoder}, {"refact", kStarcoder}, {"smollm", kStarcoder},
    {"gpt-4o", kGpt4o},
};

constexpr auto kKnownNames = [] {
  std::array<std::string_view, std::size(kRuleSets)> names{};
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = kRuleSets[i].name;
  return names;
}();

}  // namespace

PreTokenizer::PreTokenizer(std::string_view name) {
  for (const RuleSet& rules : kRuleSets) {
    if (rules.name == name) {
      patterns_ = rules.patterns;
      return;
    }
  }
  constexpr std::size_t kMaxShown = 64;  // the name comes from a file
  std::string message = "unknown pre-tokenizer \"" + std::string(name.substr(0, kMaxShown)) +
                        (name.size() > kMaxShown ? "...\"" : "\"") + " (tokenizer.ggml.pre); known:";
  for (const std::string_view known : kKnownNames) {
    message += ' ';  // appended piecewise: GCC 12 warns (-Wrestrict, falsely) on " " + std::string(...)
    message += known;
  }
  throw std::invalid_argument(message);
}

std::span<const std::string_view> PreTokenizer::known_names() noexcept { return kKnownNames; }

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces) const {
  if (text.empty()) return;
  const Text decoded(text);
  std::vector<Match> current{{0, decoded.size()}};
  std::vector<Match> next;
  for (const Pattern pattern : patterns_) {
    next.clear();
    for (const Match piece : current) {
      std::size_t pos = piece.begin;
      while (pos < piece.end) {
        const Match m = pattern(decoded, pos, piece.end);
        if (m.begin == m.end) {
          next.push_back({pos, piece.end});
          break;
        }
        if (m.begin > pos) next.push_back({pos, m.begin});
        next.push_back(m);
        pos = m.end;
      }
    }
    std::swap(current, next);
  }
  for (const Match piece : current) {
    const std::size_t begin = decoded.offset(piece.begin);
    pieces.push_back(text.substr(begin, decoded.offset(piece.end) - begin));
  }
}

}  // namespace loom::compute::detail
