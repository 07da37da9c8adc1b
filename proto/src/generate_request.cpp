#include "loom/proto/generate_request.hpp"

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const GenerateRequest& request) {
  j = nlohmann::json{{"id", request.id}};
  if (request.session_id) j[request.open_session ? "session" : "session_id"] = *request.session_id;
  if (const auto* prompt = std::get_if<std::string>(&request.input)) {
    j["prompt"] = *prompt;
  } else {
    j["messages"] = std::get<std::vector<ChatMessage>>(request.input);
  }
  j["params"] = request.params;
  j["priority"] = request.priority;
  j["stream"] = request.stream;
}

Parsed<GenerateRequest> parse_generate_request(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<GenerateRequest>([&] { return detail::read_generate_request(j, "", options); }, &j, options);
}

std::optional<ValidationError> check_generate_request(const GenerateRequest& request, const ParseOptions& options) {
  const nlohmann::json j = request;
  auto parsed = parse_generate_request(j, options);
  if (parsed.ok()) return std::nullopt;
  return parsed.error();
}

namespace detail {

namespace {

std::vector<ChatMessage> read_messages(const Json& value, const std::string& path, const ParseOptions& options) {
  if (!value.is_array()) fail(path, "must be an array of messages, got " + describe(value));
  if (value.empty()) fail(path, "must not be empty");
  if (value.size() > options.max_messages) {
    fail(path,
         "must have at most " + std::to_string(options.max_messages) + " entries, got " + std::to_string(value.size()));
  }
  std::vector<ChatMessage> messages;
  messages.reserve(value.size());
  std::size_t total_bytes = 0;
  for (std::size_t i = 0; i < value.size(); ++i) {
    messages.push_back(read_chat_message(value[i], index_path(path, i), options));
    total_bytes += messages.back().content.size();
  }
  // Each content is bounded alone; the sum is what the tokenizer and the KV cache actually face.
  if (total_bytes > options.max_prompt_bytes) {
    fail(path, "must have at most " + std::to_string(options.max_prompt_bytes) + " bytes of content in total, got " +
                   std::to_string(total_bytes));
  }
  return messages;
}

}  // namespace

GenerateRequest read_generate_request(const Json& j, const std::string& path, const ParseOptions& options,
                                      std::string_view envelope_key) {
  ObjectReader r(j, path, options);
  r.check_known({"id", "session_id", "session", "prompt", "messages", "params", "priority", "stream"}, envelope_key);
  GenerateRequest request;
  request.id = read_id(r.require("id"), r.path("id"), options);
  const Json* session_id = r.find("session_id");
  const Json* session = r.find("session");
  if (session_id != nullptr && session != nullptr) {
    fail(r.path("session"), "give the session as session (opened on first use) or as session_id (opened with "
                            "session.open), not both");
  }
  if (session_id != nullptr) request.session_id = read_id(*session_id, r.path("session_id"), options);
  if (session != nullptr) {
    request.session_id = read_id(*session, r.path("session"), options);
    request.open_session = true;
  }

  const Json* prompt = r.find("prompt");
  const Json* messages = r.find("messages");
  if (prompt != nullptr && messages != nullptr) {
    fail(r.path("prompt"), "exactly one of prompt and messages must be given, got both");
  }
  if (prompt == nullptr && messages == nullptr) {
    fail(r.path("prompt"), "exactly one of prompt and messages must be given, got neither");
  }
  if (prompt != nullptr) {
    const std::string prompt_path = r.path("prompt");
    std::string text = read_string(*prompt, prompt_path);
    check_max_bytes(text, prompt_path, options.max_prompt_bytes);
    request.input = std::move(text);
  } else {
    request.input = read_messages(*messages, r.path("messages"), options);
  }

  if (const Json* v = r.find("params")) {
    request.params = read_sampling_params(*v, r.path("params"), options);
  } else {
    // Absent params are all defaults, with the same max_tokens clamp as a present-but-empty object.
    request.params = read_sampling_params(Json::object(), r.path("params"), options);
  }
  if (const Json* v = r.find("priority")) {
    request.priority = static_cast<std::int32_t>(
        read_integer(*v, r.path("priority"), GenerateRequest::kMinPriority, GenerateRequest::kMaxPriority));
  }
  if (const Json* v = r.find("stream")) request.stream = read_bool(*v, r.path("stream"));
  return request;
}

}  // namespace detail

}  // namespace loom::proto
