#include "embedding_job.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loom/compute/text/tokenizer.hpp"
#include "loom/compute/text/vocabulary.hpp"

namespace loom::actors {

namespace {

EmbedResult refusal(proto::ErrorCode code, std::string message, std::string field = {}) {
  EmbedResult result;
  result.error = proto::ErrorEvent{.request_id = {}, .code = code, .message = std::move(message), .field = std::move(field)};
  return result;
}

// The inputs as token ids, or the refusal naming the first bad one.
std::variant<std::vector<std::vector<std::int32_t>>, EmbedResult> tokenize(const EmbedRequest& request,
                                                                           const SessionContext& context) {
  if (request.inputs.empty()) return refusal(proto::ErrorCode::invalid_request, "there is no input", "inputs");
  if (request.inputs.size() > EmbedRequest::kMaxInputs) {
    return refusal(proto::ErrorCode::invalid_request,
                   std::to_string(request.inputs.size()) + " inputs; at most " +
                       std::to_string(EmbedRequest::kMaxInputs) + " per request",
                   "inputs");
  }
  const auto vocabulary = static_cast<std::int32_t>(context.tokenizer->vocabulary().size());
  std::vector<std::vector<std::int32_t>> prompts;
  prompts.reserve(request.inputs.size());
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    const std::string field = "inputs[" + std::to_string(i) + "]";
    const EmbedInput& input = request.inputs[i];
    if (const auto* text = std::get_if<std::string>(&input)) {
      if (text->empty()) return refusal(proto::ErrorCode::invalid_request, "the text is empty", field);
      prompts.push_back(compute::encode_prompt(*context.tokenizer, *text, false));
    } else {
      prompts.push_back(std::get<std::vector<std::int32_t>>(input));
    }
    const auto& tokens = prompts.back();
    if (tokens.empty()) return refusal(proto::ErrorCode::invalid_request, "the input has no tokens", field);
    if (static_cast<std::int64_t>(tokens.size()) >= context.context_length) {
      return refusal(proto::ErrorCode::invalid_request,
                     "the input is " + std::to_string(tokens.size()) + " tokens; it must be shorter than the context (" +
                         std::to_string(context.context_length) + ")",
                     field);
    }
    for (const std::int32_t token : tokens) {
      if (token < 0 || token >= vocabulary) {
        return refusal(proto::ErrorCode::invalid_request,
                       "token id " + std::to_string(token) + " is outside the vocabulary [0, " +
                           std::to_string(vocabulary) + ")",
                       field);
      }
    }
  }
  return prompts;
}

// Calls the job's `ended` when the last owner lets go: after the reply, or on a refusal, or when the scheduler
// drops the sinks unanswered.
struct EndNotice {
  std::function<void()> ended;
  explicit EndNotice(std::function<void()> f) : ended(std::move(f)) {}
  EndNotice(const EndNotice&) = delete;
  EndNotice& operator=(const EndNotice&) = delete;
  ~EndNotice() {
    if (ended) ended();
  }
};

// The gathering state, touched only on the scheduler's strand (the sinks run there).
struct Gathering {
  std::shared_ptr<EndNotice> notice;
  Reply<EmbedResult> reply;
  EmbedResult result;
  Address<SchedulerProtocol> scheduler;
  cache::SequenceId first = 0;
  std::size_t pending = 0;

  void fail(std::size_t index, proto::ErrorCode code, std::string message) {
    if (!result.error) {
      result.error = proto::ErrorEvent{.request_id = {}, .code = code, .message = std::move(message),
                                       .field = code == proto::ErrorCode::invalid_request
                                                    ? "inputs[" + std::to_string(index) + "]"
                                                    : std::string()};
      // The rest would be computed for nothing; unknown or ended ids are ignored.
      for (std::size_t i = 0; i < result.embeddings.size(); ++i) {
        scheduler.tell(CancelSequence{first + i, proto::FinishReason::cancelled});
      }
    }
  }

  void on_event(std::size_t index, SequenceEvent event) {
    if (auto* rejected = std::get_if<SequenceRejected>(&event)) {
      fail(index, rejected->code, std::move(rejected->message));
    } else if (auto* finished = std::get_if<SequenceFinished>(&event)) {
      if (finished->reason == proto::FinishReason::stop && !finished->embedding.empty()) {
        result.embeddings[index] = std::move(finished->embedding);
      } else if (!result.error) {
        const bool failed = finished->reason == proto::FinishReason::error || finished->reason == proto::FinishReason::timeout;
        std::string message = finished->error;
        if (message.empty()) {
          message = finished->reason == proto::FinishReason::cancelled
                        ? std::string("the request was cancelled")
                        : "the input's sequence ended " + std::string(proto::to_string(finished->reason));
        }
        fail(index, failed ? proto::ErrorCode::internal : proto::ErrorCode::unavailable, std::move(message));
      }
    } else {
      return;  // a token: an embedding sequence samples none
    }
    if (--pending > 0) return;
    if (result.error) {
      result.embeddings.clear();
      result.prompt_tokens.clear();
    }
    reply(std::move(result));
  }
};

}  // namespace

std::uint64_t EmbeddingJobs::add(const std::string& id, cache::SequenceId first, std::size_t count) {
  const std::uint64_t serial = next_serial_++;
  jobs_.insert_or_assign(id, Job{serial, first, count});
  return serial;
}

void EmbeddingJobs::ended(const std::string& id, std::uint64_t serial) {
  const auto it = jobs_.find(id);
  if (it != jobs_.end() && it->second.serial == serial) jobs_.erase(it);
}

bool EmbeddingJobs::cancel(const std::string& id, const Address<SchedulerProtocol>& scheduler) const {
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return false;
  for (std::size_t i = 0; i < it->second.count; ++i) {
    scheduler.tell(CancelSequence{it->second.first + i, proto::FinishReason::cancelled});
  }
  return true;
}

void start_embedding_job(EmbedRequest request, Reply<EmbedResult> reply, const EmbeddingJobContext& context) {
  auto notice = std::make_shared<EndNotice>(context.ended);
  if (!compute::pools_sequences(context.pooling)) {
    return reply(refusal(proto::ErrorCode::unsupported, "this model's pooling type is " + compute::to_string(context.pooling) +
                                                            ", which gives no sequence embedding"));
  }
  auto tokenized = tokenize(request, *context.session);
  if (auto* refused = std::get_if<EmbedResult>(&tokenized)) return reply(std::move(*refused));
  auto prompts = std::get<std::vector<std::vector<std::int32_t>>>(std::move(tokenized));

  auto gathering = std::make_shared<Gathering>();
  gathering->notice = std::move(notice);
  gathering->reply = std::move(reply);
  gathering->scheduler = context.session->scheduler;
  gathering->first = context.first_sequence;
  gathering->pending = prompts.size();
  gathering->result.embeddings.resize(prompts.size());
  for (const auto& prompt : prompts) gathering->result.prompt_tokens.push_back(static_cast<std::int32_t>(prompt.size()));
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    SubmitSequence submit;
    submit.sequence = context.first_sequence + i;
    submit.prompt = std::move(prompts[i]);
    submit.priority = request.priority;
    submit.fairness_key = "embedding:" + std::to_string(context.first_sequence);  // one request, one key
    submit.embed = true;
    submit.sink = [gathering, i](SequenceEvent event) { gathering->on_event(i, std::move(event)); };
    // A scheduler that is gone drops the message and its sink; when the last sink goes unanswered, so does
    // the Reply, and the asker hears no_reply.
    context.session->scheduler.tell(std::move(submit));
  }
}

}  // namespace loom::actors
