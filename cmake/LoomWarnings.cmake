# Compile options every loom target gets: warnings (kept clean) and the chosen sanitizer.
add_library(loom_options INTERFACE)
target_compile_options(loom_options INTERFACE -Wall -Wextra -Wpedantic -Wshadow=local)

if(LOOM_SANITIZE)
  if(NOT LOOM_SANITIZE MATCHES "^(address|undefined|address,undefined|thread)$")
    message(FATAL_ERROR "LOOM_SANITIZE must be address, undefined, address,undefined or thread (got '${LOOM_SANITIZE}')")
  endif()
  set(_san -fsanitize=${LOOM_SANITIZE} -fno-omit-frame-pointer)
  if(LOOM_SANITIZE MATCHES "undefined")
    list(APPEND _san -fno-sanitize-recover=undefined)
  endif()
  # Sanitizers apply to the whole build, including third-party headers compiled in our units.
  add_compile_options(${_san})
  add_link_options(${_san})
endif()
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  # GCC 12 at -O3 says that libstdc++'s string insert for `"literal" + std::string` may copy overlapping
  # memory (a false positive, GCC bug 105329); it fired in every build of the model loader and the tests.
  target_compile_options(loom_options INTERFACE -Wno-restrict)
endif()
if(LOOM_SANITIZE)
  # The sanitizers' instrumentation makes GCC 12 report false "maybe uninitialized" warnings inside Asio.
  target_compile_options(loom_options INTERFACE -Wno-maybe-uninitialized)
endif()
if(LOOM_SANITIZE STREQUAL "thread")
  # Asio and libstdc++ use std::atomic_thread_fence, which TSan does not model; GCC says so at every use.
  target_compile_options(loom_options INTERFACE -Wno-tsan)
endif()
