#include "openai_embeddings.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "gateway_context.hpp"
#include "net_logger.hpp"
#include "peer_close_watch.hpp"

namespace loom::net::openai {

namespace {

using nlohmann::json;

struct Refused {
  Error error;
};

[[noreturn]] void refuse(std::string param, std::string rule, std::optional<std::string> code = std::nullopt) {
  Error error;
  error.message = param + ": " + std::move(rule);
  error.param = std::move(param);
  error.code = std::move(code);
  throw Refused{std::move(error)};
}

// An embeddings body nests three levels at most (object, list, token list): anything deeper is refused
// while it is parsed, before a hostile "[[[[..." costs anything.
constexpr int kMaxDepth = 3;

json parse(std::string_view body) {
  struct TooDeep {};
  const json::parser_callback_t depth_check = [](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) && depth >= kMaxDepth) {
      throw TooDeep{};
    }
    return true;
  };
  Error error;
  if (body.find('\0') != std::string_view::npos) {
    error.message = "the request body is not valid JSON: it holds a NUL byte";
    throw Refused{std::move(error)};
  }
  try {
    json parsed = json::parse(body.begin(), body.end(), depth_check);
    if (parsed.is_object()) return parsed;
    error.message = "the request body must be a JSON object";
  } catch (const TooDeep&) {
    error.message = "the request body is nested too deeply for an embeddings request";
  } catch (const json::exception&) {
    error.message = "the request body is not valid JSON";
  }
  throw Refused{std::move(error)};
}

const json* find(const json& object, std::string_view name) {
  const auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::vector<std::int32_t> token_ids(const json& list, const std::string& param) {
  if (list.empty()) refuse(param, "a token list must not be empty");
  std::vector<std::int32_t> ids;
  ids.reserve(list.size());
  for (const json& id : list) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max()) {
      refuse(param, "token ids must be non-negative integers");
    }
    ids.push_back(static_cast<std::int32_t>(id.get<std::int64_t>()));
  }
  return ids;
}

std::string text(const json& value, const std::string& param) {
  std::string s = value.get<std::string>();
  if (s.empty()) refuse(param, "must not be an empty string");
  return s;
}

// The four shapes of `input`.
void read_input(const json& input, EmbeddingsRequest& out) {
  auto& inputs = out.engine.inputs;
  if (input.is_string()) {
    out.single = true;
    inputs.emplace_back(text(input, "input"));
    return;
  }
  if (!input.is_array()) refuse("input", "must be a string, a list of strings, a list of token ids or a list of token lists");
  if (input.empty()) refuse("input", "must not be an empty list");
  if (input.front().is_number()) {  // one token list
    out.single = true;
    inputs.emplace_back(token_ids(input, "input"));
    return;
  }
  if (input.size() > kMaxEmbeddingInputs) {
    refuse("input", "holds " + std::to_string(input.size()) + " inputs; at most " + std::to_string(kMaxEmbeddingInputs));
  }
  for (std::size_t i = 0; i < input.size(); ++i) {
    const std::string param = "input[" + std::to_string(i) + "]";
    const json& item = input[i];
    if (item.is_string()) {
      inputs.emplace_back(text(item, param));
    } else if (item.is_array()) {
      inputs.emplace_back(token_ids(item, param));
    } else {
      refuse(param, "must be a string or a list of token ids");
    }
  }
}

constexpr std::string_view kBase64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::variant<EmbeddingsRequest, Error> translate_embeddings_request(std::string_view body, std::int64_t embedding_length) {
  try {
    const json request = parse(body);
    EmbeddingsRequest out;
    if (const json* model = find(request, "model"); model != nullptr && !model->is_string()) refuse("model", "must be a string");
    if (const json* user = find(request, "user"); user != nullptr && !user->is_string()) refuse("user", "must be a string");
    const json* input = find(request, "input");
    if (input == nullptr) refuse("input", "is required");
    read_input(*input, out);
    if (const json* format = find(request, "encoding_format")) {
      if (!format->is_string() || (*format != "float" && *format != "base64")) {
        refuse("encoding_format", "must be \"float\" or \"base64\"");
      }
      out.base64 = *format == "base64";
    }
    if (const json* dimensions = find(request, "dimensions")) {
      if (!dimensions->is_number_integer()) refuse("dimensions", "must be an integer");
      if (dimensions->get<std::int64_t>() != embedding_length) {
        refuse("dimensions",
               "is not supported by this server (the model's embeddings have " + std::to_string(embedding_length) +
                   " dimensions; shorter ones are not offered)",
               "unsupported");
      }
    }
    return out;
  } catch (const Refused& refused) {
    return refused.error;
  }
}

