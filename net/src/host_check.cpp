#include "host_check.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include <boost/asio/ip/address.hpp>

namespace loom::net {

std::string host_name_of(std::string_view host_header) {
  std::string_view name = host_header;
  if (!name.empty() && name.front() == '[') {  // an IPv6 literal: "[::1]:8080"
    const auto close = name.find(']');
    name = close == std::string_view::npos ? name.substr(1) : name.substr(1, close - 1);
  } else if (const auto colon = name.rfind(':'); colon != std::string_view::npos) {
    name = name.substr(0, colon);
  }
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (!lower.empty() && lower.back() == '.') lower.pop_back();
  return lower;
}

bool host_trusted(const GatewayConfig& config, std::string_view host_header) {
  const std::string name = host_name_of(host_header);
  if (name.empty()) return false;
  boost::system::error_code ec;
  boost::asio::ip::make_address(name, ec);
  if (!ec) return true;
  constexpr std::string_view kLocalhost = "localhost";
  constexpr std::string_view kLocalhostSuffix = ".localhost";
  if (name == kLocalhost) return true;
  if (name.size() > kLocalhostSuffix.size() &&
      name.compare(name.size() - kLocalhostSuffix.size(), kLocalhostSuffix.size(), kLocalhostSuffix) == 0) {
    return true;
  }
  for (const auto& allowed : config.allowed_hosts) {
    if (allowed == "*" || host_name_of(allowed) == name) return true;
  }
  return false;
}

bool host_allowed(const GatewayContext& context, const HttpRequest& request) {
  if (!context.config.api_key.empty()) return true;
  const auto host = request.find(http::field::host);
  if (host == request.end()) return true;
  return host_trusted(context.config, host->value());
}

HttpResponse host_refusal(const HttpRequest& request) {
  return make_openai_error(request, http::status::forbidden,
                           "the Host '" + std::string(request[http::field::host]) +
                               "' is not this server's: list it in --allowed-hosts (or set --api-key)",
                           "permission_error", std::nullopt, "host_not_allowed");
}

}  // namespace loom::net
