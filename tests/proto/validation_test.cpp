// Malformed client frames: each one is refused with the exact path of the offending value and a message
// that states the broken rule. One table row per rule, so a rule that stops being checked fails its row.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <limits>
#include <string>
#include <vector>

#include "wire_test_support.hpp"
#include "loom/proto/client_message.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/server_message.hpp"

namespace loom::proto {
namespace {

using wire_test::generate;
using wire_test::with_params;

using nlohmann::json;

struct MalformedCase {
  std::string name;     // test name suffix
  std::string frame;    // the client frame's text
  std::string field;    // the exact expected ValidationError::field
  std::string message;  // a part of the expected message that states the rule
};

void PrintTo(const MalformedCase& c, std::ostream* os) { *os << c.name; }

// A generate frame whose fields are `fields` spliced into a valid base, so each row shows only what is wrong.
std::string repeat_json_strings(std::size_t n, const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    out += i ? ",\"" : "\"";
    out += text;
    out += '"';
  }
  return out;
}
std::string repeat_json_numbers(std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ',';
    out += std::to_string(i);
  }
  return out;
}

std::vector<MalformedCase> malformed_cases() {
  const std::string long_id(129, 'x');
  const std::string long_prompt((1u << 20) + 1, 'p');
  const std::string big_content(600 * 1024, 'c');
  return {
      // The envelope.
      {"RootNotAnObject", R"([1,2])", "", "must be a JSON object, got an array"},
      {"TypeMissing", R"({"id":"r1","prompt":"hi"})", "type", "is required"},
      {"TypeNotAString", R"({"type":1})", "type", "must be a string, got 1"},
      {"TypeUnknown", R"({"type":"generat","id":"r1"})", "type",
       "must be one of session.open, generate, cancel, session.close, session.reset, session.list, got \"generat\""},
      {"UnknownTopLevelField", generate(R"("prompt":"hi","temperature":0.5)"), "temperature",
       "is not a known field (strict mode)"},
      // Ids.
      {"IdMissing", R"({"type":"generate","prompt":"hi"})", "id", "is required"},
      {"IdNull", R"({"type":"generate","id":null,"prompt":"hi"})", "id", "is required"},
      {"IdNotAString", R"({"type":"generate","id":5,"prompt":"hi"})", "id", "must be a string, got 5"},
      {"IdEmpty", R"({"type":"generate","id":"","prompt":"hi"})", "id", "must not be empty"},
      {"IdTooLong", R"({"type":"generate","id":")" + long_id + R"(","prompt":"hi"})", "id",
       "must be at most 128 bytes, got 129"},
      {"IdControlCharacter", R"({"type":"generate","id":"a\nb","prompt":"hi"})", "id",
       "must not contain control characters, got byte 0x0a at offset 1"},
      {"IdDelCharacter", R"({"type":"generate","id":"ab\u007f","prompt":"hi"})", "id",
       "must not contain control characters, got byte 0x7f at offset 2"},
      {"SessionIdEmpty", generate(R"("session_id":"","prompt":"hi")"), "session_id", "must not be empty"},
      // Prompt or messages.
      {"PromptAndMessages", generate(R"("prompt":"hi","messages":[{"role":"user","content":"hi"}])"), "prompt",
       "exactly one of prompt and messages must be given, got both"},
      {"NeitherPromptNorMessages", generate(R"("stream":true)"), "prompt",
       "exactly one of prompt and messages must be given, got neither"},
      {"PromptNotAString", generate(R"("prompt":42)"), "prompt", "must be a string, got 42"},
      {"PromptTooLong", generate(R"("prompt":")" + long_prompt + "\""), "prompt",
       "must be at most 1048576 bytes, got 1048577"},
      {"MessagesEmpty", generate(R"("messages":[])"), "messages", "must not be empty"},
      {"MessagesNotAnArray", generate(R"("messages":"hi")"), "messages", "must be an array of messages, got \"hi\""},
      {"MessageNotAnObject", generate(R"("messages":[5])"), "messages[0]", "must be a JSON object, got 5"},
      {"MessageRoleUnknown",
       generate(R"("messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},)"
                R"({"role":"robot","content":"c"}])"),
       "messages[2].role", "must be one of system, user, assistant, tool, got \"robot\""},
      {"MessageRoleMissing", generate(R"("messages":[{"content":"a"}])"), "messages[0].role", "is required"},
      {"MessageContentMissing", generate(R"("messages":[{"role":"user"}])"), "messages[0].content", "is required"},
      {"MessageContentNotAString", generate(R"("messages":[{"role":"user","content":["a"]}])"), "messages[0].content",
       "must be a string, got an array"},
      {"MessageUnknownField", generate(R"("messages":[{"role":"user","content":"a","speaker":"bob"}])"),
       "messages[0].speaker", "is not a known field (strict mode)"},
      {"MessagesTotalTooLong",
       generate(R"("messages":[{"role":"user","content":")" + big_content + R"("},{"role":"user","content":")" +
                big_content + R"("}])"),
       "messages", "must have at most 1048576 bytes of content in total, got 1228800"},
      // Sampling parameters.
      {"ParamsNotAnObject", generate(R"("prompt":"hi","params":[])"), "params", "must be a JSON object, got an array"},
      {"ParamsUnknownField", with_params(R"("temprature":0.5)"), "params.temprature",
       "is not a known field (strict mode)"},
      {"TemperatureNegative", with_params(R"("temperature":-0.1)"), "params.temperature",
       "must be a number in [0, 100], got -0.1"},
      {"TemperatureTooHigh", with_params(R"("temperature":150)"), "params.temperature",
       "must be a number in [0, 100], got 150"},
      {"NumberOverflow", with_params(R"("temperature":1e400)"), "",
       "invalid JSON: number out of range at byte offset 67: \"1e400\""},
      {"TemperatureAsString", with_params(R"("temperature":"0.5")"), "params.temperature",
       "must be a number in [0, 100], got \"0.5\""},
      {"TopPZero", with_params(R"("top_p":0)"), "params.top_p", "must be a number in (0, 1], got 0"},
      {"TopPAboveOne", with_params(R"("top_p":1.5)"), "params.top_p", "must be a number in (0, 1], got 1.5"},
      {"MinPNegative", with_params(R"("min_p":-0.5)"), "params.min_p", "must be a number in [0, 1], got -0.5"},
      {"TopKNegative", with_params(R"("top_k":-1)"), "params.top_k", "must be an integer in [0, 1000], got -1"},
      {"TopKAboveCap", with_params(R"("top_k":1001)"), "params.top_k", "must be an integer in [0, 1000], got 1001"},
      {"TopKFloat", with_params(R"("top_k":2.5)"), "params.top_k", "must be an integer in [0, 1000], got 2.5"},
      {"TopKIntegralFloat", with_params(R"("top_k":40.0)"), "params.top_k",
       "must be an integer in [0, 1000], got 40.0"},
      {"RepetitionPenaltyZero", with_params(R"("repetition_penalty":0)"), "params.repetition_penalty",
       "must be a number in (0, 10], got 0"},
      {"RepetitionPenaltyTooHigh", with_params(R"("repetition_penalty":11)"), "params.repetition_penalty",
       "must be a number in (0, 10], got 11"},
      {"FrequencyPenaltyTooHigh", with_params(R"("frequency_penalty":2.5)"), "params.frequency_penalty",
       "must be a number in [-2, 2], got 2.5"},
      {"PresencePenaltyTooLow", with_params(R"("presence_penalty":-3)"), "params.presence_penalty",
       "must be a number in [-2, 2], got -3"},
      {"RepetitionLastNBelowMinusOne", with_params(R"("repetition_last_n":-2)"), "params.repetition_last_n",
       "must be an integer in [-1, 1048576], got -2"},
      {"SeedNegative", with_params(R"("seed":-1)"), "params.seed", "must be a non-negative integer, got -1"},
      {"SeedFloat", with_params(R"("seed":1.5)"), "params.seed", "must be a non-negative integer, got 1.5"},
      {"MaxTokensZero", with_params(R"("max_tokens":0)"), "params.max_tokens",
       "must be an integer in [1, 4096], got 0"},
      {"MaxTokensAboveLimit", with_params(R"("max_tokens":5000)"), "params.max_tokens",
       "must be an integer in [1, 4096], got 5000"},
      {"MaxTokensHuge", with_params(R"("max_tokens":18446744073709551615)"), "params.max_tokens",
       "must be an integer in [1, 4096], got 18446744073709551615"},
      {"MaxTokensAsString", with_params(R"("max_tokens":"100")"), "params.max_tokens",
       "must be an integer in [1, 4096], got \"100\""},
      {"StopNotAnArray", with_params(R"("stop":"###")"), "params.stop", "must be an array of strings, got \"###\""},
      {"TooManyStopStrings", with_params(R"("stop":[)" + repeat_json_strings(9, "s") + "]"), "params.stop",
       "must have at most 8 entries, got 9"},
      {"StopStringEmpty", with_params(R"("stop":["a",""])"), "params.stop[1]", "must not be empty"},
      {"StopStringTooLong", with_params(R"("stop":[")" + std::string(257, 's') + "\"]"), "params.stop[0]",
       "must be at most 256 bytes, got 257"},
      {"StopStringNotAString", with_params(R"("stop":[1])"), "params.stop[0]", "must be a string, got 1"},
      {"TooManyStopTokenIds", with_params(R"("stop_token_ids":[)" + repeat_json_numbers(33) + "]"),
       "params.stop_token_ids", "must have at most 32 entries, got 33"},
      {"StopTokenIdNegative", with_params(R"("stop_token_ids":[2,-1])"), "params.stop_token_ids[1]",
       "must be an integer in [0, 2147483647], got -1"},
      {"IgnoreEosNotABool", with_params(R"("ignore_eos":"yes")"), "params.ignore_eos",
       "must be true or false, got \"yes\""},
      {"LogprobsTooMany", with_params(R"("logprobs":21)"), "params.logprobs", "must be an integer in [0, 20], got 21"},
      // Request options.
      {"PriorityTooHigh", generate(R"("prompt":"hi","priority":11)"), "priority",
       "must be an integer in [-10, 10], got 11"},
      {"PriorityTooLow", generate(R"("prompt":"hi","priority":-11)"), "priority",
       "must be an integer in [-10, 10], got -11"},
      {"StreamNotABool", generate(R"("prompt":"hi","stream":1)"), "stream", "must be true or false, got 1"},
      // session.open and cancel.
      {"SessionOpenIdControl", R"({"type":"session.open","session_id":"s\t1"})", "session_id",
       "must not contain control characters, got byte 0x09 at offset 1"},
      {"SessionOpenSystemPromptNotAString", R"({"type":"session.open","system_prompt":{}})", "system_prompt",
       "must be a string, got an object"},
      {"SessionOpenUnknownField", R"({"type":"session.open","model":"llama"})", "model",
       "is not a known field (strict mode)"},
      {"CancelIdMissing", R"({"type":"cancel"})", "id", "is required"},
      {"CancelIdNotAString", R"({"type":"cancel","id":["r1"]})", "id", "must be a string, got an array"},
      // logit_bias: OpenAI's map of token id to bias.
      {"LogitBiasNotAnObject", with_params(R"("logit_bias":[1,2])"), "params.logit_bias",
       "must be an object of token id to bias, got an array"},
      {"LogitBiasKeyNotAnId", with_params(R"("logit_bias":{"x1":1})"), "params.logit_bias.x1",
       "must be keyed by a token id"},
      {"LogitBiasKeyNegative", with_params(R"("logit_bias":{"-3":1})"), "params.logit_bias.-3",
       "must be keyed by a token id"},
      {"LogitBiasKeyTooLarge", with_params(R"("logit_bias":{"2147483648":1})"), "params.logit_bias.2147483648",
       "must be keyed by a token id"},
      {"LogitBiasAboveRange", with_params(R"("logit_bias":{"7":100.5})"), "params.logit_bias.7",
       "must be a number in [-100, 100], got 100.5"},
      {"LogitBiasNotANumber", with_params(R"("logit_bias":{"7":"up"})"), "params.logit_bias.7",
       "must be a number in [-100, 100]"},
      {"LogitBiasTooMany", with_params(R"("logit_bias":{)" + [] {
         std::string entries;
         for (int i = 0; i < 1025; ++i) entries += (i ? "," : "") + ("\"" + std::to_string(i) + "\":1");
         return entries;
       }() + "}"),
       "params.logit_bias", "must have at most 1024 entries, got 1025"},
      // Output constraints: one of grammar, json_schema, response_format.
      {"GrammarNotAString", with_params(R"("grammar":{"root":"a"})"), "params.grammar", "must be a string, got an object"},
      {"GrammarEmpty", with_params(R"("grammar":"")"), "params.grammar", "must not be empty"},
      {"GrammarTooLong", with_params(R"("grammar":")" + std::string(256 * 1024 + 1, 'a') + "\""), "params.grammar",
       "must be at most 262144 bytes"},
      {"JsonSchemaNotASchema", with_params(R"("json_schema":"{}")"), "params.json_schema",
       "must be a JSON Schema (an object or a boolean), got \"{}\""},
      {"GrammarAndJsonSchema", with_params(R"("grammar":"root ::= \"a\"","json_schema":{})"), "params.json_schema",
       "only one of grammar, json_schema and response_format may be given"},
      {"GrammarAndResponseFormat", with_params(R"("grammar":"root ::= \"a\"","response_format":{"type":"text"})"),
       "params.response_format", "only one of grammar, json_schema and response_format may be given"},
      {"ResponseFormatUnknownType", with_params(R"("response_format":{"type":"xml"})"), "params.response_format.type",
       "must be \"text\", \"json_object\" or \"json_schema\", got \"xml\""},
      {"ResponseFormatNoType", with_params(R"("response_format":{})"), "params.response_format.type", "is required"},
      {"ResponseFormatSchemaMissing", with_params(R"("response_format":{"type":"json_schema"})"),
       "params.response_format.json_schema", "is required"},
      {"ResponseFormatSchemaNotASchema",
       with_params(R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":[1]}})"),
       "params.response_format.json_schema.schema", "must be a JSON Schema (an object or a boolean), got an array"},
      {"ResponseFormatUnknownField",
       with_params(R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schemas":{}}})"),
       "params.response_format.json_schema.schemas", "is not a known field"},
  };
}

