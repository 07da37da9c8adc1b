#include "loom/actors/runtime/message_name.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace loom::actors::detail {

std::string demangle(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> readable{abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                                  std::free};
  return status == 0 && readable ? std::string(readable.get()) : std::string(mangled);
}

}  // namespace loom::actors::detail
