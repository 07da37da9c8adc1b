// One embedding request inside the engine: its inputs checked and tokenized, one SubmitSequence (embed) per
// input to the scheduler, and the answers gathered into one EmbedResult. The EngineActor starts it on its
// strand; the sequences' sinks run on the scheduler's strand, which alone touches the gathering state from
// then on, so it needs no lock. The first failure cancels the request's other sequences; the reply goes once
// every sequence has ended.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

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
  // Called once the job is over (answered, refused, or dropped with its sequences), from whichever strand ends
  // it: the engine's continuation, which forgets the job's id.
  std::function<void()> ended{};
};

// The embedding jobs in flight that have an id (EmbedRequest::id), so that Engine::cancel reaches them: each
// id's sequences. The engine's own registry, touched only on its strand.
class EmbeddingJobs {
 public:
  bool contains(const std::string& id) const { return jobs_.contains(id); }
  // Registers the job's sequences [first, first + count); returns its serial, which ended() takes, so that an
  // ended job does not forget a later one given the same id.
  std::uint64_t add(const std::string& id, cache::SequenceId first, std::size_t count);
  void ended(const std::string& id, std::uint64_t serial);
  // Cancels every sequence of the job; false when no job has the id.
  bool cancel(const std::string& id, const Address<SchedulerProtocol>& scheduler) const;
  std::size_t size() const noexcept { return jobs_.size(); }

 private:
  struct Job {
    std::uint64_t serial = 0;
    cache::SequenceId first = 0;
    std::size_t count = 0;
  };
  std::unordered_map<std::string, Job> jobs_;
  std::uint64_t next_serial_ = 1;
};

// Answers `reply` at once when the request is refused (the error names the field), else once its
// sequences have ended.
void start_embedding_job(EmbedRequest request, Reply<EmbedResult> reply, const EmbeddingJobContext& context);

}  // namespace loom::actors
