#include "loom/net/gateway_config.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include <boost/asio/ip/address.hpp>
#include "loom/compute/devices.hpp"
#include <nlohmann/json.hpp>

namespace loom::net {

namespace {

[[noreturn]] void refuse(const std::string& field, const std::string& rule) {
  throw std::invalid_argument(field + " " + rule);
}

template <class T>
void within(const std::string& field, T value, T low, T high) {
  if (value < low || value > high) {
    refuse(field, "must be in [" + std::to_string(low) + ", " + std::to_string(high) + "], got " + std::to_string(value));
  }
}

// Where byte `offset` of `text` is, as a person finds it in an editor: "line 3, column 14".
std::string line_and_column(const std::string& text, std::size_t offset) {
  offset = std::min(offset, text.size());
  std::size_t line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - line_start + 1);
}

// nlohmann's explanation without its "[json.exception.parse_error.101] parse error at line 1, column 5: "
// prefix: the position is reported our way, and the exception's id means nothing to a user.
std::string parse_problem(const nlohmann::json::parse_error& error) {
  std::string_view what = error.what();
  if (const auto at = what.find("parse error"); at != std::string_view::npos) {
    what.remove_prefix(at);
    if (const auto colon = what.find(": "); colon != std::string_view::npos) what.remove_prefix(colon + 2);
  }
  return std::string(what);
}

// Bounds of a non-zero SSE ping interval: often enough to matter, rarely enough not to flood.
constexpr std::int64_t kMinSsePingMs = 10;
constexpr std::int64_t kMaxSsePingMs = 3600000;

// What a browser sends in Origin: "*" (ours: any), or scheme://host[:port] with nothing after it. An
// entry with a path or a trailing slash would never equal a browser's Origin, so it is refused rather than
// silently matching nothing.
bool valid_origin(std::string_view origin) {
  if (origin == "*") return true;
  std::string_view rest = origin;
  if (rest.starts_with("http://")) rest.remove_prefix(7);
  else if (rest.starts_with("https://")) rest.remove_prefix(8);
  else return false;
  if (rest.empty()) return false;
  return std::all_of(rest.begin(), rest.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == ':' || c == '[' || c == ']';
  });
}

}  // namespace

void GatewayConfig::validate() const {
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  if (ec) refuse("host", "must be an IP address (such as 127.0.0.1 or 0.0.0.0), got '" + host + "'");
  try {
    compute::check_device_spec(device);
  } catch (const std::invalid_argument&) {
    refuse("device", "must be cpu, vulkan or vulkan:N (N a device index as `loom info --devices` lists), got '" + device + "'");
  }
  compute::DeviceArithmetic arithmetic = compute::DeviceArithmetic::automatic;
  try {
    arithmetic = compute::parse_device_arithmetic(vulkan_arithmetic);
  } catch (const std::invalid_argument&) {
    refuse("vulkan_arithmetic", "must be auto, pinned or fast, got '" + vulkan_arithmetic + "'");
  }
  if (arithmetic != compute::DeviceArithmetic::automatic && device == "cpu") {
    refuse("vulkan_arithmetic", "is for a Vulkan device (device vulkan or vulkan:N); the CPU backend has one arithmetic");
  }
  within<int>("threads", threads, 0, 256);
  within<int>("compute_threads", compute_threads, 0, 1024);
  within<std::int32_t>("max_batch_tokens", max_batch_tokens, 1, 1 << 20);
  within<std::int64_t>("kv_cache_mb", kv_cache_mb, 0, std::int64_t{1} << 20);
  within<int>("kv_cache_percent", kv_cache_percent, 1, 100);
  within<std::size_t>("max_body_bytes", max_body_bytes, 1024, std::size_t{1} << 30);
  within<std::size_t>("max_frame_bytes", max_frame_bytes, 1024, std::size_t{1} << 30);
  within<std::int32_t>("max_prompt_tokens", max_prompt_tokens, 0, 1 << 24);
  within<std::int32_t>("max_tokens_limit", max_tokens_limit, 1, 1 << 20);
  within<std::size_t>("max_requests_per_connection", max_requests_per_connection, 1, 1 << 16);
  within<std::size_t>("max_sessions_per_connection", max_sessions_per_connection, 1, 1 << 16);
  within<std::size_t>("max_requests_total", max_requests_total, 1, 1 << 20);
  within<std::size_t>("max_connections", max_connections, 1, 1 << 20);
  within<std::size_t>("ws_send_queue_bytes", ws_send_queue_bytes, 1024, std::size_t{1} << 30);
  within<std::int64_t>("request_timeout_ms", request_timeout.count(), 0, std::int64_t{1} << 40);
  within<std::int64_t>("shutdown_grace_ms", shutdown_grace.count(), 0, std::int64_t{1} << 40);
  within<std::int64_t>("ws_ping_interval_ms", ws_ping_interval.count(), 100, std::int64_t{1} << 40);
  within<std::int64_t>("http_idle_timeout_ms", http_idle_timeout.count(), 100, std::int64_t{1} << 40);
  if (sse_ping_interval.count() != 0) {
    within<std::int64_t>("sse_ping_interval_ms", sse_ping_interval.count(), kMinSsePingMs, kMaxSsePingMs);
  }
  for (const auto& origin : cors_origins) {
    if (!valid_origin(origin)) {
      refuse("cors_origins", "must hold * or origins written scheme://host[:port] (http or https, no path, no "
                             "trailing slash), got '" + origin + "'");
    }
  }
  static constexpr const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  bool level_known = false;
  for (const char* level : kLevels) level_known = level_known || log_level == level;
  if (!level_known) refuse("log_level", "must be trace, debug, info, warn, error, critical or off, got '" + log_level + "'");
}