class MalformedClientFrame : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedClientFrame, IsRefusedNamingTheFieldAndTheRule) {
  const MalformedCase& c = GetParam();
  const auto parsed = parse_client_message(c.frame);
  ASSERT_FALSE(parsed.ok()) << "accepted: " << c.frame.substr(0, 200);
  EXPECT_EQ(parsed.error().field, c.field) << parsed.error().message;
  EXPECT_NE(parsed.error().message.find(c.message), std::string::npos)
      << "message: " << parsed.error().message << "\nexpected to contain: " << c.message;
}

INSTANTIATE_TEST_SUITE_P(Table, MalformedClientFrame, ::testing::ValuesIn(malformed_cases()),
                         [](const ::testing::TestParamInfo<MalformedCase>& param_info) {
                           return param_info.param.name;
                         });

// Each row must be refused for its own reason: the same frame with the offending part fixed parses. Here
// for a sample of rows that share the generate() base, so the base itself is known to be valid.
TEST(MalformedClientFrame, TheBaseFramesAreValid) {
  for (const std::string& frame : {generate(R"("prompt":"hi")"), with_params(R"("temperature":0.5)"),
                                   generate(R"("messages":[{"role":"user","content":"a"}])")}) {
    const auto parsed = parse_client_message(frame);
    EXPECT_TRUE(parsed.ok()) << frame << "\n" << (parsed.ok() ? "" : to_string(parsed.error()));
  }
}

