#include "sse_parser.hpp"

namespace loom::loadgen {

bool SseParser::feed(std::string_view bytes, std::vector<std::string>& events) {
  if (failed_) return false;
  for (const char byte : bytes) {
    if (byte == '\n' && after_cr_) {
      after_cr_ = false;
      continue;
    }
    after_cr_ = byte == '\r';
    if (byte == '\n' || byte == '\r') {
      end_line(events);
      if (failed_) return false;
      continue;
    }
    if (line_.size() >= max_line_bytes_) {
      failed_ = true;
      return false;
    }
    line_ += byte;
  }
  return true;
}

void SseParser::end_line(std::vector<std::string>& events) {
  if (line_.empty()) {  // a blank line dispatches the event
    if (has_data_) events.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  std::string_view line = line_;
  const auto colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (value.starts_with(' ')) value.remove_prefix(1);
  if (field == "data") {
    if (has_data_) data_ += '\n';
    data_ += value;
    has_data_ = true;
    if (data_.size() > max_line_bytes_) failed_ = true;
  }
  line_.clear();
}

}  // namespace loom::loadgen
