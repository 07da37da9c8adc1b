// RequestTracker: a generation request's client sink as the engine hands it to a session. It tells the engine
// when the request's last event passes (so the request id is free again before the client hears the end), and
// gives the client a last event of its own if the session drops the request without one.
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <variant>

#include "loom/actors/engine/session_protocol.hpp"
#include "loom/actors/runtime/logger.hpp"
#include "loom/proto/server_message.hpp"

namespace loom::actors {

// Wraps a request's client sink. It runs on the session's strand and may touch only itself: when the last
// event passes it tells the engine (before the client hears it, so that a client reusing the request id
// after its done event finds it free). If the session drops the request without a last event (it failed,
// or was stopped under it), the client still gets one, a done event with reason error, and the engine still
// hears of it; whoever destroys the last copy of the sink then does this, on their own strand.
class RequestTracker {
 public:
  using EndedCallback = std::function<void(std::string request_id, bool refused)>;

  RequestTracker(EndedCallback ended, std::string request_id, ClientSink client)
      : ended_callback_(std::move(ended)), request_id_(std::move(request_id)), client_(std::move(client)) {}
  RequestTracker(const RequestTracker&) = delete;
  RequestTracker& operator=(const RequestTracker&) = delete;

  ~RequestTracker() {
    if (ended_) return;
    ended_callback_(request_id_, false);
    proto::DoneEvent done;
    done.request_id = request_id_;
    done.finish_reason = proto::FinishReason::error;
    done.error_message = "the request's session stopped before the request ended";
    try {
      if (client_) client_(std::move(done));
    } catch (const std::exception& e) {
      logger().error("request={} the client's sink threw error=\"{}\"", request_id_, e.what());
    } catch (...) {
      logger().error("request={} the client's sink threw", request_id_);
    }
  }

  void operator()(proto::ServerMessage event) {
    if (ended_) return;  // nothing follows the last event
    if (proto::is_last_event(event)) {
      ended_ = true;
      ended_callback_(request_id_, std::holds_alternative<proto::ErrorEvent>(event));
    }
    if (client_) client_(std::move(event));
  }

 private:
  EndedCallback ended_callback_;  // a continuation of the engine's: runs on its strand
  std::string request_id_;
  ClientSink client_;
  bool ended_ = false;
};

}  // namespace loom::actors
