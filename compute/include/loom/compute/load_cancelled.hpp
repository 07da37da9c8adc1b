// LoadCancelled: what a model load throws when the stop it was given (LoadOptions::stop) is requested
// while it runs. A load is checked between its stages (the file opened, the vocabulary read, the model's
// buffers made) and between slices of the KV cache it commits, so a shutdown that arrives during a load
// of many GiB waits for one slice, not for the whole load.
#pragma once

#include <stdexcept>
#include <stop_token>
#include <string>

namespace loom::compute {

class LoadCancelled : public std::runtime_error {
 public:
  explicit LoadCancelled(const std::string& stage) : std::runtime_error("the load was cancelled while " + stage) {}
};

inline void throw_if_stopped(const std::stop_token& stop, const char* stage) {
  if (stop.stop_requested()) throw LoadCancelled(stage);
}

}  // namespace loom::compute
