// Hello: the first message a server sends on a new connection, before anything the client sends is
// answered: which protocol and server this is, the model it serves, the limits a client must respect (by
// the same names as the server's configuration keys and its HTTP errors) and the features it offers.
// Wire format: PROTOCOL.md ("hello").
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"

namespace loom::proto {

struct Hello {
  // Raised when a change could break a client written against an earlier version.
  static constexpr std::int64_t kProtocolVersion = 1;

  std::int64_t protocol_version = kProtocolVersion;
  std::string server_version;  // e.g. "0.1.0"
  std::string model;           // the model's id, as in /v1/models
  // "ready", or "loading" / "draining" / "failed" (requests are then refused with `unavailable`).
  std::string status = "ready";
  // Positions one sequence may use (prompt and generated tokens together); absent until the model loaded.
  std::optional<std::int64_t> context_length;
  // Limit name -> value. Names and meanings: PROTOCOL.md's Limits table. A map, so that a client keeps
  // working when a server reports a limit it does not know.
  std::map<std::string, std::uint64_t> limits;
  // Feature name -> offered. Same reasoning as limits.
  std::map<std::string, bool> features;

  bool operator==(const Hello&) const = default;
};

void to_json(nlohmann::json& j, const Hello& message);
Parsed<Hello> parse_hello(const nlohmann::json& j, const ParseOptions& options = {});

}  // namespace loom::proto
