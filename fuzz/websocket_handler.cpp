// The gateway's WebSocket message handling, in process: a real Gateway (net/) on 127.0.0.1 serving a tiny
// random-weight model written at start-up, driven by a Beast client. The frame handler (parse, open
// sessions, run, cancel, send events) lives inside the connection (net/src/websocket_connection.cpp), so the
// fuzzer reaches it the way a client does, one connection per input, which keeps every input independent.
//
// Input: up to kMaxFrames text frames, one per line. After them the client sends a sentinel (a generate
// request the parser refuses, with a known id) and reads until the sentinel's error has come and every
// generate request it sent (that the protocol parser accepts) has had its one last event (done or error).
// Checked:
// - every frame the server sends is a valid server message (parse_server_message, strict);
// - every accepted generate request ends with exactly one done or error event, within kAnswerLimit
//   (a missing answer is a finding: a client would wait for ever).
// max_tokens is capped at 8 and the model has one small layer, so a generate takes a few milliseconds.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket.hpp>
#include <spdlog/spdlog.h>

#include "fuzz_support.hpp"
#include "loom/compute/model_synth.hpp"
#include "loom/net/gateway.hpp"
#include "loom/net/gateway_config.hpp"
#include "loom/proto/client_message.hpp"
#include "loom/proto/server_message.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using loom::fuzz::check;

constexpr std::size_t kMaxFrames = 8;
constexpr auto kAnswerLimit = std::chrono::seconds(20);
constexpr std::string_view kSentinelId = "fuzz-sentinel";
// Refused by the parser (temperature must not be negative), answered at once with an error naming the id.
constexpr std::string_view kSentinel =
    R"({"type":"generate","id":"fuzz-sentinel","prompt":"","params":{"temperature":-1}})";

loom::net::GatewayConfig gateway_config(const std::string& model) {
  loom::net::GatewayConfig config;
  config.model = model;
  config.host = "127.0.0.1";
  config.port = 0;
  config.compute_threads = 1;
  config.log_level = "off";
  config.max_tokens_limit = 8;
  return config;
}

// The gateway, its io_context on one thread, and the model file; made once, never torn down (the process
// ends with the fuzzer).
struct Server {
  asio::io_context io;
  std::unique_ptr<loom::net::Gateway> gateway;
  std::thread thread;
  loom::proto::ParseOptions parse_options;  // what the gateway's parser applies (gateway_context.cpp)
  unsigned short port = 0;

  Server() {
    const auto folder = std::filesystem::temp_directory_path() / ("loom-fuzz-ws-" + std::to_string(::getpid()));
    std::filesystem::create_directories(folder);
    const std::string model = (folder / "tiny.gguf").string();
    loom::compute::SynthSpec spec;
    spec.dim = 32;
    spec.ffn_dim = 64;
    spec.layers = 1;
    spec.heads = 2;
    spec.kv_heads = 2;
    spec.context_length = 512;
    spec.builtin_vocabulary = true;
    loom::compute::write_synthetic_model(spec, model);

    const loom::net::GatewayConfig config = gateway_config(model);
    parse_options.max_message_bytes = config.max_frame_bytes;
    parse_options.max_tokens_limit = config.max_tokens_limit;
    spdlog::set_level(spdlog::level::off);
    gateway = std::make_unique<loom::net::Gateway>(io, config);
    std::promise<std::string> loaded;
    gateway->start([&loaded](std::string error) { loaded.set_value(std::move(error)); });
    thread = std::thread([this] { io.run(); });
    if (const std::string error = loaded.get_future().get(); !error.empty()) {
      std::fprintf(stderr, "fuzz: the gateway's model did not load: %s\n", error.c_str());
      std::exit(2);
    }
    std::filesystem::remove_all(folder);  // mapped: the model stays readable
    port = gateway->local_endpoint().port();
  }
};

// At exit the gateway's I/O thread must stop before the statics it uses (the net logger, made by the first
// connection) are destroyed, or a connection still closing reads freed memory. An atexit function registered
// after such a static was made runs before its destructor, hence registration after the first input.
void stop_at_exit();

Server& server() {
  static Server* const instance = new Server();  // never destroyed: its threads run until exit
  return *instance;
}

