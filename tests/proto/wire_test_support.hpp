// Helpers the proto suites share (one definition each: the suite compiles as a unity build, so file-scope
// helpers of the same name in two test files would clash): a value through JSON text and back, and client
// frames spliced from the fields a test cares about.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "loom/proto/client_message.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/parse_options.hpp"

namespace loom::proto::wire_test {

// `value` written as JSON text and read back with `parse`; a failed parse fails the test and gives T{}.
template <class T, class Parse>
T through_text(const T& value, Parse parse, const ParseOptions& options = {}) {
  const nlohmann::json j = value;
  const auto parsed = parse(nlohmann::json::parse(j.dump()), options);
  EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : to_string(parsed.error())) << "\n" << j.dump();
  return parsed.ok() ? parsed.value() : T{};
}

// A generate frame with `fields` after its id, and one with a prompt and the given params.
inline std::string generate(const std::string& fields) { return R"({"type":"generate","id":"r1",)" + fields + "}"; }
inline std::string with_params(const std::string& params) {
  return generate(R"("prompt":"hi","params":{)" + params + "}");
}

inline const GenerateRequest& as_generate(const Parsed<ClientMessage>& parsed) {
  return std::get<GenerateRequest>(parsed.value());
}

}  // namespace loom::proto::wire_test
