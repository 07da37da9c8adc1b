#include "loom/actors/engine/event_stream.hpp"

#include <stdexcept>
#include <variant>

namespace loom::actors {

EventStream::EventStream(boost::asio::any_io_executor fallback)
    : state_(std::make_shared<State>(std::move(fallback))) {}

EventStream::Producer::~Producer() { state->abandon(); }

std::function<void(proto::ServerMessage)> EventStream::sink() const {
  std::shared_ptr<Producer> producer;
  {
    std::lock_guard lock(state_->mutex);
    producer = state_->producer.lock();
    if (!producer) {
      producer = std::make_shared<Producer>(state_);
      state_->producer = producer;
    }
  }
  return [producer](proto::ServerMessage event) { producer->state->push(std::move(event)); };
}

bool EventStream::finished() const {
  std::lock_guard lock(state_->mutex);
  return state_->ended;
}

void EventStream::State::push(proto::ServerMessage event) {
  std::function<void(std::optional<proto::ServerMessage>)> take;
  {
    std::lock_guard lock(mutex);
    if (ended) return;  // nothing follows the last event
    ended = proto::is_last_event(event);
    if (!waiter) {
      events.push_back(std::move(event));
      return;
    }
    take = std::move(waiter);
    waiter = nullptr;
  }
  // A waiter only waits on an empty buffer, so this event is the next one. Called outside the lock: it
  // posts, and posting may run arbitrary executor code.
  take(std::move(event));
}

void EventStream::State::abandon() {
  std::function<void(std::optional<proto::ServerMessage>)> take;
  {
    std::lock_guard lock(mutex);
    if (ended) return;
    ended = true;
    if (!waiter) return;
    take = std::move(waiter);
    waiter = nullptr;
  }
  take(std::nullopt);
}

void EventStream::State::wait(std::function<void(std::optional<proto::ServerMessage>)> next) {
  std::optional<proto::ServerMessage> event;
  {
    std::lock_guard lock(mutex);
    if (waiter) throw std::logic_error("EventStream::async_next: a wait is already pending");
    if (!events.empty()) {
      event = std::move(events.front());
      events.pop_front();
    } else if (!ended) {
      waiter = std::move(next);
      return;
    }
  }
  next(std::move(event));  // the next buffered event, or nullopt after the last
}

}  // namespace loom::actors
