// The log-probability fields of a token event (params.logprobs): the backend gives ids and log-probabilities,
// the client is shown each token's vocabulary piece, as text it can print and as the exact bytes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "loom/compute/backend.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/proto/token_event.hpp"

namespace loom::actors::detail {

// `bytes` as UTF-8, each byte that does not belong to a well-formed character replaced by U+FFFD.
std::string lossy_utf8(std::string_view bytes);

// Sets event.logprob, piece, bytes and top_logprobs. Special tokens show their names ("</s>"): a client
// reading alternatives must tell the end of generation from an empty piece.
void set_logprobs(proto::TokenEvent& event, const compute::Tokenizer& tokenizer, float logprob,
                  const std::vector<compute::TokenLogprob>& top);

}  // namespace loom::actors::detail