// A WebSocket client whose every operation gives up at a deadline. Only asynchronous operations, run on the
// client's own io_context: libFuzzer's -timeout alarm (SIGALRM, every few seconds) interrupts blocking system
// calls, and Asio's blocking socket operations report EINTR as an error instead of retrying (a blocking
// handshake once failed with "Interrupted system call"); its reactor retries an interrupted wait.
class Client {
 public:
  explicit Client(unsigned short port) : ws_(io_) {
    const auto deadline = std::chrono::steady_clock::now() + kAnswerLimit;
    bool timed_out = false;
    const asio::ip::tcp::endpoint server(asio::ip::make_address("127.0.0.1"), port);
    beast::error_code ec = run(deadline, timed_out, [&](auto done) { ws_.next_layer().async_connect(server, done); });
    check(!timed_out && !ec, "the gateway did not accept a connection: " + ec.message());
    // Small frames back to back: without this, Nagle's algorithm and delayed ACKs add ~40 ms to an input.
    ws_.next_layer().socket().set_option(asio::ip::tcp::no_delay(true));
    ec = run(deadline, timed_out, [&](auto done) { ws_.async_handshake("127.0.0.1", "/v1/ws", done); });
    check(!timed_out && !ec, "the gateway refused the WebSocket handshake: " + ec.message());
    ws_.text(true);
  }

  // False when the server closed the connection (e.g. the client broke a limit) or the deadline passed.
  bool send(std::string_view text) {
    bool timed_out = false;
    const auto deadline = std::chrono::steady_clock::now() + kAnswerLimit;
    const beast::error_code ec =
        run(deadline, timed_out, [&](auto done) { ws_.async_write(asio::buffer(text.data(), text.size()), done); });
    return !ec && !timed_out;
  }

  // The next frame; nullopt when the connection ended or the deadline passed (`timed_out` says which).
  std::optional<std::string> receive(std::chrono::steady_clock::time_point deadline, bool& timed_out) {
    beast::flat_buffer buffer;
    const beast::error_code ec = run(deadline, timed_out, [&](auto done) { ws_.async_read(buffer, done); });
    if (ec || timed_out) return std::nullopt;
    return beast::buffers_to_string(buffer.data());
  }

  void close() {
    beast::error_code ignored;
    ws_.next_layer().socket().close(ignored);
  }

 private:
  // Starts one operation (`start` is given its completion handler) and runs the io_context until it completes
  // or `deadline` passes; past the deadline the operation is cancelled and `timed_out` set.
  template <class Start>
  beast::error_code run(std::chrono::steady_clock::time_point deadline, bool& timed_out, Start start) {
    bool done = false;
    beast::error_code result;
    start([&](beast::error_code ec, auto&&...) {
      done = true;
      result = ec;
    });
    io_.restart();
    io_.run_until(deadline);
    if (!done) {
      timed_out = true;
      ws_.next_layer().cancel();
      io_.restart();
      io_.run();
    }
    return result;
  }

  asio::io_context io_;
  websocket::stream<beast::tcp_stream> ws_;
};

void stop_at_exit() {
  Server& gateway = server();
  gateway.io.stop();
  gateway.thread.join();
}

std::vector<std::string_view> frames_of(std::string_view input) {
  std::vector<std::string_view> frames;
  while (frames.size() < kMaxFrames) {
    const std::size_t end = input.find('\n');
    frames.push_back(input.substr(0, end));
    if (end == std::string_view::npos) break;
    input.remove_prefix(end + 1);
  }
  return frames;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)server();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Server& gateway = server();
  const std::vector<std::string_view> frames = frames_of(std::string_view(reinterpret_cast<const char*>(data), size));

  // Generate requests the gateway's parser accepts: each must end with one done or error event.
  std::map<std::string, int> awaiting;
  for (const std::string_view frame : frames) {
    const auto parsed = loom::proto::parse_client_message(frame, gateway.parse_options);
    if (!parsed) continue;
    if (const auto* request = std::get_if<loom::proto::GenerateRequest>(&parsed.value())) ++awaiting[request->id];
  }

  Client client(gateway.port);
  for (const std::string_view frame : frames) {
    if (!client.send(frame)) return 0;  // the server closed the connection (e.g. a broken limit)
  }
  if (!client.send(kSentinel)) return 0;

  bool sentinel_answered = false;
  auto unanswered = [&] {
    int count = 0;
    for (const auto& [id, expected] : awaiting) count += expected;
    return count;
  };
  const auto deadline = std::chrono::steady_clock::now() + kAnswerLimit;
  while (!sentinel_answered || unanswered() > 0) {
    bool timed_out = false;
    const std::optional<std::string> frame = client.receive(deadline, timed_out);
    check(!timed_out, "the gateway left a request unanswered for 20 s");
    if (!frame) break;
    const auto message = loom::proto::parse_server_message(*frame);
    check(message.ok(), "the gateway sent a frame that is not a valid server message: " + *frame);
    std::string ended;
    if (const auto* done = std::get_if<loom::proto::DoneEvent>(&message.value())) ended = done->request_id;
    if (const auto* error = std::get_if<loom::proto::ErrorEvent>(&message.value())) ended = error->request_id;
    if (ended == kSentinelId) sentinel_answered = true;
    if (const auto found = awaiting.find(ended); found != awaiting.end() && found->second > 0) --found->second;
  }
  client.close();
  static const bool stop_registered = std::atexit(stop_at_exit) == 0;
  (void)stop_registered;
  return 0;
}
