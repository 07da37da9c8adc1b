// Parsed<T>: the outcome of parsing client input, either a valid T or the ValidationError that says why the
// input was refused. Parsers return it instead of throwing because refusing bad input is an ordinary
// outcome of talking to untrusted clients, not an exceptional one (GCC 12 has no std::expected).
#pragma once

#include <utility>
#include <variant>

#include "loom/proto/validation_error.hpp"

namespace loom::proto {

template <class T>
class [[nodiscard]] Parsed {
 public:
  Parsed(T value) : state_(std::in_place_index<0>, std::move(value)) {}                // NOLINT: implicit by design
  Parsed(ValidationError error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  // Precondition: ok(). Asking a failed result for its value is a programming error and throws
  // std::bad_variant_access.
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // Precondition: !ok(); throws std::bad_variant_access otherwise.
  const ValidationError& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, ValidationError> state_;
};

}  // namespace loom::proto
