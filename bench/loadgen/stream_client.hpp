// StreamClient: one of the load's streams, as either protocol speaks it. It owns one connection, opened
// on its first request and reused by the next ones while the server keeps it open; run() sends one
// request, streams its answer and says what happened (RequestOutcome), never throwing for a failure of
// the server or the network. A request's time limit covers its connecting too.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "loadgen_options.hpp"
#include "request_outcome.hpp"
#include "request_plan.hpp"

namespace loom::loadgen {

class RunResults;

using Clock = std::chrono::steady_clock;

inline double milliseconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// What every stream needs: the options, the server's addresses (resolved once, before the run), and the
// results to count streamed tokens into while a request runs.
struct StreamContext {
  const Options& options;
  boost::asio::ip::tcp::resolver::results_type endpoints;
  RunResults& results;
};

class StreamClient {
 public:
  virtual ~StreamClient() = default;
  virtual boost::asio::awaitable<RequestOutcome> run(const RequestSpec& spec) = 0;
};

// The client for options.target.protocol.
std::unique_ptr<StreamClient> make_stream_client(boost::asio::any_io_executor executor, const StreamContext& context);

// The "host:port" of a Host header (an IPv6 address in brackets).
std::string host_header(const Target& target);

}  // namespace loom::loadgen