void apply_json(GatewayConfig& c, const nlohmann::json& object) {
  if (!object.is_object()) throw std::invalid_argument("the configuration must be a JSON object");
  for (const auto& item : object.items()) {
    // References, not a structured binding: clang 14 (the fuzz build) cannot capture a binding in a lambda.
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    const auto text = [&](std::string& out) {
      if (!value.is_string()) refuse(key, "must be a string");
      out = value.get<std::string>();
    };
    const auto integer = [&](auto& out) {
      if (!value.is_number_integer()) refuse(key, "must be an integer");
      const auto v = value.get<std::int64_t>();
      using T = std::remove_reference_t<decltype(out)>;
      if (v < 0 && !std::is_signed_v<T>) refuse(key, "must not be negative");
      out = static_cast<T>(v);
      if (static_cast<std::int64_t>(out) != v) refuse(key, "is out of range");
    };
    const auto millis = [&](std::chrono::milliseconds& out) {
      std::int64_t v = 0;
      integer(v);
      out = std::chrono::milliseconds(v);
    };
    if (key == "model") text(c.model);
    else if (key == "tokenizer") text(c.tokenizer);
    else if (key == "model_id") text(c.model_id);
    else if (key == "chat_template") text(c.chat_template);
    else if (key == "chat_template_file") text(c.chat_template_file);
    else if (key == "device") text(c.device);
    else if (key == "vulkan_arithmetic") text(c.vulkan_arithmetic);
    else if (key == "compute_threads") integer(c.compute_threads);
    else if (key == "kv_cache_mb") integer(c.kv_cache_mb);
    else if (key == "kv_cache_percent") integer(c.kv_cache_percent);
    else if (key == "demo_model_path") text(c.demo_model_path);
    else if (key == "host") text(c.host);
    else if (key == "port") {
      std::int64_t port = 0;
      integer(port);
      within<std::int64_t>("port", port, 0, 65535);
      c.port = static_cast<std::uint16_t>(port);
    } else if (key == "threads") integer(c.threads);
    else if (key == "log_level") text(c.log_level);
    else if (key == "api_key") text(c.api_key);
    else if (key == "allowed_origins") {
      if (!value.is_array()) refuse(key, "must be an array of strings");
      c.allowed_origins.clear();
      for (const auto& origin : value) {
        if (!origin.is_string()) refuse(key, "must be an array of strings");
        c.allowed_origins.push_back(origin.get<std::string>());
      }
    } else if (key == "cors_origins") {
      if (!value.is_array()) refuse(key, "must be an array of strings");
      c.cors_origins.clear();
      for (const auto& origin : value) {
        if (!origin.is_string()) refuse(key, "must be an array of strings");
        c.cors_origins.push_back(origin.get<std::string>());
      }
    } else if (key == "allowed_hosts") {
      if (!value.is_array()) refuse(key, "must be an array of strings");
      c.allowed_hosts.clear();
      for (const auto& host : value) {
        if (!host.is_string()) refuse(key, "must be an array of strings");
        c.allowed_hosts.push_back(host.get<std::string>());
      }
    } else if (key == "max_batch_tokens") integer(c.max_batch_tokens);
    else if (key == "max_body_bytes") integer(c.max_body_bytes);
    else if (key == "max_frame_bytes") integer(c.max_frame_bytes);
    else if (key == "max_prompt_tokens") integer(c.max_prompt_tokens);
    else if (key == "max_tokens_limit") integer(c.max_tokens_limit);
    else if (key == "max_requests_per_connection") integer(c.max_requests_per_connection);
    else if (key == "max_sessions_per_connection") integer(c.max_sessions_per_connection);
    else if (key == "max_requests_total") integer(c.max_requests_total);
    else if (key == "max_connections") integer(c.max_connections);
    else if (key == "ws_send_queue_bytes") integer(c.ws_send_queue_bytes);
    else if (key == "request_timeout_ms") millis(c.request_timeout);
    else if (key == "shutdown_grace_ms") millis(c.shutdown_grace);
    else if (key == "ws_ping_interval_ms") millis(c.ws_ping_interval);
    else if (key == "http_idle_timeout_ms") millis(c.http_idle_timeout);
    else if (key == "sse_ping_interval_ms") millis(c.sse_ping_interval);
    else throw std::invalid_argument("unknown key '" + key + "'");
  }
}

void apply_json_file(GatewayConfig& config, const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::invalid_argument("cannot read the config file " + path);
  std::stringstream text;
  text << file.rdbuf();
  const std::string content = text.str();
  const auto invalid = [&](std::size_t offset, const std::string& problem) {
    return std::invalid_argument("the config file " + path + " is not valid JSON: " + line_and_column(content, offset) +
                                 " (byte " + std::to_string(offset) + "): " + problem);
  };
  // The JSON reader takes a NUL byte for the end of the text and would ignore whatever follows it.
  if (const auto nul = content.find('\0'); nul != std::string::npos) throw invalid(nul, "a NUL byte (JSON has none)");
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(content);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann counts the bytes read, the offending one included.
    throw invalid(e.byte > 0 ? e.byte - 1 : 0, parse_problem(e));
  }
  try {
    apply_json(config, object);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("the config file " + path + ": " + e.what());
  }
}

}  // namespace loom::net