TEST(MalformedClientFrame, EchoedClientTextIsCutShort) {
  const std::string role(500, 'r');
  const auto parsed = parse_client_message(generate(R"("messages":[{"role":")" + role + R"(","content":"a"}])"));
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().field, "messages[0].role");
  EXPECT_LT(parsed.error().message.size(), 200u) << parsed.error().message;
}

// Text that is not JSON at all: the error has no field and names the byte offset where parsing broke.
struct InvalidJsonCase {
  std::string name;
  std::string text;
  std::size_t offset;
};

void PrintTo(const InvalidJsonCase& c, std::ostream* os) { *os << c.name; }

class InvalidJsonText : public ::testing::TestWithParam<InvalidJsonCase> {};

TEST_P(InvalidJsonText, IsRefusedWithTheByteOffset) {
  const InvalidJsonCase& c = GetParam();
  const auto parsed = parse_client_message(c.text);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().field, "");
  EXPECT_EQ(parsed.error().request_id, "");
  const std::string expected = "invalid JSON at byte offset " + std::to_string(c.offset) + ":";
  EXPECT_EQ(parsed.error().message.rfind(expected, 0), 0u) << parsed.error().message;
}

INSTANTIATE_TEST_SUITE_P(Table, InvalidJsonText,
                         ::testing::Values(InvalidJsonCase{"Empty", "", 0}, InvalidJsonCase{"BareWord", "hello", 0},
                                           InvalidJsonCase{"UnquotedKey", R"({"type":"cancel",id:"r1"})", 17},
                                           InvalidJsonCase{"TrailingComma", R"({"type":"cancel",})", 17},
                                           InvalidJsonCase{"MissingValue", R"({"type": })", 9},
                                           InvalidJsonCase{"Truncated", R"({"type":"cancel")", 16},
                                           InvalidJsonCase{"TrailingGarbage", R"({"type":"cancel"} x)", 18},
                                           InvalidJsonCase{"InvalidUtf8", "{\"type\":\"ca\xff\"}", 11},
                                           // The JSON reader stops at a NUL byte: what follows must not be ignored.
                                           InvalidJsonCase{"NulThenGarbage",
                                                           std::string(R"({"type":"cancel","id":"r1"})" "\0garbage", 35), 27},
                                           InvalidJsonCase{"TrailingNul", std::string(R"({"type":"cancel","id":"r1"})" "\0", 28), 27},
                                           InvalidJsonCase{"NulInsideString", std::string("{\"type\":\"can\0cel\"}", 19), 12}),
                         [](const ::testing::TestParamInfo<InvalidJsonCase>& param_info) {
                           return param_info.param.name;
                         });

