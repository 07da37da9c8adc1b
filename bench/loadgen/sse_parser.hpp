// SseParser: server-sent events (the HTML standard's text/event-stream) read incrementally from the bytes
// of a response body as they arrive. Only what OpenAI streams use: "data:" lines, joined with "\n" when an
// event has several, an event ending at a blank line; "event:", "id:", "retry:" and ":" comment lines are
// skipped. Lines end with "\n", "\r\n" or "\r". A line longer than the limit is an error (the server could
// otherwise grow the buffer without bound).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace loom::loadgen {

class SseParser {
 public:
  explicit SseParser(std::size_t max_line_bytes) : max_line_bytes_(max_line_bytes) {}

  // Appends each event completed by `bytes` (its data) to `events`. Returns false, and stays failed, once a
  // line (or an event's joined data) exceeds the limit.
  bool feed(std::string_view bytes, std::vector<std::string>& events);

  // The bytes of an unfinished line or event are held: the stream ended in the middle of one.
  bool has_partial_event() const { return !line_.empty() || has_data_; }

 private:
  void end_line(std::vector<std::string>& events);

  std::size_t max_line_bytes_;
  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool after_cr_ = false;  // the last byte was '\r': a '\n' right after it ends nothing more
  bool failed_ = false;
};

}  // namespace loom::loadgen
