# Finds every dependency from its Debian package and says which package to install when one is missing.
# Nothing is downloaded at build time.

function(loom_missing what package)
  message(FATAL_ERROR "loom: ${what} not found. Install it with:  apt-get install ${package}\n"
                      "(or run scripts/setup, which installs every missing package)")
endfunction()

find_package(Threads REQUIRED)

find_package(Boost 1.74 QUIET CONFIG)
if(NOT Boost_FOUND)
  loom_missing("Boost (Asio, Beast)" libboost-dev)
endif()

find_package(nlohmann_json 3.10 QUIET CONFIG)
if(NOT nlohmann_json_FOUND)
  loom_missing("nlohmann-json" nlohmann-json3-dev)
endif()

find_package(spdlog QUIET CONFIG)
if(NOT spdlog_FOUND)
  loom_missing("spdlog" libspdlog-dev)
endif()

# ICU's common library: Unicode general categories for the byte-level BPE pre-tokenizers (letters, numbers,
# whitespace), from a maintained source instead of hand-written ranges.
find_package(ICU 60 QUIET COMPONENTS uc)
if(NOT ICU_FOUND)
  loom_missing("ICU (Unicode character properties)" libicu-dev)
endif()

# OpenBLAS only for the benchmarks' baseline (compute_bench: sgemm on the same shapes); loom itself runs
# every product on its own kernels.
if(LOOM_BUILD_BENCH)
  set(BLA_VENDOR OpenBLAS)
  find_package(BLAS QUIET)
  if(NOT BLAS_FOUND)
    loom_missing("OpenBLAS (the benchmarks' baseline)" libopenblas-dev)
  endif()
endif()

if(LOOM_BUILD_TESTS)
  find_package(GTest QUIET CONFIG)
  if(NOT GTest_FOUND)
    loom_missing("GoogleTest" libgtest-dev)
  endif()
endif()

if(LOOM_BUILD_BENCH)
  find_package(benchmark QUIET CONFIG)
  if(NOT benchmark_FOUND)
    loom_missing("Google Benchmark" libbenchmark-dev)
  endif()
endif()

# Vulkan is optional: on by default when both the loader and the shader compiler are there.
find_package(Vulkan QUIET COMPONENTS glslc)
if(Vulkan_FOUND AND Vulkan_glslc_FOUND)
  set(_loom_vulkan_default ON)
else()
  set(_loom_vulkan_default OFF)
endif()
option(LOOM_VULKAN "Build the Vulkan compute backend (needs libvulkan-dev and glslc)" ${_loom_vulkan_default})
if(LOOM_VULKAN AND NOT (Vulkan_FOUND AND Vulkan_glslc_FOUND))
  loom_missing("The Vulkan loader or glslc (asked for by LOOM_VULKAN=ON)" "libvulkan-dev glslc mesa-vulkan-drivers")
endif()
