// GatewayConfig: everything loom-gateway can be told, from flags, LOOM_* environment variables or a JSON
// config file (the same names, with '-' in a flag written '_' in JSON: --kv-cache-mb and "kv_cache_mb", and
// LOOM_KV_CACHE_MB; durations are milliseconds, named with _ms: --shutdown-grace-ms and "shutdown_grace_ms"). Defaults suit one machine
// serving itself: 127.0.0.1 only, no API key, limits that keep one client from taking the server.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace loom::net {

struct GatewayConfig {
  // ---- The model ----
  std::string model;             // a GGUF (or llama2.c) file; empty: the built-in demo model
  std::string tokenizer;         // optional separate tokenizer file (llama2.c checkpoints)
  std::string model_id;          // the name in /v1/models and in responses; empty: the file's stem
  std::string chat_template;     // a built-in layout (chatml, llama2, llama3, ...), overriding the model's
  std::string chat_template_file;  // a Jinja chat template file, overriding the model's template
  std::string device = "cpu";    // cpu | vulkan | vulkan:N (compute/devices.hpp)
  std::string vulkan_arithmetic = "auto";  // auto | pinned | fast, on a Vulkan device (compute::DeviceArithmetic)
  int compute_threads = 0;       // forward-pass threads; 0: the physical core count
  std::int32_t max_batch_tokens = 512;  // tokens of one step, all sequences together: the prefill chunk
  std::int64_t kv_cache_mb = 0;  // KV cache budget; 0: sized from the machine (kv_cache_percent, capped)
  // Without kv_cache_mb: the KV cache takes this share of the memory available after the weights
  // (MemAvailable - the model file - a margin), capped at a full context for every sequence that can run at
  // once (max_requests_total, and the scheduler's running batch of 64) and at
  // kMaxDefaultKvBytes, and at least one full context where memory allows (compute/kv_memory_budget.hpp).
  int kv_cache_percent = 25;
  std::string demo_model_path;   // where the demo model is made; empty: $XDG_CACHE_HOME/loom or ~/.cache/loom
  bool model_is_demo = false;    // set by loom-gateway (not a flag): `model` is the random-weight demo

  // ---- The listener ----
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  int threads = 0;  // I/O threads; 0: hardware threads, at least 1
  std::string log_level = "info";

  // ---- Security ----
  std::string api_key;  // non-empty: every /v1 route wants "Authorization: Bearer KEY"
  // Browser Origins a WebSocket upgrade may come from. A request with no Origin (not a browser) and one
  // whose Origin names the host it was sent to (our own page) pass, the latter only when that Host passes
  // the Host check (allowed_hosts); "*" allows any.
  // The WebSocket also admits the cors_origins below: a page trusted with the HTTP API is trusted with it.
  std::vector<std::string> allowed_origins;
  // Browser Origins ("https://app.example", "http://localhost:3000") whose pages may call the HTTP API
  // across origins (CORS: preflights answered, Access-Control-Allow-Origin on the responses); "*" allows
  // any. Empty: none, so only the server's own page (same-origin, no CORS needed) can read responses.
  // CORS lets a listed page read what it asks; the Host check and the API key still apply to its requests.
  std::vector<std::string> cors_origins;
  // Host names (without port) a request may name in its Host header when no api_key is set, besides the
  // ones always allowed: IP literals, "localhost" and names under ".localhost". Others get 403: a browser
  // page whose name an attacker re-pointed at this address (DNS rebinding) sends its own name. "*" allows
  // any. With an api_key the key protects every /v1 route and Host is not checked.
  std::vector<std::string> allowed_hosts;

  // ---- Limits a client can reach ----
  std::size_t max_body_bytes = 2u << 20;     // an HTTP request body (413 past it)
  std::size_t max_frame_bytes = 4u << 20;    // one WebSocket message (closed with 1009 past it)
  std::int32_t max_prompt_tokens = 0;        // a request's prompt after templating; 0: the model's context
  std::int32_t max_tokens_limit = 4096;      // upper bound of max_tokens
  std::size_t max_requests_per_connection = 16;  // in flight on one WebSocket
  std::size_t max_sessions_per_connection = 16;  // open sessions of one WebSocket (overloaded past it)
  std::size_t max_requests_total = 256;      // in flight on the whole gateway (503 / overloaded past it)
  std::size_t max_connections = 1024;        // open TCP connections
  std::size_t ws_send_queue_bytes = 4u << 20;  // unsent frames of one WebSocket; past it its requests are cancelled
  std::chrono::milliseconds request_timeout{0};  // per request; 0: none
  std::chrono::milliseconds shutdown_grace{10000};  // SIGTERM: in-flight requests may finish this long
  std::chrono::milliseconds ws_ping_interval{20000};  // idle WebSockets are pinged this often
  std::chrono::milliseconds http_idle_timeout{60000};  // an idle keep-alive connection is closed
  // A streamed (SSE) response with nothing written for this long (queued, prefilling, a slow step) gets
  // a ": ping" comment, so that proxies and clients with read timeouts do not give up; 0: never.
  std::chrono::milliseconds sse_ping_interval{10000};

  // The default KV cache's ceiling: a machine with 1 TB does not commit 250 GB to it unasked.
  static constexpr std::uint64_t kMaxDefaultKvBytes = std::uint64_t{16} << 30;
  // Full contexts when the available memory cannot be read (no /proc/meminfo, no sysconf answer).
  static constexpr std::int64_t kKvContextsWhenMemoryUnknown = 4;

  // Throws std::invalid_argument naming the field and the rule.
  void validate() const;
};

// Applies a JSON object's fields to `config` (unknown keys are refused, naming the key). Throws
// std::invalid_argument naming the key and what was expected.
void apply_json(GatewayConfig& config, const nlohmann::json& object);
// Reads FILE.json and applies it; throws std::invalid_argument naming the file.
void apply_json_file(GatewayConfig& config, const std::string& path);

}  // namespace loom::net