TEST(InvalidJsonText, ServerMessagesRefuseANulByteAndWhatFollowsIt) {
  const auto parsed = parse_server_message(std::string(R"({"type":"error","code":"internal","message":"m"})" "\0{}", 51));
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().message.rfind("invalid JSON at byte offset 48:", 0), 0u) << parsed.error().message;
}

TEST(InvalidJsonText, NanLiteralIsNotJson) {
  const auto parsed =
      parse_client_message(R"({"type":"generate","id":"r1","prompt":"x","params":{"temperature":NaN}})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().field, "");
  EXPECT_NE(parsed.error().message.find("invalid JSON"), std::string::npos);
}

TEST(InvalidJsonText, NonFiniteNumbersBuiltInCodeAreRefusedByTheRangeCheck) {
  json j = json::parse(with_params(R"("temperature":0.5)"));
  j["params"]["temperature"] = std::numeric_limits<double>::quiet_NaN();
  const auto nan = parse_client_message(j);
  ASSERT_FALSE(nan.ok());
  EXPECT_EQ(nan.error().field, "params.temperature");
  EXPECT_EQ(nan.error().message, "must be a finite number, got nan");
  j["params"]["temperature"] = std::numeric_limits<double>::infinity();
  const auto inf = parse_client_message(j);
  ASSERT_FALSE(inf.ok());
  EXPECT_EQ(inf.error().message, "must be a finite number, got inf");
}

TEST(CheckGenerateRequest, HoldsABuiltRequestToTheWireRules) {
  GenerateRequest request;
  request.id = "r1";
  request.input = std::string("hi");
  EXPECT_FALSE(check_generate_request(request).has_value());

  request.params.top_p = 1.5;
  auto error = check_generate_request(request);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->field, "params.top_p");
  EXPECT_EQ(error->request_id, "r1");

  request.params.top_p = 0.5;
  request.params.temperature = std::numeric_limits<double>::quiet_NaN();
  error = check_generate_request(request);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->field, "params.temperature");

  // A deployment's size limits bind the gateway's parse; unbounded() keeps only the fixed ranges.
  request.params.temperature = 0.5;
  request.params.max_tokens = 100000;
  EXPECT_TRUE(check_generate_request(request).has_value());
  EXPECT_FALSE(check_generate_request(request, ParseOptions::unbounded()).has_value());
  request.params.max_tokens = 0;
  EXPECT_TRUE(check_generate_request(request, ParseOptions::unbounded()).has_value());
}

}  // namespace
}  // namespace loom::proto