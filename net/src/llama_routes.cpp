#include "llama_routes.hpp"

#include <variant>
#include <vector>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "openai_translate.hpp"

namespace loom::net {

namespace {

namespace asio = boost::asio;
using nlohmann::json;

HttpResponse invalid(const HttpRequest& request, const std::string& field, const std::string& rule) {
  return make_openai_error(request, http::status::bad_request, field + ": " + rule, "invalid_request_error", field);
}

// A field the client set: absent and null are the same, as on the OpenAI routes.
const json* find(const json& object, std::string_view name) {
  const auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// A boolean option; nullopt when it is not a boolean.
std::optional<bool> flag(const json& body, std::string_view name, bool fallback) {
  const json* value = find(body, name);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) return std::nullopt;
  return value->get<bool>();
}

// A piece as llama.cpp gives it: its text when that is valid UTF-8 on its own, else its bytes (a character
// split over several tokens).
json piece_json(const std::string& piece) {
  try {
    (void)json(piece).dump();  // the strict handler throws on invalid UTF-8
    return piece;
  } catch (const json::type_error&) {
    json bytes = json::array();
    for (const char c : piece) bytes.push_back(static_cast<unsigned char>(c));
    return bytes;
  }
}

HttpResponse tokenize_response(const GatewayContext& context, const HttpRequest& request, const json& body) {
  const json* content = find(body, "content");
  if (content == nullptr || !content->is_string()) return invalid(request, "content", "is required: the text to tokenize, a string");
  const auto& text = content->get_ref<const std::string&>();
  const std::size_t limit = context.parse_options.max_prompt_bytes;
  if (text.size() > limit) {
    return invalid(request, "content", "must be at most " + std::to_string(limit) + " bytes, got " + std::to_string(text.size()));
  }
  const auto add_special = flag(body, "add_special", false);
  const auto parse_special = flag(body, "parse_special", true);
  const auto with_pieces = flag(body, "with_pieces", false);
  for (const auto& [name, value] : {std::pair{"add_special", add_special}, std::pair{"parse_special", parse_special},
                                    std::pair{"with_pieces", with_pieces}}) {
    if (!value) return invalid(request, name, "must be a boolean");
  }
  const auto& tokenizer = *context.tokenizer;
  const auto ids = tokenizer.encode(text, {.add_special = *add_special, .parse_special = *parse_special});
  json tokens = json::array();
  for (const std::int32_t id : ids) {
    if (*with_pieces) {
      tokens.push_back({{"id", id}, {"piece", piece_json(tokenizer.piece(id, true))}});
    } else {
      tokens.push_back(id);
    }
  }
  return make_json_response(request, http::status::ok, json{{"tokens", std::move(tokens)}});
}

HttpResponse detokenize_response(const GatewayContext& context, const HttpRequest& request, const json& body) {
  const json* tokens = find(body, "tokens");
  if (tokens == nullptr || !tokens->is_array()) return invalid(request, "tokens", "is required: an array of token ids");
  if (tokens->size() > kMaxDetokenizeTokens) {
    return invalid(request, "tokens", "must have at most " + std::to_string(kMaxDetokenizeTokens) + " entries, got " +
                                          std::to_string(tokens->size()));
  }
  const auto& tokenizer = *context.tokenizer;
  const std::int32_t vocabulary = tokenizer.vocabulary().size();
  std::vector<std::int32_t> ids;
  ids.reserve(tokens->size());
  for (std::size_t i = 0; i < tokens->size(); ++i) {
    const json& id = (*tokens)[i];
    const std::string field = "tokens[" + std::to_string(i) + "]";
    const bool in_range = id.is_number_integer() && id.get<std::int64_t>() >= 0 && id.get<std::int64_t>() < vocabulary;
    if (!in_range) {
      return invalid(request, field, "must be a token id, an integer in [0, " + std::to_string(vocabulary - 1) + "], got " +
                                         id.dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 64));
    }
    ids.push_back(static_cast<std::int32_t>(id.get<std::int64_t>()));
  }
  // Special tokens give their text, and the space SentencePiece puts in front of a text is taken off, so
  // that /tokenize then /detokenize gives the content back.
  const std::string content = tokenizer.decode(ids, {.render_special = true, .strip_leading_space = true});
  return make_json_response(request, http::status::ok, json{{"content", content}});
}

// The engine's answer to apply-template as HTTP.
HttpResponse applied_response(const HttpRequest& request, boost::system::error_code ec,
                              const actors::AppliedTemplate& applied, const std::map<std::string, std::string>& names) {
  if (ec) {
    return make_openai_error(request, http::status::service_unavailable, "the engine did not answer: " + ec.message(),
                             "server_error", std::nullopt, "unavailable");
  }
  if (applied.error) return make_openai_error(request, openai::from_error_event(*applied.error, names));
  return make_json_response(request, http::status::ok,
                            json{{"prompt", applied.prompt}, {"prompt_tokens", applied.prompt_tokens}});
}

// The body is a chat request's (messages, tools, tool_choice, chat_template_kwargs), checked as one.
asio::awaitable<HttpResponse> apply_template_response(GatewayContext& context, const HttpRequest& request) {
  auto translated = openai::translate_request(request.body(), OpenAiRoute::chat_completions,
                                              "template-" + random_alphanumeric(16), context.parse_options);
  if (const auto* error = std::get_if<openai::Error>(&translated)) co_return make_openai_error(request, *error);
  auto& chat = std::get<openai::Request>(translated);
  boost::system::error_code ec;
  actors::AppliedTemplate applied = co_await context.engine.async_apply_template(
      std::move(chat.generate), asio::redirect_error(asio::use_awaitable, ec));
  co_return applied_response(request, ec, applied, chat.client_names);
}

HttpResponse token_route_response(const GatewayContext& context, const HttpRequest& request, std::string_view path) {
  auto parsed = openai::parse_json_object(request.body(), context.parse_options.max_json_depth);
  if (const auto* error = std::get_if<openai::Error>(&parsed)) return make_openai_error(request, *error);
  const json& body = std::get<json>(parsed);
  try {
    return path == "/tokenize" ? tokenize_response(context, request, body) : detokenize_response(context, request, body);
  } catch (const std::exception& e) {
    // The tokenizer refuses what it cannot handle; the client's text, not the server, is at fault.
    return make_openai_error(request, http::status::bad_request, std::string("the text cannot be tokenized: ") + e.what(),
                             "invalid_request_error", path == "/tokenize" ? "content" : "tokens");
  }
}

}  // namespace

