#include "loom/actors/runtime/actor_error.hpp"

#include <string>

namespace loom::actors {
namespace {

class ActorCategory final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "loom.actors"; }
  std::string message(int code) const override {
    switch (static_cast<ActorError>(code)) {
      case ActorError::timeout:
        return "ask timed out: no reply within the timeout";
      case ActorError::no_reply:
        return "request dropped without a reply (the actor stopped, failed, or discarded it)";
      case ActorError::stopped:
        return "actor is stopped";
    }
    return "unknown actor error " + std::to_string(code);
  }
};

}  // namespace

const boost::system::error_category& actor_category() noexcept {
  static const ActorCategory category;
  return category;
}

}  // namespace loom::actors
