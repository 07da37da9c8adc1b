// StopMatcher: finds the caller's stop strings in generated text as it streams in, so that generation can
// end on one and none of its bytes is ever shown. Text arrives in pieces (one token's text at a time); a
// piece that could be the start of a stop string is held back until the next pieces show whether it is.
//
// Matching is on bytes (stop strings and text may be any UTF-8; a held-back tail starts where a stop string
// could start, so with valid UTF-8 stop strings the text released never ends inside a character that was
// whole in the input). The rule: the first stop string to be completed wins, that is the match that ends
// earliest in the text; among matches ending at the same byte, the longest (it starts earlier, so less
// text is shown), and among equal stop strings the first in the list. A stop is reported on the push that
// completes it, never later, and the outcome does not depend on how the text was split into pushes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace loom::compute {

class StopMatcher {
 public:
  // An empty stop string is std::invalid_argument (it would match before any text). No stop strings at
  // all is fine: every push then returns its text at once.
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;            // safe to show now: cannot be part of a stop string
    bool stopped = false;        // a stop string matched; `text` ends right before it
    std::size_t stop_index = 0;  // which one, when stopped
  };

  // Feeds newly produced text. Text that could still be the beginning of a stop string is held back until
  // it is known not to be. After a match, every further push returns no text, with `stopped` (and the
  // same `stop_index`) still set.
  Result push(std::string_view text);

  // The held-back text, when generation ends for another reason ("" after a match); it is no longer held.
  std::string finish();

  bool stopped() const noexcept { return stopped_; }
  // Whether text is held back (it could still begin a stop string): finish() would return it.
  bool holding() const noexcept { return !held_.empty(); }
  const std::vector<std::string>& stops() const noexcept { return stops_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // never contains a whole stop string; empty after a match
  bool stopped_ = false;
  std::size_t stop_index_ = 0;
};

}  // namespace loom::compute
