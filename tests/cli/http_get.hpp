// http_get: one plain GET (or POST) to a gateway the test started on 127.0.0.1, with nothing but POSIX sockets, so
// the binary tests check its answers without linking the gateway's own HTTP code.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace loom::cli::testing {

inline std::string http_send(int port, const std::string& request);

// GET path on 127.0.0.1:port (Connection: close); the whole response text, empty when nothing answered.
inline std::string http_get(int port, const std::string& path) {
  return http_send(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
}

// POST a JSON body to path; the whole response text.
inline std::string http_post_json(int port, const std::string& path, const std::string& body) {
  return http_send(port, "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                         "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                             "\r\n\r\n" + body);
}

// Writes `request` as it is; the whole response text, empty when nothing answered.
inline std::string http_send(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return {};
  }
  (void)::write(fd, request.data(), request.size());
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) response.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  return response;
}

}  // namespace loom::cli::testing
