#include "http_util.hpp"

#include <algorithm>
#include <cctype>
#include <random>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/version.hpp>

#include "openai_translate.hpp"

namespace loom::net {

std::string_view target_path(std::string_view target) noexcept {
  const auto query = target.find('?');
  return query == std::string_view::npos ? target : target.substr(0, query);
}

namespace {
int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::optional<std::string> percent_decode(std::string_view text) {
  std::string decoded;
  decoded.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      decoded += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;  // a '%' without two digits after it
    const int high = hex_value(text[i + 1]);
    const int low = hex_value(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    decoded += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return decoded;
}

std::optional<std::string> query_parameter(std::string_view target, std::string_view name) {
  const auto query = target.find('?');
  if (query == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(query + 1);
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const auto eq = pair.find('=');
    if (percent_decode(pair.substr(0, eq)) == name) {
      return percent_decode(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

std::string random_alphanumeric(std::size_t n) {
  static constexpr std::string_view kAlnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<std::size_t> pick(0, kAlnum.size() - 1);
  std::string out(n, ' ');
  for (auto& c : out) c = kAlnum[pick(rng)];
  return out;
}

std::string request_id_of(const HttpRequest& request) {
  constexpr std::size_t kMaxBytes = 128;
  const auto it = request.find("X-Request-Id");
  if (it != request.end()) {
    const std::string_view id(it->value().data(), it->value().size());
    const bool usable = !id.empty() && id.size() <= kMaxBytes && std::all_of(id.begin(), id.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == ':' || c == '-';
    });
    if (usable) return std::string(id);
  }
  return "req-" + random_alphanumeric(24);
}

HttpResponse make_response(const HttpRequest& request, http::status status, std::string content_type,
                           std::string body) {
  HttpResponse response{status, request.version()};
  response.set(http::field::server, "loom/" LOOM_NET_VERSION);
  response.set("X-Request-Id", request_id_of(request));
  response.set(http::field::content_type, std::move(content_type));
  response.keep_alive(request.keep_alive());
  // Every 503 is a state that passes (loading, overloaded, draining): clients and proxies that honour
  // Retry-After come back after a second instead of hammering the server or giving up.
  if (status == http::status::service_unavailable) response.set(http::field::retry_after, "1");
  response.body() = std::move(body);
  response.prepare_payload();
  return response;
}

HttpResponse make_json_response(const HttpRequest& request, http::status status, const nlohmann::json& body) {
  return make_response(request, status, "application/json",
                       body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

HttpResponse make_openai_error(const HttpRequest& request, http::status status, std::string message,
                               std::string type, std::optional<std::string> param, std::optional<std::string> code) {
  nlohmann::json error = {{"message", std::move(message)}, {"type", std::move(type)}, {"param", nullptr},
                          {"code", nullptr}};
  if (param) error["param"] = *param;
  if (code) error["code"] = *code;
  return make_json_response(request, status, nlohmann::json{{"error", std::move(error)}});
}

HttpResponse make_openai_error(const HttpRequest& request, const openai::Error& error) {
  return make_openai_error(request, static_cast<http::status>(error.status), error.message, error.type, error.param,
                           error.code);
}

namespace {
// Equal strings in time that depends only on their lengths, so the key cannot be guessed byte by byte.
bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}
}  // namespace

bool authorized(const GatewayContext& context, const HttpRequest& request, bool websocket_upgrade) {
  const std::string& key = context.config.api_key;
  if (key.empty()) return true;
  if (const auto header = request.find(http::field::authorization); header != request.end()) {
    // The scheme is case-insensitive (RFC 7235 section 2.1): "bearer KEY" is as good as "Bearer KEY".
    constexpr std::string_view kBearer = "bearer ";
    const std::string_view value = header->value();
    if (value.size() > kBearer.size() && boost::beast::iequals(value.substr(0, kBearer.size()), kBearer) &&
        constant_time_equal(value.substr(kBearer.size()), key)) {
      return true;
    }
  }
  if (websocket_upgrade) {
    if (const auto token = query_parameter(request.target(), "access_token")) return constant_time_equal(*token, key);
  }
  return false;
}

boost::asio::awaitable<bool> write_http_response(GatewayContext& context, TcpStream& stream, HttpResponse response,
                                                 http::verb request_method) {
  context.metrics.http_response(static_cast<int>(response.result_int()));
  const bool keep_alive = response.keep_alive();
  boost::system::error_code ec;
  if (request_method == http::verb::head) {
    // The GET's headers, Content-Length included, and no body: the client reads none (RFC 9110 9.3.2).
    http::response_serializer<http::string_body> serializer{response};
    co_await http::async_write_header(stream, serializer, boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  } else {
    co_await http::async_write(stream, response, boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  }
  co_return !ec && keep_alive;
}

}  // namespace loom::net
