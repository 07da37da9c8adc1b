# ctest's wrapper for chat_page_test.mjs (cmake -P): checks node and npm, installs the pinned playwright-core
# (it drives Debian's /usr/bin/chromium; no browser is downloaded) in a copy under the build tree, so the
# source tree stays clean, then runs the test against loom-gateway.
# Variables: SOURCE_DIR (this folder), WORK_DIR, GATEWAY (the binary), MODELS (the models folder), ARTIFACTS.
cmake_minimum_required(VERSION 3.20)

set(install_hint "install Node.js 18 or newer with npm (Debian 12: apt-get install nodejs npm; \
the pinned packages support Node 18, Debian 12's own)")
find_program(NODE node)
find_program(NPM npm)
if(NOT NODE OR NOT NPM)
  message(FATAL_ERROR "the browser test needs node and npm, not found: ${install_hint}")
endif()
execute_process(COMMAND ${NODE} --version OUTPUT_VARIABLE node_version OUTPUT_STRIP_TRAILING_WHITESPACE)
string(REGEX MATCH "^v([0-9]+)" _ "${node_version}")
if(NOT CMAKE_MATCH_1 OR CMAKE_MATCH_1 LESS 18)
  message(FATAL_ERROR "node ${node_version} is too old for playwright-core: ${install_hint}")
endif()
if(NOT EXISTS /usr/bin/chromium AND NOT DEFINED ENV{LOOM_CHROMIUM})
  message(FATAL_ERROR "the browser test needs Debian's chromium package: apt-get install -y chromium")
endif()
if(NOT EXISTS "${GATEWAY}")
  message(FATAL_ERROR "missing ${GATEWAY}")
endif()

file(MAKE_DIRECTORY "${WORK_DIR}")
# npm ci only when the installed tree is not the one the lock file pins.
set(stamp "${WORK_DIR}/node_modules/.loom-lock-copy.json")
set(need_install TRUE)
if(EXISTS "${stamp}")
  file(SHA256 "${stamp}" installed_lock)
  file(SHA256 "${SOURCE_DIR}/package-lock.json" wanted_lock)
  if(installed_lock STREQUAL wanted_lock)
    set(need_install FALSE)
  endif()
endif()
file(COPY "${SOURCE_DIR}/package.json" "${SOURCE_DIR}/package-lock.json" "${SOURCE_DIR}/chat_page_test.mjs"
     DESTINATION "${WORK_DIR}")
if(need_install)
  execute_process(COMMAND ${NPM} ci --no-audit --no-fund WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE npm_result)
  if(NOT npm_result EQUAL 0)
    message(FATAL_ERROR "npm ci failed in ${WORK_DIR} (it needs the npm registry the first time)")
  endif()
  file(COPY_FILE "${SOURCE_DIR}/package-lock.json" "${stamp}")
endif()

execute_process(COMMAND ${NODE} chat_page_test.mjs --gateway "${GATEWAY}" --models "${MODELS}" --artifacts "${ARTIFACTS}"
                WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE test_result)
if(NOT test_result EQUAL 0)
  message(FATAL_ERROR "chat_page_test.mjs failed (exit ${test_result})")
endif()
