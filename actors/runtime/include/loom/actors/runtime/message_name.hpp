// A readable name for a message type, for logs and failure reports ("loom::engine::Tick").
// A message may choose its own by declaring `static constexpr std::string_view message_name = "...";`.
#pragma once

#include <string>
#include <string_view>
#include <typeinfo>

namespace loom::actors {

namespace detail {
std::string demangle(const char* mangled);
}

template <class T>
std::string_view message_name() {
  if constexpr (requires { std::string_view{T::message_name}; }) {
    return T::message_name;
  } else {
    static const std::string name = detail::demangle(typeid(T).name());
    return name;
  }
}

}  // namespace loom::actors