bool is_llama_route(std::string_view path) {
  return path == "/tokenize" || path == "/detokenize" || path == "/apply-template";
}

std::optional<HttpResponse> llama_route_refusal(const GatewayContext& context, const HttpRequest& request,
                                                std::string_view path) {
  if (request.method() != http::verb::post) {
    auto response = make_openai_error(request, http::status::method_not_allowed,
                                      "method " + std::string(request.method_string()) + " is not allowed on " +
                                          std::string(path),
                                      "invalid_request_error");
    response.set(http::field::allow, "POST");
    return response;
  }
  if (!authorized(context, request, false)) {
    return make_openai_error(request, http::status::unauthorized, "missing or wrong API key: send Authorization: Bearer KEY",
                             "authentication_error", std::nullopt, "invalid_api_key");
  }
  if (!context.ready() || context.shutdown.notified() || !context.tokenizer) {
    return make_openai_error(request, http::status::service_unavailable,
                             context.shutdown.notified() ? "the server is shutting down" : "the model is still loading",
                             "server_error", std::nullopt, "unavailable");
  }
  return std::nullopt;
}

asio::awaitable<bool> serve_llama_route(GatewayContext& context, TcpStream& stream, HttpRequest request) {
  const std::string path(target_path(request.target()));
  std::optional<HttpResponse> response;
  if (path == "/apply-template") {
    response = co_await apply_template_response(context, request);
  } else {
    response = token_route_response(context, request, path);
  }
  const bool keep_alive = co_await write_http_response(context, stream, std::move(*response), request.method());
  co_return keep_alive;
}

json model_meta(const compute::BackendInfo& info, std::int64_t context_length, const compute::Tokenizer* tokenizer) {
  const auto& c = info.config;
  json meta = {{"n_vocab", c.vocab_size},
               {"n_ctx_train", c.context_length},
               {"n_embd", c.dim},
               {"n_params", info.tensors.parameters},
               {"size", info.tensors.bytes},
               {"architecture", compute::to_string(c.architecture)},
               {"context_length", context_length},
               {"n_layer", c.layers},
               {"n_head", c.heads},
               {"n_head_kv", c.kv_heads},
               {"tensor_types", info.tensors.types}};
  if (tokenizer != nullptr) {
    const bool spm = tokenizer->vocabulary().model == compute::TokenizerModel::sentencepiece;
    meta["vocab_type"] = spm ? 1 : 2;  // llama.cpp's numbering
  }
  return meta;
}

}  // namespace loom::net
