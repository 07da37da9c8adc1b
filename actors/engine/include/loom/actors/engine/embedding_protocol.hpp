// Embeddings through the engine: an EmbedRequest's inputs (texts, tokenized as prompts are, or token ids)
// each run as a sequence of their own through the scheduler, sharing its steps with generation, and come
// back as one EmbedResult: a pooled, L2-normalised vector per input (the model's pooling type, mean for a
// decoder model that names none), or the first error. loom::Engine::async_embed sends it as EngineEmbed;
// Engine::cancel ends one that has an id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "loom/proto/error_event.hpp"

namespace loom::actors {

using EmbedInput = std::variant<std::string, std::vector<std::int32_t>>;

struct EmbedRequest {
  // Empty, or the request's id: Engine::cancel(id) then ends it (its inputs' sequences are cancelled and the
  // result is an `unavailable` error), as a client that leaves should. Unique among the requests in flight
  // (generation ones included): a second one is refused with `conflict`.
  std::string id{};
  // Each at least one token (a text: after tokenizing) and shorter than the context; at most kMaxInputs.
  std::vector<EmbedInput> inputs{};
  std::int32_t priority = 0;  // as a generate request's (the scheduler's order and thermal pauses)

  static constexpr std::size_t kMaxInputs = 2048;  // the engine's own bound; a server may set a lower one
};

struct EmbedResult {
  std::vector<std::vector<float>> embeddings{};  // one per input, in order (empty on error)
  std::vector<std::int32_t> prompt_tokens{};     // tokens of each input
  // Set when the request failed as a whole: invalid_request naming the field ("inputs[2]"), unsupported
  // (the model's pooling gives no sequence embedding), overloaded, unavailable, internal.
  std::optional<proto::ErrorEvent> error{};

  bool ok() const noexcept { return !error.has_value(); }
};

}  // namespace loom::actors
