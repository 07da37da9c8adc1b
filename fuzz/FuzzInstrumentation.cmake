# The fuzz build (LOOM_BUILD_FUZZ=ON): every object of the build, loom's libraries included, is compiled with
# libFuzzer's coverage instrumentation and with AddressSanitizer + UndefinedBehaviorSanitizer, so that the
# fuzzer is guided by the code under test and any bad read, overflow or undefined operation stops the run.
# The libFuzzer runtime itself (which brings main) is linked into the fuzz targets only (fuzz/CMakeLists.txt).
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "LOOM_BUILD_FUZZ needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}: configure a "
                      "separate build folder with CC=clang CXX=clang++ (scripts/fuzz does), and install "
                      "clang and libclang-rt-14-dev (the sanitizer and libFuzzer runtimes)")
endif()
if(LOOM_SANITIZE)
  message(FATAL_ERROR "LOOM_BUILD_FUZZ brings its own sanitizers (address, undefined): leave LOOM_SANITIZE empty")
endif()

set(LOOM_FUZZ_SANITIZE -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
add_compile_options(-fsanitize=fuzzer-no-link ${LOOM_FUZZ_SANITIZE})
add_link_options(${LOOM_FUZZ_SANITIZE})
# The house's warning flags are GCC's; clang does not know some of them (-Wshadow=local).
add_compile_options(-Wno-unknown-warning-option)
# Boost 1.74's Asio enables co_await for clang only with the pre-C++20 <experimental/coroutine>; clang 14 has
# C++20 coroutines with libstdc++'s <coroutine>, which Asio then uses (its GCC branch detects it).
add_compile_definitions(BOOST_ASIO_HAS_CO_AWAIT=1)
