# install_embed_asio (cmake -P): install this build into a scratch prefix, build examples/embed_asio out of
# tree against it as an application would, and run it. Fails at the first failing step, printing its output.
#   -DLOOM_BUILD_DIR -DLOOM_SOURCE_DIR -DWORK_DIR -DGENERATOR -DCXX_COMPILER [-DCXX_COMPILER_LAUNCHER]
#   -DBUILD_TYPE [-DSANITIZE_FLAGS] -DMODEL
cmake_minimum_required(VERSION 3.25)

set(STEP_PREFIX "install test")
include("${CMAKE_CURRENT_LIST_DIR}/run_step.cmake")

if(NOT EXISTS "${MODEL}")
  message(FATAL_ERROR "install test: the model ${MODEL} is missing (LOOM_SHARED_DIR)")
endif()

set(prefix "${WORK_DIR}/prefix")
set(embed_build "${WORK_DIR}/embed")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# 1. The install: libraries, public headers, binaries, the CMake package.
run_step("cmake --install" "${CMAKE_COMMAND}" --install "${LOOM_BUILD_DIR}" --prefix "${prefix}")
set(expected bin/loom bin/loom-gateway bin/loom-ws-client bin/loom-loadgen include/loom/engine.hpp include/loom/net/gateway.hpp
             include/loom/proto/generate_request.hpp include/loom/actors/runtime/actor.hpp
             include/loom/cache/block_manager.hpp include/loom/compute/backend.hpp)
foreach(library proto cache compute actors engine net)
  file(GLOB_RECURSE found "${prefix}/lib*/libloom_${library}.a")
  if(NOT found)
    message(FATAL_ERROR "install test: libloom_${library}.a is not installed under ${prefix}/lib*")
  endif()
endforeach()
file(GLOB_RECURSE config "${prefix}/lib*/cmake/loom/loomConfig.cmake")
file(GLOB_RECURSE config_version "${prefix}/lib*/cmake/loom/loomConfigVersion.cmake")
if(NOT config OR NOT config_version)
  message(FATAL_ERROR "install test: lib/cmake/loom/loomConfig.cmake or its version file is not installed")
endif()
foreach(path IN LISTS expected)
  if(NOT EXISTS "${prefix}/${path}")
    message(FATAL_ERROR "install test: ${path} is not installed under ${prefix}")
  endif()
endforeach()
# The private headers (*/src) stay out.
file(GLOB_RECURSE private_headers "${prefix}/include/*object_reader.hpp" "${prefix}/include/*gateway_context.hpp"
                                  "${prefix}/include/*vec_dot_kernels.hpp")
if(private_headers)
  message(FATAL_ERROR "install test: private headers were installed: ${private_headers}")
endif()

# 2. embed_asio configured out of tree: it must find loom in the prefix (and nothing of the build tree).
set(configure_args -S "${LOOM_SOURCE_DIR}/examples/embed_asio" -B "${embed_build}" -G "${GENERATOR}"
                   "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
                   "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
if(CXX_COMPILER_LAUNCHER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_COMPILER_LAUNCHER}")
endif()
if(SANITIZE_FLAGS)
  list(APPEND configure_args "-DCMAKE_CXX_FLAGS=${SANITIZE_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE_FLAGS}")
endif()
run_step("configure examples/embed_asio against the prefix" "${CMAKE_COMMAND}" ${configure_args})
file(STRINGS "${embed_build}/CMakeCache.txt" loom_dir REGEX "^loom_DIR:")
get_filename_component(config_dir "${config}" DIRECTORY)
if(NOT loom_dir STREQUAL "loom_DIR:PATH=${config_dir}")
  message(FATAL_ERROR "install test: embed_asio found loom elsewhere than the prefix: ${loom_dir}")
endif()

# 3. Build it (one source file; the libraries are the installed ones).
run_step("build examples/embed_asio" "${CMAKE_COMMAND}" --build "${embed_build}")

# 4. Run it: two greedy generations on the tiny model, then a clean shutdown (exit 0).
run_step("run embed_asio" "${embed_build}/embed_asio" "${MODEL}" --max-tokens 8)
set(output "${STEP_OUTPUT}")
foreach(pattern "\\[callback\\]  token +[0-9]+: \"[^\"]+\"" "\\[coroutine\\] token +[0-9]+: \"[^\"]+\""
                "\\[callback\\]  done \\(" "\\[coroutine\\] done \\(" "engine shut down: yes")
  if(NOT output MATCHES "${pattern}")
    message(FATAL_ERROR "install test: embed_asio's output lacks '${pattern}':\n${output}")
  endif()
endforeach()
message(STATUS "install test: embed_asio, built against the installed loom, generated:\n${output}")
