// The OpenAI-compatible routes' request half: an OpenAI body (completions or chat) checked and turned into
// a proto::GenerateRequest that proto's own parser validates (openai_translate.hpp).
#include "openai_translate.hpp"
#include "openai_unhonoured_fields.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

#include "openai_logprobs.hpp"

namespace loom::net::openai {

namespace {

using nlohmann::json;

// A field the client set: absent and null are the same, as in OpenAI's API and our protocol.
const json* find(const json& object, std::string_view name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

Error invalid(std::string param, std::string rule, std::optional<std::string> code = std::nullopt) {
  Error error;
  error.status = 400;
  error.message = param + ": " + std::move(rule);
  error.param = std::move(param);
  error.code = std::move(code);
  return error;
}

Error unsupported(std::string param, std::string what) {
  return invalid(std::move(param), "is not supported by this server (" + std::move(what) + ")", "unsupported");
}

// Client text quoted in a message is cut short (at a character boundary): an error must not echo a body.
std::string cut(std::string text, std::size_t limit = 200) {
  if (text.size() <= limit) return text;
  std::size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  text.resize(end);
  return text + "...";
}

// Thrown inside translate_request by the checks below; caught there and returned.
struct Refused {
  Error error;
};

// nlohmann builds the tree without recursion, but other operations on it recurse: a hostile
// "[[[[..." body is stopped while it is parsed, at the same depth limit as a WebSocket frame.
json parse_body(std::string_view body, std::size_t max_depth) {
  struct TooDeep {};
  const json::parser_callback_t depth_check = [max_depth](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        static_cast<std::size_t>(depth) >= max_depth) {
      throw TooDeep{};
    }
    return true;
  };
  // A JSON text holds no NUL byte, and the JSON reader would take one for the end of the text, accepting
  // `{...}\0garbage` as `{...}` (proto's parser refuses it the same way).
  if (const auto nul = body.find('\0'); nul != std::string_view::npos) {
    Error error;
    error.message = "the request body is not valid JSON: a NUL byte at byte offset " + std::to_string(nul);
    throw Refused{std::move(error)};
  }
  try {
    return json::parse(body.begin(), body.end(), depth_check);
  } catch (const TooDeep&) {
    Error error;
    error.message = "the request body must be nested at most " + std::to_string(max_depth) + " levels deep";
    throw Refused{std::move(error)};
  } catch (const json::exception& parse_error) {
    Error error;
    // nlohmann's text names the position and what it expected, and quotes the token it stopped in.
    std::string_view what = parse_error.what();
    if (const auto tag_end = what.find("] "); !what.empty() && what.front() == '[' && tag_end != std::string_view::npos) {
      what.remove_prefix(tag_end + 2);  // "[json.exception.parse_error.101] " is nlohmann's, not the client's
    }
    error.message = cut("the request body is not valid JSON: " + std::string(what));
    throw Refused{std::move(error)};
  }
}

// ---- Fields of both routes ----

void check_model(const json& body) {
  // Any name is accepted (the server serves one model); responses name the model actually served.
  if (const json* model = find(body, "model"); model != nullptr && !model->is_string()) {
    throw Refused{invalid("model", "must be a string")};
  }
}

// n choices of the one prompt (computed once); best_of only as n (no server-side ranking); `user` is accepted
// (a string, bounded) and not used.
std::int32_t read_n(const json& body) {
  std::int32_t n = 1;
  if (const json* value = find(body, "n")) {
    constexpr std::int32_t max = proto::GenerateRequest::kMaxChoices;
    if (!value->is_number_integer() || *value < 1 || *value > max) {
      throw Refused{invalid("n", "must be an integer in [1, " + std::to_string(max) + "]")};
    }
    n = value->get<std::int32_t>();
  }
  if (const json* best_of = find(body, "best_of"); best_of != nullptr && *best_of != n) {
    throw Refused{unsupported("best_of", "only equal to n: choices are not ranked on the server")};
  }
  if (const json* user = find(body, "user")) {
    constexpr std::size_t kMaxUserBytes = 256;
    if (!user->is_string()) throw Refused{invalid("user", "must be a string")};
    if (user->get_ref<const std::string&>().size() > kMaxUserBytes) {
      throw Refused{invalid("user", "must be at most " + std::to_string(kMaxUserBytes) + " bytes")};
    }
  }
  return n;
}

bool read_stream(const json& body, bool& include_usage) {
  bool stream = false;
  if (const json* value = find(body, "stream")) {
    if (!value->is_boolean()) throw Refused{invalid("stream", "must be a boolean")};
    stream = value->get<bool>();
  }
  if (const json* options = find(body, "stream_options")) {
    if (!options->is_object()) throw Refused{invalid("stream_options", "must be an object")};
    if (const json* usage = find(*options, "include_usage")) {
      if (!usage->is_boolean()) throw Refused{invalid("stream_options.include_usage", "must be a boolean")};
      include_usage = usage->get<bool>();
    }
  }
  return stream;
}

// The sampling fields, copied as the client wrote them into proto's params object so that proto's parser
// checks their types and ranges exactly as it does for a WebSocket frame. `client_names` records the
// fields whose OpenAI or llama.cpp name differs from proto's, so that an error names what the client sent.
json sampling_params(const json& body, OpenAiRoute route, std::map<std::string, std::string>& client_names) {
  json params = json::object();
  const auto copy = [&](std::string_view from, const std::string& to) {
    if (const json* value = find(body, from)) {
      params[to] = *value;
      if (from != to) client_names[to] = std::string(from);
    }
  };
  copy("temperature", "temperature");
  copy("top_p", "top_p");
  copy("presence_penalty", "presence_penalty");
  copy("frequency_penalty", "frequency_penalty");
  // llama.cpp's extensions, and vLLM's name for the repetition penalty.
  copy("top_k", "top_k");
  copy("min_p", "min_p");
  copy("repetition_penalty", "repetition_penalty");
  copy("repeat_penalty", "repetition_penalty");  // llama.cpp's name wins when both are sent
  copy("repeat_last_n", "repetition_last_n");
  copy("ignore_eos", "ignore_eos");

  if (const json* seed = find(body, "seed")) {
    // llama.cpp's -1 means "random", which is what an absent seed means here.
    if (!(seed->is_number_integer() && *seed == -1)) params["seed"] = *seed;
  }

  // llama.cpp's name for the limit, when max_tokens is not sent; its -1 ("no limit") is what an absent
  // max_tokens means here (until the context ends, within the server's ceiling).
  if (const json* n_predict = find(body, "n_predict"); n_predict != nullptr && find(body, "max_tokens") == nullptr &&
                                                       !(n_predict->is_number_integer() && *n_predict == -1)) {
    params["max_tokens"] = *n_predict;
    client_names["max_tokens"] = "n_predict";
  }
  copy("max_tokens", "max_tokens");
  // OpenAI's map of token id (a string) to a bias in [-100, 100]: proto's own shape; ids outside the
  // vocabulary are refused by the session, naming the id.
  copy("logit_bias", "logit_bias");
  // Chat's newer name for the same limit; it wins when both are sent, as it is the one OpenAI documents.
  if (route == OpenAiRoute::chat_completions) copy("max_completion_tokens", "max_tokens");

  if (const json* stop = find(body, "stop")) {
    params["stop"] = stop->is_string() ? json::array({*stop}) : *stop;
  }

  // Constrained output: OpenAI's response_format, llama.cpp's grammar and json_schema (at most one: proto
  // refuses two). A schema that fails to compile is refused by the session as params.json_schema; from
  // response_format, that is the client's response_format.json_schema.schema.
  copy("grammar", "grammar");
  copy("json_schema", "json_schema");
  if (const json* format = find(body, "response_format")) {
    params["response_format"] = *format;
    if (find(body, "json_schema") == nullptr) client_names["json_schema"] = "response_format.json_schema.schema";
  }
  return params;
}

// An integer count in [0, max], or a 400 naming the field.
std::int32_t read_count(const json& value, const std::string& name, std::int32_t max) {
  if (!value.is_number_integer() || value < 0 || value > max) {
    throw Refused{invalid(name, "must be an integer in [0, " + std::to_string(max) + "]")};
  }
  return value.get<std::int32_t>();
}

// How many alternatives per token the client asked to see, or nullopt for no log-probabilities. Chat:
// logprobs (a boolean) and top_logprobs (which needs logprobs true); completions: logprobs N (false, as
// some clients send, is none).
std::optional<std::int32_t> read_logprobs(const json& body, OpenAiRoute route) {
  const std::int32_t max = max_top_logprobs(route);
  const json* logprobs = find(body, "logprobs");
  if (route == OpenAiRoute::completions) {
    if (logprobs == nullptr || *logprobs == false) return std::nullopt;
    return read_count(*logprobs, "logprobs", max);
  }
  if (logprobs != nullptr && !logprobs->is_boolean()) throw Refused{invalid("logprobs", "must be a boolean")};
  const bool on = logprobs != nullptr && logprobs->get<bool>();
  const json* top = find(body, "top_logprobs");
  if (top == nullptr) return on ? std::optional<std::int32_t>(0) : std::nullopt;
  const std::int32_t count = read_count(*top, "top_logprobs", max);
  if (!on) throw Refused{invalid("top_logprobs", "needs logprobs: true")};
  return count;
}

// Fields loom recognises and cannot honour: the first is refused, naming it; with "lenient": true they are
// all ignored and returned, for the X-Loom-Ignored-Fields header.
std::vector<std::string> unhonoured(const json& body) {
  const std::optional<bool> lenient = read_lenient(body);
  if (!lenient) throw Refused{invalid("lenient", "must be a boolean")};
  std::vector<std::string> fields = unhonoured_fields_in(body);
  if (fields.empty() || *lenient) return fields;
  for (const UnhonouredField& field : unhonoured_fields()) {
    if (field.name != fields.front()) continue;
    throw Refused{unsupported(fields.front(), std::string(field.what) + "; leave it out or set it to " +
                                                  std::string(field.off) +
                                                  ", or send \"lenient\": true to have it ignored")};
  }
  return fields;
}

// ---- /v1/completions ----

std::string read_prompt(const json& body) {
  const json* prompt = find(body, "prompt");
  if (prompt == nullptr) throw Refused{invalid("prompt", "is required")};
  if (prompt->is_string()) return prompt->get<std::string>();
  if (prompt->is_array()) {
    if (prompt->size() == 1 && (*prompt)[0].is_string()) return (*prompt)[0].get<std::string>();
    const bool token_ids = !prompt->empty() && ((*prompt)[0].is_number() || (*prompt)[0].is_array());
    if (token_ids) throw Refused{unsupported("prompt", "prompts of token ids; send the prompt as text")};
    throw Refused{invalid("prompt", "must be a string or an array of exactly one string", "unsupported")};
  }
  throw Refused{invalid("prompt", "must be a string or an array of exactly one string")};
}

void refuse_completion_extras(const json& body) {
  if (const json* echo = find(body, "echo"); echo != nullptr && *echo != false) {
    throw Refused{unsupported("echo", "the prompt is not repeated in the answer")};
  }
  if (const json* suffix = find(body, "suffix"); suffix != nullptr && *suffix != "") {
    throw Refused{unsupported("suffix", "no fill-in-the-middle")};
  }
  // A raw prompt is not rendered with the chat template, which is where tools are shown to the model.
  for (const char* name : {"tools", "functions"}) {
    if (const json* tools = find(body, name); tools != nullptr && !(tools->is_array() && tools->empty())) {
      throw Refused{unsupported(name, "tools are offered on /v1/chat/completions only")};
    }
  }
}

// ---- /v1/chat/completions ----

// One OpenAI message as proto's {role, content}. Values of the wrong type are passed on unchanged, so that
// proto's parser reports them with the same words as on the WebSocket.
json read_message(const json& message, std::size_t index) {
  if (!message.is_object()) return message;
  const std::string path = "messages[" + std::to_string(index) + "]";
  json out = json::object();
  if (const auto role = message.find("role"); role != message.end()) {
    // OpenAI's newer name for the system role.
    out["role"] = (*role == "developer") ? json("system") : *role;
  }
  const json* content = find(message, "content");
  if (content == nullptr) {
    // An assistant turn that only called tools has no content: null, which proto refuses on other roles.
    out["content"] = nullptr;
  } else if (content->is_array()) {
    // Content parts: text parts are joined as they are; images, audio and files are not understood.
    std::string text;
    for (std::size_t part = 0; part < content->size(); ++part) {
      const json& item = (*content)[part];
      const std::string part_path = path + ".content[" + std::to_string(part) + "]";
      if (!item.is_object()) throw Refused{invalid(part_path, "must be an object")};
      const json* type = find(item, "type");
      if (type == nullptr || *type != "text") {
        throw Refused{unsupported(part_path + ".type", "only text content parts")};
      }
      const json* part_text = find(item, "text");
      if (part_text == nullptr || !part_text->is_string()) {
        throw Refused{invalid(part_path + ".text", "must be a string")};
      }
      text += part_text->get_ref<const std::string&>();
    }
    out["content"] = std::move(text);
  } else {
    out["content"] = *content;
  }
  // Tool calling. Fields OpenAI's clients echo back from a response (refusal, annotations, audio,
  // function_call: null) are dropped as before; only what proto knows is passed on.
  for (const char* name : {"tool_call_id", "name", "reasoning_content"}) {
    if (const json* value = find(message, name)) out[name] = *value;
  }
  if (const json* calls = find(message, "tool_calls")) {
    if (!calls->is_array()) {
      out["tool_calls"] = *calls;  // proto names the wrong type
    } else {
      // A call as OpenAI writes it, without what some clients keep from the stream (its "index").
      json kept = json::array();
      for (const json& call : *calls) {
        if (!call.is_object()) {
          kept.push_back(call);
          continue;
        }
        json item = json::object();
        for (const char* key : {"id", "type"}) {
          if (const json* value = find(call, key)) item[key] = *value;
        }
        if (const json* function = find(call, "function")) {
          if (function->is_object()) {
            json f = json::object();
            for (const char* key : {"name", "arguments"}) {
              if (const json* value = find(*function, key)) f[key] = *value;
            }
            item["function"] = std::move(f);
          } else {
            item["function"] = *function;
          }
        }
        kept.push_back(std::move(item));
      }
      out["tool_calls"] = std::move(kept);
    }
  }
  return out;
}

json read_messages(const json& body, const proto::ParseOptions& options) {
  const json* messages = find(body, "messages");
  if (messages == nullptr) throw Refused{invalid("messages", "is required")};
  // Anything but a plain list is left to proto's parser (wrong type, empty, too many entries).
  if (!messages->is_array() || messages->size() > options.max_messages) return *messages;
  json out = json::array();
  for (std::size_t i = 0; i < messages->size(); ++i) out.push_back(read_message((*messages)[i], i));
  return out;
}

void refuse_chat_extras(const json& body) {
  // OpenAI's deprecated form of tools: refused rather than ignored, which would answer in prose a client
  // that waits for a function call.
  if (const json* functions = find(body, "functions"); functions != nullptr && !(functions->is_array() && functions->empty())) {
    throw Refused{unsupported("functions", "the deprecated functions API; send them as tools")};
  }
  if (const json* call = find(body, "function_call"); call != nullptr && *call != "none" && *call != "auto") {
    throw Refused{unsupported("function_call", "the deprecated functions API; send tool_choice")};
  }
}

// Tool calling and the chat template's extras, copied as the client wrote them: proto's field names and
// shapes are OpenAI's (tools[i].function.parameters, tool_choice), so its errors name the client's fields.
void copy_chat_fields(const json& body, json& generate) {
  for (const char* name : {"tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs", "reasoning_format"}) {
    if (const json* value = find(body, name)) generate[name] = *value;
  }
}

Error from_validation_error(const proto::ValidationError& error,
                            const std::map<std::string, std::string>& client_names) {
  if (error.field.empty()) {
    Error out;
    out.message = error.message;
    return out;
  }
  return invalid(client_field(error.field, client_names), error.message);
}

}  // namespace

std::variant<nlohmann::json, Error> parse_json_object(std::string_view body, std::size_t max_depth) {
  try {
    json parsed = parse_body(body, max_depth);
    if (parsed.is_object()) return parsed;
    Error error;
    error.message = "the request body must be a JSON object";
    return error;
  } catch (Refused& refused) {
    return std::move(refused.error);
  }
}

std::string client_field(const std::string& field, const std::map<std::string, std::string>& client_names) {
  constexpr std::string_view kParams = "params.";
  if (field.rfind(kParams, 0) != 0) return field;
  const std::string rest = field.substr(kParams.size());
  const auto name_end = rest.find_first_of(".[");
  const std::string name = rest.substr(0, name_end);
  const auto renamed = client_names.find(name);
  const std::string suffix = name_end == std::string::npos ? "" : rest.substr(name_end);
  return (renamed == client_names.end() ? name : renamed->second) + suffix;
}

std::variant<Request, Error> translate_request(std::string_view body_text, OpenAiRoute route, std::string request_id,
                                               const proto::ParseOptions& options) {
  try {
    const json body = parse_body(body_text, options.max_json_depth);
    if (!body.is_object()) {
      Error error;
      error.message = "the request body must be a JSON object";
      return error;
    }
    check_model(body);
    Request request;
    request.n = read_n(body);
    request.ignored_fields = unhonoured(body);
    request.stream = read_stream(body, request.include_usage);
    if (route == OpenAiRoute::completions) {
      refuse_completion_extras(body);
    } else {
      refuse_chat_extras(body);
    }
    // Unknown fields (metadata, service_tier, ...) are ignored: OpenAI's
    // clients send fields this server has no use for, and refusing them would break those clients.

    request.top_logprobs = read_logprobs(body, route);
    std::map<std::string, std::string> client_names;
    json generate = {{"id", std::move(request_id)},
                     {"params", sampling_params(body, route, client_names)},
                     {"stream", true}};
    if (request.top_logprobs) generate["params"]["logprobs"] = std::max(*request.top_logprobs, 1);
    if (request.n > 1) generate["n"] = request.n;
    if (route == OpenAiRoute::completions) {
      generate["prompt"] = read_prompt(body);
    } else {
      generate["messages"] = read_messages(body, options);
      copy_chat_fields(body, generate);
    }
    auto parsed = proto::parse_generate_request(generate, options);
    if (!parsed) return from_validation_error(parsed.error(), client_names);
    request.generate = std::move(parsed).value();
    request.client_names = std::move(client_names);
    const auto& constraint = request.generate.params.constraint;
    const bool schema = constraint && constraint->kind == proto::OutputConstraint::Kind::json_schema;
    bool object_texts = !request.generate.tools.empty() || request.generate.chat_template_kwargs.has_value();
    if (const auto* messages = std::get_if<std::vector<proto::ChatMessage>>(&request.generate.input)) {
      for (const auto& message : *messages) object_texts = object_texts || !message.tool_calls.empty();
    }
    if (schema || object_texts) {
      // The body again, keeping key order, so that the schema's properties, a tool's parameters,
      // chat_template_kwargs and arguments sent as an object come in the client's order (the body parsed once
      // already within the depth bound). The body's tools, messages and tool calls are at the same indices
      // as the request's.
      const auto ordered = nlohmann::ordered_json::parse(body_text, nullptr, false);
      if (schema) proto::keep_schema_order(request.generate.params, ordered);
      if (object_texts) proto::keep_key_order(request.generate, ordered);
    }
    return request;
  } catch (Refused& refused) {
    return std::move(refused.error);
  }
}

}  // namespace loom::net::openai
