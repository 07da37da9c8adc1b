# Checks the Engine facade's compile surface: reruns the compile command of engine_facade_surface.cpp (from
# compile_commands.json) with -H, which lists every header the compiler opens, and fails if one is a header
# of compute's model/ or cpu/ rooms (file formats, kernels, the forward pass): an application embedding
# loom compiles against the facade, proto, the runtime and the engine's protocols only.
#   cmake -DBUILD_DIR=<build> -DSOURCE=<.../engine_facade_surface.cpp> -P check_facade_includes.cmake
file(READ "${BUILD_DIR}/compile_commands.json" commands)
string(JSON count LENGTH "${commands}")
math(EXPR last "${count} - 1")
set(command "")
foreach(i RANGE ${last})
  string(JSON file GET "${commands}" ${i} file)
  if(file STREQUAL SOURCE)
    string(JSON command GET "${commands}" ${i} command)
    string(JSON directory GET "${commands}" ${i} directory)
    break()
  endif()
endforeach()
if(command STREQUAL "")
  message(FATAL_ERROR "no compile command for ${SOURCE} in ${BUILD_DIR}/compile_commands.json")
endif()

separate_arguments(args UNIX_COMMAND "${command}")
# Compile for syntax only, listing the headers: drop the object output, keep every flag and include path.
list(FIND args "-o" output_at)
if(output_at GREATER -1)
  list(REMOVE_AT args ${output_at})
  list(REMOVE_AT args ${output_at})
endif()
list(TRANSFORM args REPLACE "^-c$" "-fsyntax-only")
execute_process(COMMAND ${args} -H WORKING_DIRECTORY "${directory}"
                RESULT_VARIABLE status ERROR_VARIABLE headers OUTPUT_QUIET)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "compiling ${SOURCE} failed:\n${headers}")
endif()

string(REGEX MATCHALL "loom/[a-z0-9_/]+\\.hpp" loom_headers "${headers}")
list(REMOVE_DUPLICATES loom_headers)
list(LENGTH loom_headers loom_count)
set(forbidden "")
foreach(header IN LISTS loom_headers)
  if(header MATCHES "^loom/compute/(model|cpu)/")
    list(APPEND forbidden "${header}")
  endif()
endforeach()
if(forbidden)
  string(REPLACE ";" "\n  " forbidden "${forbidden}")
  message(FATAL_ERROR "loom/engine.hpp pulls in compute's model or kernel headers:\n  ${forbidden}\n"
                      "(run the compiler with -H on ${SOURCE} to see through which include)")
endif()
message(STATUS "loom/engine.hpp opens ${loom_count} loom headers, none of compute/model or compute/cpu")
