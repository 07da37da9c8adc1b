// The wire parsers of proto/ on arbitrary text: parse_client_message (every WebSocket frame a client sends;
// strict and lenient) and parse_server_message (every frame the CLI and the clients read). The parsers
// promise never to throw (except std::bad_alloc, which the size limits keep away). Beyond not crashing:
// - a message that parses serialises to text that parses back, strictly, to the same message (the same
//   serialised text: objects kept as text keep the client's key order until serialised);
// - a generate request that parses passes check_generate_request (the rules written once hold both ways);
// - a refusal becomes an error event that serialises.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "fuzz_support.hpp"
#include "loom/proto/client_message.hpp"
#include "loom/proto/error_event.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/server_message.hpp"

namespace {

using namespace loom::proto;
using loom::fuzz::check;

void check_client_message(std::string_view text, const ParseOptions& options) {
  const Parsed<ClientMessage> parsed = parse_client_message(text, options);
  if (!parsed) {
    (void)serialize(ServerMessage(to_error_event(parsed.error())));
    return;
  }
  if (const auto* request = std::get_if<GenerateRequest>(&parsed.value())) {
    check(!check_generate_request(*request, options).has_value(),
          "a parsed generate request fails check_generate_request");
  }
  const std::string text_again = serialize(parsed.value());
  const Parsed<ClientMessage> again = parse_client_message(text_again, ParseOptions{});
  check(again.ok(), "a client message's serialised form does not parse: " + text_again);
  // Compared as text: an object kept as JSON text (a schema, a tool's parameters, chat_template_kwargs, tool
  // call arguments sent as an object) keeps the client's key order when parsed from text, and serialize
  // writes it with sorted keys; the value is the same, and its serialised form is.
  check(serialize(again.value()) == text_again, "a client message changes on the way through serialize: " + text_again);
}

void check_server_message(std::string_view text, const ParseOptions& options) {
  const Parsed<ServerMessage> parsed = parse_server_message(text, options);
  if (!parsed) return;
  const std::string text_again = serialize(parsed.value());
  const Parsed<ServerMessage> again = parse_server_message(text_again, ParseOptions{});
  check(again.ok(), "a server message's serialised form does not parse: " + text_again);
  check(again.value() == parsed.value(), "a server message changes on the way through serialize: " + text_again);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ParseOptions lenient;
  lenient.strict = false;
  check_client_message(text, ParseOptions{});
  check_client_message(text, lenient);
  check_server_message(text, ParseOptions{});
  check_server_message(text, lenient);
  return 0;
}
