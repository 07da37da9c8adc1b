#include "loom/compute/text/stop_matcher.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace loom::compute {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (std::size_t i = 0; i < stops_.size(); ++i) {
    if (stops_[i].empty()) {
      throw std::invalid_argument("StopMatcher: stop string " + std::to_string(i) + " is empty");
    }
  }
}

StopMatcher::Result StopMatcher::push(std::string_view text) {
  Result result;
  if (stopped_) {
    result.stopped = true;
    result.stop_index = stop_index_;
    return result;
  }
  const std::size_t old_size = held_.size();
  held_.append(text);

  // `held_` had no whole stop string before this push, so a match must end inside the new bytes; each
  // stop's first occurrence from there is the one that ends first.
  std::size_t best_end = std::string::npos;
  std::size_t best_length = 0;
  for (std::size_t i = 0; i < stops_.size(); ++i) {
    const std::string& stop = stops_[i];
    const std::size_t from = old_size >= stop.size() ? old_size - stop.size() + 1 : 0;
    const std::size_t start = held_.find(stop, from);
    if (start == std::string::npos) continue;
    const std::size_t end = start + stop.size();
    if (end < best_end || (end == best_end && stop.size() > best_length)) {
      best_end = end;
      best_length = stop.size();
      stop_index_ = i;
    }
  }
  if (best_end != std::string::npos) {
    held_.resize(best_end - best_length);
    result.text = std::exchange(held_, {});
    result.stopped = stopped_ = true;
    result.stop_index = stop_index_;
    return result;
  }

  // Hold back the longest tail of the text that some stop string begins with (shorter than that stop:
  // a whole one would have matched above).
  const std::string_view all = held_;
  std::size_t hold = 0;
  for (const std::string& stop : stops_) {
    for (std::size_t length = std::min(all.size(), stop.size() - 1); length > hold; --length) {
      if (std::string_view(stop).starts_with(all.substr(all.size() - length))) {
        hold = length;
        break;
      }
    }
  }
  result.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return result;
}

std::string StopMatcher::finish() { return std::exchange(held_, {}); }

}  // namespace loom::compute
