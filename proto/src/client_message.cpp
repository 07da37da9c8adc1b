#include "loom/proto/client_message.hpp"

#include "json_text.hpp"
#include "readers.hpp"

namespace loom::proto {

namespace {

constexpr std::string_view kSessionOpen = "session.open";
constexpr std::string_view kGenerate = "generate";
constexpr std::string_view kCancel = "cancel";
constexpr std::string_view kSessionClose = "session.close";
constexpr std::string_view kSessionReset = "session.reset";
constexpr std::string_view kSessionList = "session.list";

ClientMessage read_client_message(const detail::Json& j, const ParseOptions& options) {
  const detail::ObjectReader r(j, "", options);
  const std::string type = detail::read_string(r.require("type"), "type");
  if (type == kSessionOpen) return detail::read_session_open(j, "", options, "type");
  if (type == kGenerate) return detail::read_generate_request(j, "", options, "type");
  if (type == kCancel) return detail::read_cancel_request(j, "", options, "type");
  if (type == kSessionClose) return detail::read_session_close(j, "", options, "type");
  if (type == kSessionReset) return detail::read_session_reset(j, "", options, "type");
  if (type == kSessionList) return detail::read_session_list(j, "", options, "type");
  detail::fail("type", "must be one of session.open, generate, cancel, session.close, session.reset, session.list, got " +
                           detail::echo_text(type));
}

}  // namespace

std::string_view message_type(const ClientMessage& message) noexcept {
  return std::visit(detail::Overloaded{
                        [](const SessionOpen&) { return kSessionOpen; },
                        [](const GenerateRequest&) { return kGenerate; },
                        [](const CancelRequest&) { return kCancel; },
                        [](const SessionClose&) { return kSessionClose; },
                        [](const SessionReset&) { return kSessionReset; },
                        [](const SessionList&) { return kSessionList; },
                    },
                    message);
}

void to_json(nlohmann::json& j, const ClientMessage& message) {
  std::visit([&](const auto& body) { j = body; }, message);
  j["type"] = message_type(message);
}

std::string serialize(const ClientMessage& message) {
  const nlohmann::json j = message;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Parsed<ClientMessage> parse_client_message(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<ClientMessage>([&] { return read_client_message(j, options); }, &j, options);
}

Parsed<ClientMessage> parse_client_message(std::string_view text, const ParseOptions& options) {
  auto parsed = detail::parse_text<ClientMessage>(text, options, [](const nlohmann::json& j, const ParseOptions& o) {
    return parse_client_message(j, o);
  });
  // A schema's properties (and a tool's parameters, chat_template_kwargs, a tool call's arguments given as
  // an object) in the client's order: the text again, keeping key order (it parsed once already, within
  // the depth bound, so this cannot fail). Only when there is such a text, so other frames pay nothing.
  if (parsed.ok()) {
    if (auto* request = std::get_if<GenerateRequest>(&parsed.value()); request != nullptr) {
      const bool schema = request->params.constraint &&
                          request->params.constraint->kind == OutputConstraint::Kind::json_schema;
      bool object_texts = !request->tools.empty() || request->chat_template_kwargs.has_value();
      if (const auto* messages = std::get_if<std::vector<ChatMessage>>(&request->input)) {
        for (const ChatMessage& message : *messages) object_texts = object_texts || !message.tool_calls.empty();
      }
      if (schema || object_texts) {
        const auto ordered = nlohmann::ordered_json::parse(text, nullptr, false);
        if (schema && ordered.is_object() && ordered.contains("params")) {
          keep_schema_order(request->params, ordered["params"]);
        }
        if (object_texts) keep_key_order(*request, ordered);
      }
    }
  }
  return parsed;
}

}  // namespace loom::proto
