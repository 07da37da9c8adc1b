// One embedding request inside the engine: its inputs checked and tokenized, one SubmitSequence (embed) per
// input to the scheduler, and the answers gathered into one EmbedResult. The EngineActor starts it on its
// strand; the sequences' sinks run on the scheduler's strand, which alone touches the gathering state from
// then on, so it needs no lock. The first failure cancels the request's other sequences; the reply goes once
// every sequence has ended.
#pragma once

#include <memory>

#include "loom/actors/engine/embedding_protocol.hpp"
#include "loom/actors/engine/scheduler_protocol.hpp"
#include "loom/actors/engine/session_actor.hpp"
#include "loom/actors/runtime/reply.hpp"
#include "loom/compute/model_config.hpp"

namespace loom::actors {

struct EmbeddingJobContext {
  std::shared_ptr<const SessionContext> session;  // tokenizer, context length, the scheduler
  compute::Pooling pooling = compute::Pooling::mean;
  cache::SequenceId first_sequence = 0;           // ids first_sequence .. + inputs.size() are the job's
};

// Answers `reply` at once when the request is refused (the error names the field), else once its
// sequences have ended.
void start_embedding_job(EmbedRequest request, Reply<EmbedResult> reply, const EmbeddingJobContext& context);

}  // namespace loom::actors
