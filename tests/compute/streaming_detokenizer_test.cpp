// StreamingDetokenizer with the Llama SentencePiece vocabulary (its byte tokens <0xNN> make split and
// invalid characters easy to produce): a character split over byte tokens is held back and then comes out
// whole; the pieces of a stream add up to Tokenizer::decode; invalid bytes become U+FFFD as soon as they are
// known to be invalid; every push() returns valid UTF-8; the leading space is stripped at the start only.
#include "loom/compute/text/streaming_detokenizer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/compute/text/vocabulary.hpp"
#include "test_files.hpp"
#include "vocab_conformance.hpp"

namespace loom::compute {
namespace {

using testing::kLlamaSpmVocab;
using testing::llama_spm_tokenizer;
using testing::shared_path;
using Ids = std::vector<std::int32_t>;

const std::string kReplacement = "\xEF\xBF\xBD";

// The id of byte token <0xNN>, found by its text.
std::int32_t byte_token(const Tokenizer& t, unsigned byte) {
  char name[8];
  std::snprintf(name, sizeof name, "<0x%02X>", byte);
  for (std::int32_t id = 0; id < t.vocabulary().size(); ++id) {
    if (t.vocabulary().tokens[static_cast<std::size_t>(id)] == name) return id;
  }
  ADD_FAILURE() << "no byte token " << name;
  return 0;
}

// Valid UTF-8, checked by decoding each code point and rejecting overlong forms, surrogates and values past
// U+10FFFF.
bool valid_utf8(const std::string& text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (lead < 0x80) {
      n = 1, cp = lead;
    } else if ((lead & 0xE0) == 0xC0) {
      n = 2, cp = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      n = 3, cp = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      n = 4, cp = lead & 0x07;
    } else {
      return false;
    }
    if (i + n > text.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr std::uint32_t kSmallest[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kSmallest[n] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;
    i += n;
  }
  return true;
}

TEST(StreamingDetokenizer, HoldsASplitCharacterBackUntilItIsWhole) {
  REQUIRE_SHARED_FILE(shared_path(kLlamaSpmVocab));
  const Tokenizer& t = llama_spm_tokenizer();
  StreamingDetokenizer stream(t, {.strip_leading_space = true});
  EXPECT_EQ(stream.push(1), "");          // <s>: no text
  EXPECT_EQ(stream.push(15043), "Hello");  // "▁Hello", its space stripped at the start of the stream
  // 🦙 is F0 9F A6 99.
  EXPECT_FALSE(stream.holding());
  EXPECT_EQ(stream.push(byte_token(t, 0xF0)), "");
  EXPECT_TRUE(stream.holding());
  EXPECT_EQ(stream.push(byte_token(t, 0x9F)), "");
  EXPECT_EQ(stream.push(byte_token(t, 0xA6)), "");
  EXPECT_TRUE(stream.holding());
  EXPECT_EQ(stream.push(byte_token(t, 0x99)), "\xF0\x9F\xA6\x99");
  EXPECT_FALSE(stream.holding());
  EXPECT_EQ(stream.push(3186), " world");  // "▁world": not the start, so the space stays
  EXPECT_EQ(stream.finish(), "");
}

TEST(StreamingDetokenizer, PushesAddUpToDecode) {
  const std::string path = shared_path(kLlamaSpmVocab);
  REQUIRE_SHARED_FILE(path);
  const auto cases = testing::read_conformance_cases(path);
  ASSERT_EQ(cases.size(), 46u);
  const Tokenizer& t = llama_spm_tokenizer();
  for (const DecodeOptions options : {DecodeOptions{}, DecodeOptions{.strip_leading_space = true},
                                      DecodeOptions{.render_special = true, .strip_leading_space = true}}) {
    // One stream for all inputs: finish() starts it afresh each time.
    StreamingDetokenizer stream(t, options);
    for (const auto& c : cases) {
      const Ids ids = t.encode(c.input);  // with BOS
      std::string streamed;
      for (const auto id : ids) {
        const std::string part = stream.push(id);
        EXPECT_TRUE(valid_utf8(part)) << c.input;
        streamed += part;
      }
      streamed += stream.finish();
      EXPECT_EQ(streamed, t.decode(ids, options)) << c.input;
    }
  }
}

TEST(StreamingDetokenizer, InvalidBytesBecomeReplacementCharactersAtOnce) {
  REQUIRE_SHARED_FILE(shared_path(kLlamaSpmVocab));
  const Tokenizer& t = llama_spm_tokenizer();
  StreamingDetokenizer stream(t);
  auto push_byte = [&](unsigned byte) { return stream.push(byte_token(t, byte)); };
  auto push_bytes = [&](std::initializer_list<unsigned> bytes) {
    std::string text;
    for (const unsigned byte : bytes) text += push_byte(byte);
    return text;
  };

  EXPECT_EQ(push_byte(0x80), kReplacement);  // a continuation byte with nothing before it
  EXPECT_EQ(push_byte(0xC0), kReplacement);  // C0/C1 only start overlong forms
  EXPECT_EQ(push_byte(0xF5), kReplacement);  // past U+10FFFF
  EXPECT_EQ(push_byte(0x41), "A");

  // A sequence broken off by another character: the broken start is replaced when that character comes.
  EXPECT_EQ(push_byte(0xE2), "");
  EXPECT_EQ(push_byte(0x82), "");
  EXPECT_EQ(stream.push(15043), kReplacement + kReplacement + " Hello");

  // A second byte that its lead byte does not allow: ED A0 would be a surrogate, E0 80 overlong.
  EXPECT_EQ(push_byte(0xED), "");
  EXPECT_EQ(push_byte(0xA0), kReplacement + kReplacement);
  EXPECT_EQ(push_byte(0xE0), "");
  EXPECT_EQ(push_byte(0x80), kReplacement + kReplacement);
  EXPECT_EQ(push_byte(0xF4), "");
  EXPECT_EQ(push_byte(0x90), kReplacement + kReplacement);

  // The valid neighbours of those ranges pass: E0 A0 80 is U+0800, ED 9F BF is U+D7FF, F4 8F BF BF U+10FFFF.
  EXPECT_EQ(push_bytes({0xE0, 0xA0, 0x80}), "\xE0\xA0\x80");
  EXPECT_EQ(push_bytes({0xED, 0x9F, 0xBF}), "\xED\x9F\xBF");
  EXPECT_EQ(push_bytes({0xF4, 0x8F, 0xBF, 0xBF}), "\xF4\x8F\xBF\xBF");

  // An unfinished character at the end: finish() gives one U+FFFD per byte, and the stream starts afresh.
  EXPECT_EQ(push_byte(0xF0), "");
  EXPECT_EQ(push_byte(0x9F), "");
  EXPECT_EQ(stream.finish(), kReplacement + kReplacement);
  EXPECT_EQ(stream.finish(), "");
  EXPECT_EQ(push_byte(0x41), "A");
}

TEST(StreamingDetokenizer, RandomBytesNeverStallAndStayValid) {
  REQUIRE_SHARED_FILE(shared_path(kLlamaSpmVocab));
  const Tokenizer& t = llama_spm_tokenizer();
  std::vector<std::int32_t> byte_ids(256);
  for (unsigned b = 0; b < 256; ++b) byte_ids[b] = byte_token(t, b);
  std::mt19937 rng(11);
  StreamingDetokenizer stream(t);
  std::size_t pushed = 0;
  std::size_t returned = 0;
  for (int i = 0; i < 20000; ++i) {
    // No EF in the input, so that every U+FFFD (EF BF BD) in the output is a replacement.
    unsigned byte = rng() % 256;
    if (byte == 0xEF) byte = 0x41;
    const std::string part = stream.push(byte_ids[byte]);
    ASSERT_TRUE(valid_utf8(part));
    ++pushed;
    // Every byte comes out as itself or as one U+FFFD: at most 3 bytes of input are ever waiting.
    for (std::size_t at = 0; at < part.size();) {
      if (part.compare(at, 3, kReplacement) == 0) {
        at += 3;
        ++returned;
      } else {
        ++at;
        ++returned;
      }
    }
    ASSERT_LE(pushed - returned, 3u);
  }
}

TEST(StreamingDetokenizer, LeadingSpaceIsStrippedAtTheStartOnly) {
  REQUIRE_SHARED_FILE(shared_path(kLlamaSpmVocab));
  const Tokenizer& t = llama_spm_tokenizer();
  StreamingDetokenizer strip(t, {.strip_leading_space = true});
  EXPECT_EQ(strip.push(15043), "Hello");
  EXPECT_EQ(strip.push(15043), " Hello");
  EXPECT_EQ(strip.finish(), "");
  EXPECT_EQ(strip.push(1), "");  // BOS has no text, so the start is still to come
  EXPECT_EQ(strip.push(15043), "Hello");

  StreamingDetokenizer keep(t);
  EXPECT_EQ(keep.push(15043), " Hello");

  StreamingDetokenizer special(t, {.render_special = true, .strip_leading_space = true});
  EXPECT_EQ(special.push(1), "<s>");
  EXPECT_EQ(special.push(15043), " Hello");  // the text no longer starts with it
}

TEST(StreamingDetokenizer, OutOfRangeIdThrowsAndLeavesTheStreamAsItWas) {
  REQUIRE_SHARED_FILE(shared_path(kLlamaSpmVocab));
  const Tokenizer& t = llama_spm_tokenizer();
  StreamingDetokenizer stream(t);
  EXPECT_EQ(stream.push(byte_token(t, 0xC3)), "");
  EXPECT_THROW((void)stream.push(t.vocabulary().size()), std::out_of_range);
  EXPECT_EQ(stream.push(byte_token(t, 0xA9)), "\xC3\xA9");
}

}  // namespace
}  // namespace loom::compute
