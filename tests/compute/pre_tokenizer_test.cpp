// The pre-tokenizers: splits for each supported `tokenizer.ggml.pre` name on tricky inputs. Every expected
// split is derived by hand from the public pattern(s) of that name, quoted above each group, with the regex
// engine's rules: leftmost match, alternatives tried in order, greedy quantifiers that give back characters
// when the rest of the pattern needs them. For rule sets with several patterns, each pattern splits every
// piece the previous one left (matches and the text between them become pieces).
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "text/pre_tokenizer.hpp"

namespace loom::compute::detail {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(std::string_view name, std::string_view text) {
  std::vector<std::string_view> views;
  PreTokenizer(name).split(text, views);
  return Pieces(views.begin(), views.end());
}

// ---- GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ ---------------------

TEST(PreTokenizerGpt2, ContractionsAreCaseSensitive) {
  // "'RE": no lower-case contraction matches, so the apostrophe is a run of "other" characters on its own.
  EXPECT_EQ(split("gpt-2", "I'm don't WE'RE you'll"),
            (Pieces{"I", "'m", " don", "'t", " WE", "'", "RE", " you", "'ll"}));
  // A contraction wins over the letters that follow it.
  EXPECT_EQ(split("gpt-2", "'sup"), (Pieces{"'s", "up"}));
}

TEST(PreTokenizerGpt2, DigitRunsStayWhole) {
  EXPECT_EQ(split("gpt-2", "1 22 333 4444 55555 666666 7777777"),
            (Pieces{"1", " 22", " 333", " 4444", " 55555", " 666666", " 7777777"}));
}

TEST(PreTokenizerGpt2, WhitespaceRunsLeaveOneSpaceForTheNextWord) {
  // \s+(?!\S) backtracks one character before a non-space; at the end the whole run goes.
  EXPECT_EQ(split("gpt-2", "  hello   world  "), (Pieces{" ", " hello", "  ", " world", "  "}));
  // Only a space (not a tab) can prefix a word; a lone tab before \S falls to the last alternative \s+.
  EXPECT_EQ(split("gpt-2", "\tword"), (Pieces{"\t", "word"}));
}

TEST(PreTokenizerGpt2, Newlines) {
  // "\n\n" before "b": \s+(?!\S) takes one, then the single "\n" before "b" is \s+.
  EXPECT_EQ(split("gpt-2", "a\n\nb\n"), (Pieces{"a", "\n", "\n", "b", "\n"}));
}

TEST(PreTokenizerGpt2, PunctuationRuns) {
  EXPECT_EQ(split("gpt-2", "Hello, world!!! ...ok?"), (Pieces{"Hello", ",", " world", "!!!", " ...", "ok", "?"}));
}

TEST(PreTokenizerGpt2, AccentedLettersCjkAndEmoji) {
  // Precomposed accented letters are \p{L}; a combining accent (\p{M}) is not, so it is "other".
  EXPECT_EQ(split("gpt-2", "café naïve Ünïcödé"), (Pieces{"café", " naïve", " Ünïcödé"}));
  EXPECT_EQ(split("gpt-2", "cafe\u0301 x"), (Pieces{"cafe", "\u0301", " x"}));
  // Han characters and Latin letters are all \p{L}: one run.
  EXPECT_EQ(split("gpt-2", "我想在apple工作 世界"), (Pieces{"我想在apple工作", " 世界"}));
  // Emoji are symbols (So): " ?[^\s\p{L}\p{N}]+".
  EXPECT_EQ(split("gpt-2", "hi 😁😁 !"), (Pieces{"hi", " 😁😁", " !"}));
}

TEST(PreTokenizerGpt2, InvalidBytesAreKeptAsOtherCharacters) {
  EXPECT_EQ(split("gpt-2", "a\xff\xfe" "b \xe4\xbd"), (Pieces{"a", "\xff\xfe", "b", " \xe4\xbd"}));
}

TEST(PreTokenizerGpt2, DefaultAndMptUseTheGpt2Pattern) {
  const std::string text = "I'm 1234 WE'RE  x\n\n!!";
  EXPECT_EQ(split("default", text), split("gpt-2", text));
  EXPECT_EQ(split("mpt", text), split("gpt-2", text));
}

// ---- Llama 3 (llama-bpe) and Qwen2 -------------------------------------------------------------------------
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Qwen2: the same with \p{N} in place of \p{N}{1,3}.

TEST(PreTokenizerLlama3, ContractionsIgnoreCase) {
  // " 'sup": the space cannot prefix a letter run (an apostrophe follows), so " '" is punctuation.
  EXPECT_EQ(split("llama-bpe", "I'm don't WE'RE you'LL 'sup"),
            (Pieces{"I", "'m", " don", "'t", " WE", "'RE", " you", "'LL", " '", "sup"}));
  EXPECT_EQ(split("llama-bpe", "'sup"), (Pieces{"'s", "up"}));
  // Case-insensitive matching folds U+017F (long s) to s.
  EXPECT_EQ(split("llama-bpe", "it'\u017F"), (Pieces{"it", "'\u017F"}));
}

TEST(PreTokenizerLlama3, DigitsInGroupsOfThree) {
  // A space before a digit is not a word prefix and not punctuation: it is \s+ on its own.
  EXPECT_EQ(split("llama-bpe", "1 22 333 4444 55555 666666 7777777"),
            (Pieces{"1", " ", "22", " ", "333", " ", "444", "4", " ", "555", "55", " ", "666", "666", " ", "777",
                    "777", "7"}));
}

TEST(PreTokenizerLlama3, AnyNonLetterCanPrefixAWord) {
  EXPECT_EQ(split("llama-bpe", "\tword (hello) 😁hi"), (Pieces{"\tword", " (", "hello", ")", " 😁", "hi"}));
  // ... but never a line break.
  EXPECT_EQ(split("llama-bpe", "a\nb"), (Pieces{"a", "\n", "b"}));
}

TEST(PreTokenizerLlama3, Whitespace) {
  EXPECT_EQ(split("llama-bpe", "  hello   world  "), (Pieces{" ", " hello", "  ", " world", "  "}));
  // \s*[\r\n]+ keeps everything up to the last line break of a whitespace run.
  EXPECT_EQ(split("llama-bpe", "a\n\nb\n"), (Pieces{"a", "\n\n", "b", "\n"}));
  EXPECT_EQ(split("llama-bpe", "x  \n  y"), (Pieces{"x", "  \n", " ", " y"}));
  EXPECT_EQ(split("llama-bpe", "x \r\n\t\r\n  "), (Pieces{"x", " \r\n\t\r\n", "  "}));
}

TEST(PreTokenizerLlama3, PunctuationTakesTheLineBreaksAfterIt) {
  EXPECT_EQ(split("llama-bpe", "hello!\n\nworld"), (Pieces{"hello", "!\n\n", "world"}));
  EXPECT_EQ(split("llama-bpe", "Hello, world!!! ...ok?"), (Pieces{"Hello", ",", " world", "!!!", " ...", "ok", "?"}));
}

TEST(PreTokenizerLlama3, AccentedLettersCjkAndEmoji) {
  EXPECT_EQ(split("llama-bpe", "café naïve 我想在apple工作"), (Pieces{"café", " naïve", " 我想在apple工作"}));
  EXPECT_EQ(split("llama-bpe", "hi 😁😁 !"), (Pieces{"hi", " 😁😁", " !"}));
}

TEST(PreTokenizerQwen2, SingleDigitsOtherwiseLikeLlama3) {
  EXPECT_EQ(split("qwen2", "1 22 333"), (Pieces{"1", " ", "2", "2", " ", "3", "3", "3"}));
  const std::string text = "I'm WE'RE  hello!\n\nx  \n  y (a) 😁b";
  EXPECT_EQ(split("qwen2", text), split("llama-bpe", text));
}

// ---- deepseek-llm ---------------------------------------------------------------------------------------------
// [\r\n] | \s?[A-Za-zµÀ-ÖØ-öø-ƺ...(cased letters)]+ | \s?[!-/:-~！-／：-～‘-‟　-。]+ | \s+$ | [一-龥ࠀ-一가-퟿]+ | \p{N}+

TEST(PreTokenizerDeepseekLlm, PatternsApplyInTurn) {
  // [\r\n]:        "Hello, world! 123 我想 ok" "\n"
  // letters:       "Hello" "," " world" "! 123 我想" " ok" "\n"      (我想 is not a cased letter)
  // punctuation:   "!" " 123 我想" (the class includes A-Z and a-z, so "Hello" matches whole and stays)
  // \s+$:          "\n" matches whole and stays
  // CJK:           " 123 " "我想"
  // \p{N}+:        " " "123" " "
  EXPECT_EQ(split("deepseek-llm", "Hello, world! 123 我想 ok\n"),
            (Pieces{"Hello", ",", " world", "!", " ", "123", " ", "我想", " ok", "\n"}));
}

TEST(PreTokenizerDeepseekLlm, DigitsWhitespaceAndAccents) {
  // Digit runs are not grouped.
  EXPECT_EQ(split("deepseek-llm", "a 1234567 b"), (Pieces{"a", " ", "1234567", " b"}));
  // é, ï and Greek are cased letters, so the letter pattern keeps "café" whole; but the punctuation class that
  // comes next includes A-Z and a-z (:-~), so it cuts the ASCII letters away from the others again. Trailing
  // whitespace (\s+$) is a piece of its own.
  EXPECT_EQ(split("deepseek-llm", "café naïve λόγος  "), (Pieces{"caf", "é", " na", "ï", "ve", " λόγος", "  "}));
  EXPECT_EQ(split("deepseek-llm", "I'm WE'RE"), (Pieces{"I", "'", "m", " WE", "'", "RE"}));
}

// ---- deepseek-coder --------------------------------------------------------------------------------------------
// [\r\n] | \s?\p{L}+ | \s?\p{P}+ | [一-龥ࠀ-一가-퟿]+ | \p{N}

TEST(PreTokenizerDeepseekCoder, PatternsApplyInTurn) {
  // [\r\n]:        "Hello, world! 123 我想" "\n"
  // \s?\p{L}+:     "Hello" "," " world" "! 123" " 我想" "\n"
  // \s?\p{P}+:     "!" " 123"
  // CJK:           " 我想" -> " " "我想"
  // \p{N}:         " 123" -> " " "1" "2" "3"
  EXPECT_EQ(split("deepseek-coder", "Hello, world! 123 我想\n"),
            (Pieces{"Hello", ",", " world", "!", " ", "1", "2", "3", " ", "我想", "\n"}));
  // "+" is a symbol, not \p{P}, so it stays with the space before it.
  EXPECT_EQ(split("deepseek-coder", "a + b"), (Pieces{"a", " +", " b"}));
}

// ---- falcon: [\p{P}\$\+<=>\^~\|`]+ | the GPT-2 pattern | [0-9][0-9][0-9] --------------------------------------

TEST(PreTokenizerFalcon, PunctuationThenGpt2ThenDigitTriples) {
  // Punctuation:   "I" "'" "m 1234567 a" "+" "b" "=" "c" "!"
  // GPT-2:         "m" " 1234567" " a"
  // triples:       " " "123" "456" "7"
  EXPECT_EQ(split("falcon", "I'm 1234567 a+b=c!"),
            (Pieces{"I", "'", "m", " ", "123", "456", "7", " a", "+", "b", "=", "c", "!"}));
  EXPECT_EQ(split("falcon", "x  \n y"), (Pieces{"x", "  \n", " y"}));
}

// ---- starcoder, refact, smollm: \p{N} | the GPT-2 pattern -------------------------------------------------------

TEST(PreTokenizerStarcoder, SingleDigitsThenGpt2) {
  // \p{N}:  "x " "1" "2" "3" " y's"; GPT-2 then splits "x " into "x" " " and " y's" into " y" "'s".
  EXPECT_EQ(split("starcoder", "x 123 y's"), (Pieces{"x", " ", "1", "2", "3", " y", "'s"}));
  EXPECT_EQ(split("refact", "x 123 y's"), split("starcoder", "x 123 y's"));
  EXPECT_EQ(split("smollm", "x 123 y's"), split("starcoder", "x 123 y's"));
}

// ---- gpt-4o (o200k) ---------------------------------------------------------------------------------------------
// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
// |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
// |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+

TEST(PreTokenizerGpt4o, WordsSplitAtCaseChangesAndKeepTheirContractions) {
  // " CAPS": the first alternative needs a lower-case letter, so the second takes the capitals.
  EXPECT_EQ(split("gpt-4o", "HelloWorld's CAPS123 don'T ééé"),
            (Pieces{"Hello", "World's", " CAPS", "123", " don'T", " ééé"}));
  // The upper run is greedy: "WORDS" then "mixed".
  EXPECT_EQ(split("gpt-4o", "camelCaseWORDSmixed"), (Pieces{"camel", "Case", "WORDSmixed"}));
  // Han letters (Lo) are in both classes; a combining mark continues the word.
  EXPECT_EQ(split("gpt-4o", "我想 e\u0301t\u00e9"), (Pieces{"我想", " e\u0301t\u00e9"}));
}

TEST(PreTokenizerGpt4o, SlashesAndLineBreaksFollowPunctuation) {
  EXPECT_EQ(split("gpt-4o", "a/b//\nc 1234"), (Pieces{"a", "/b", "//\n", "c", " ", "123", "4"}));
}

// ---- every rule set -------------------------------------------------------------------------------------------

TEST(PreTokenizer, PiecesAreNonEmptyAndJoinToTheInput) {
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {"a", "Z", "é", "1", "٣", " ", "  ", "\n", "\r\n", "\t", "'", "'s", "'LL",
                                             ",", "!", "+", "/", "我", "😁", "\u0301", "\u3000", "\xff", "\xe4\xbd"};
  for (const std::string_view name : PreTokenizer::known_names()) {
    for (int round = 0; round < 200; ++round) {
      std::string text;
      const int length = static_cast<int>(rng() % 40);
      for (int i = 0; i < length; ++i) text += alphabet[rng() % alphabet.size()];
      std::vector<std::string_view> pieces;
      PreTokenizer(name).split(text, pieces);
      std::string joined;
      for (const std::string_view piece : pieces) {
        EXPECT_FALSE(piece.empty()) << name;
        joined += piece;
      }
      ASSERT_EQ(joined, text) << name;
    }
  }
}

TEST(PreTokenizer, EmptyTextHasNoPieces) {
  for (const std::string_view name : PreTokenizer::known_names()) EXPECT_TRUE(split(name, "").empty()) << name;
}

TEST(PreTokenizer, UnknownNameIsRejectedWithTheKnownNames) {
  try {
    PreTokenizer("gpt-5-secret");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("gpt-5-secret"), std::string::npos) << message;
    for (const std::string_view name : {"gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "falcon",
                                        "starcoder", "refact", "mpt"}) {
      EXPECT_NE(message.find(name), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace loom::compute::detail
