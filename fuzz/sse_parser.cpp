// The load generator's server-sent-events reader (bench/loadgen/sse_parser.hpp) on arbitrary bytes: what a
// misbehaving or hostile OpenAI-compatible server may stream to loom-loadgen. The first byte picks the line
// limit (1..256 bytes) and a split point; the rest is the stream. Beyond not crashing:
// - fed whole or in two pieces split anywhere (a line or a "\r\n" cut between reads), the parser gives the
//   same events and the same verdict;
// - no event is longer than the limit, and after a refusal the parser stays refused.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "sse_parser.hpp"

namespace {

using loom::fuzz::check;
using loom::loadgen::SseParser;

struct Outcome {
  std::vector<std::string> events;
  bool ok = true;
  bool partial = false;
};

Outcome parse(std::size_t limit, std::string_view stream, std::size_t split) {
  SseParser parser(limit);
  Outcome outcome;
  outcome.ok = parser.feed(stream.substr(0, split), outcome.events);
  if (outcome.ok) outcome.ok = parser.feed(stream.substr(split), outcome.events);
  if (outcome.ok) outcome.partial = parser.has_partial_event();
  // Refused once, refused for good.
  if (!outcome.ok) check(!parser.feed("data: more\n\n", outcome.events), "the parser accepted bytes after refusing");
  return outcome;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t limit = 1 + data[0];
  const std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::size_t split = stream.empty() ? 0 : (data[0] * 7919u) % (stream.size() + 1);

  const Outcome whole = parse(limit, stream, stream.size());
  const Outcome pieces = parse(limit, stream, split);
  check(whole.ok == pieces.ok, "splitting the stream changed the verdict");
  if (whole.ok) {
    check(whole.events == pieces.events, "splitting the stream changed the events");
    check(whole.partial == pieces.partial, "splitting the stream changed what is held");
  }
  for (const std::string& event : whole.events) check(event.size() <= limit, "an event is longer than the limit");
  return 0;
}
