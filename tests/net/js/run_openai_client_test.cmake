# ctest's wrapper for openai_client_test.mjs (cmake -P): checks node and npm, installs the pinned client in
# a copy under the build tree (the source tree stays clean), then runs the test against loom-gateway.
# Variables: NODE_SOURCE_DIR (this folder), NODE_WORK_DIR, GATEWAY (the binary), MODEL (a GGUF file).
cmake_minimum_required(VERSION 3.20)

set(install_hint "install Node.js 18 or newer with npm (Debian 12: apt-get install nodejs npm; \
the pinned packages support Node 18, Debian 12's own)")
find_program(NODE node)
find_program(NPM npm)
if(NOT NODE OR NOT NPM)
  message(FATAL_ERROR "the OpenAI JavaScript client test needs node and npm, not found: ${install_hint}")
endif()
execute_process(COMMAND ${NODE} --version OUTPUT_VARIABLE node_version OUTPUT_STRIP_TRAILING_WHITESPACE)
string(REGEX MATCH "^v([0-9]+)" _ "${node_version}")
if(NOT CMAKE_MATCH_1 OR CMAKE_MATCH_1 LESS 18)
  message(FATAL_ERROR "node ${node_version} is too old for the pinned OpenAI client: ${install_hint}")
endif()
foreach(file IN ITEMS "${GATEWAY}" "${MODEL}")
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "missing ${file}")
  endif()
endforeach()

file(MAKE_DIRECTORY "${NODE_WORK_DIR}")
# npm ci only when the installed tree is not the one the lock file pins.
set(stamp "${NODE_WORK_DIR}/node_modules/.loom-lock-copy.json")
set(need_install TRUE)
if(EXISTS "${stamp}")
  file(SHA256 "${stamp}" installed_lock)
  file(SHA256 "${NODE_SOURCE_DIR}/package-lock.json" wanted_lock)
  if(installed_lock STREQUAL wanted_lock)
    set(need_install FALSE)
  endif()
endif()
file(COPY "${NODE_SOURCE_DIR}/package.json" "${NODE_SOURCE_DIR}/package-lock.json"
          "${NODE_SOURCE_DIR}/openai_client_test.mjs" DESTINATION "${NODE_WORK_DIR}")
if(need_install)
  execute_process(COMMAND ${NPM} ci --no-audit --no-fund WORKING_DIRECTORY "${NODE_WORK_DIR}" RESULT_VARIABLE npm_result)
  if(NOT npm_result EQUAL 0)
    message(FATAL_ERROR "npm ci failed in ${NODE_WORK_DIR} (it needs the npm registry the first time)")
  endif()
  file(COPY_FILE "${NODE_SOURCE_DIR}/package-lock.json" "${stamp}")
endif()

execute_process(COMMAND ${NODE} openai_client_test.mjs "${GATEWAY}" "${MODEL}"
                WORKING_DIRECTORY "${NODE_WORK_DIR}" RESULT_VARIABLE test_result)
if(NOT test_result EQUAL 0)
  message(FATAL_ERROR "openai_client_test.mjs failed (exit ${test_result})")
endif()