std::string base64_floats(std::span<const float> values) {
  std::vector<unsigned char> bytes(values.size() * sizeof(float));
  for (std::size_t i = 0; i < values.size(); ++i) {
    auto bits = std::bit_cast<std::uint32_t>(values[i]);
    for (std::size_t b = 0; b < 4; ++b, bits >>= 8) bytes[i * 4 + b] = static_cast<unsigned char>(bits & 0xFF);
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    const std::uint32_t group = (std::uint32_t{bytes[i]} << 16) | (n > 1 ? std::uint32_t{bytes[i + 1]} << 8 : 0u) |
                                (n > 2 ? std::uint32_t{bytes[i + 2]} : 0u);
    for (std::size_t k = 0; k < 4; ++k) {
      out += k <= n ? kBase64Alphabet[(group >> (18 - 6 * k)) & 0x3F] : '=';
    }
  }
  return out;
}

json embeddings_response(const actors::EmbedResult& result, bool base64, const std::string& model) {
  json data = json::array();
  std::int64_t tokens = 0;
  for (std::size_t i = 0; i < result.embeddings.size(); ++i) {
    const auto& values = result.embeddings[i];
    json embedding = base64 ? json(base64_floats(values)) : json(values);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(embedding)}});
    if (i < result.prompt_tokens.size()) tokens += result.prompt_tokens[i];
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
}

Error embeddings_error(const proto::ErrorEvent& event, bool single) {
  proto::ErrorEvent renamed = event;
  if (renamed.field.rfind("inputs", 0) == 0) {
    renamed.field = single ? "input" : "input" + renamed.field.substr(6);
  }
  return from_error_event(renamed);
}

}  // namespace loom::net::openai

namespace loom::net {

namespace asio = boost::asio;

namespace {

// Outside the coroutine: GCC 12 miscompiles some braced initialisers inside coroutines.
openai::Error gateway_refusal(proto::ErrorCode code, std::string message) {
  proto::ErrorEvent event;
  event.code = code;
  event.message = std::move(message);
  return openai::from_error_event(event);
}

}  // namespace

// The request is cancelled when its client leaves while the engine computes (PeerCloseWatch): a list of 2,048
// inputs would otherwise run on for nobody. Counted in /metrics as endpoint "embeddings".
asio::awaitable<bool> serve_openai_embeddings(GatewayContext& context, TcpStream& stream, HttpRequest request) {
  auto translated = openai::translate_embeddings_request(request.body(), context.embedding_length);
  std::optional<openai::Error> refusal;
  std::string_view outcome = "refused";
  if (auto* error = std::get_if<openai::Error>(&translated)) refusal = std::move(*error);
  std::optional<RequestBudget::Slot> slot;  // held until the engine has answered
  if (!refusal) {
    if (auto acquired = context.budget.try_acquire()) {
      slot.emplace(std::move(*acquired));
    } else {
      refusal = gateway_refusal(proto::ErrorCode::overloaded, "the server is at capacity (" +
                                                                  std::to_string(context.budget.limit()) +
                                                                  " requests in flight); retry later");
    }
  }
  std::optional<actors::EmbedResult> result;
  if (!refusal) {
    auto& embeddings = std::get<openai::EmbeddingsRequest>(translated);
    // Random, so that ids stay unique across restarts and several gateways.
    const std::string id = "embd-" + random_alphanumeric(24);
    embeddings.engine.id = id;
    bool client_left = false;
    auto watch = std::make_unique<PeerCloseWatch>(stream, [&context, &client_left, id] {
      logger().debug("route=embeddings request={} the client went away while waiting: cancelled", id);
      client_left = true;
      context.engine.cancel(id);
    });
    boost::system::error_code ec;
    result = co_await context.engine.async_embed(std::move(embeddings.engine),
                                                 asio::redirect_error(asio::use_awaitable, ec));
    watch.reset();  // before the write: its end cancels the socket's pending operations
    if (ec) {
      refusal = gateway_refusal(proto::ErrorCode::unavailable, "the engine did not answer: " + ec.message());
      outcome = "error";
    } else if (result->error) {
      refusal = openai::embeddings_error(*result->error, embeddings.single);
      const proto::ErrorCode code = result->error->code;
      outcome = client_left ? "cancelled" : code == proto::ErrorCode::internal ? "error" : "refused";
    } else {
      outcome = "stop";
    }
  }
  context.metrics.request_finished(Endpoint::embeddings, outcome);
  HttpResponse response =
      refusal ? make_openai_error(request, *refusal)
              : make_json_response(request, http::status::ok,
                                   openai::embeddings_response(
                                       *result, std::get<openai::EmbeddingsRequest>(translated).base64, context.model_id));
  co_return co_await write_http_response(context, stream, std::move(response), request.method());
}

}  // namespace loom::net
