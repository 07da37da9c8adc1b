# ctest's runner for the Node.js client tests (cmake -P): checks node and npm (and Chromium when asked),
# installs the package's pinned dependencies in a copy under the build tree (the source tree stays clean;
# `npm ci` runs only when the lock file changed), then runs the test script there.
# Variables: PACKAGE_DIR (package.json, package-lock.json and the script), WORK_DIR, SCRIPT (file name),
# SCRIPT_ARGS (a ;-list), NEEDS_CHROMIUM (ON/OFF), REQUIRED_FILES (a ;-list: the gateway, the models).
cmake_minimum_required(VERSION 3.20)

set(install_hint "install Node.js 18 or newer with npm (Debian 12: apt-get install nodejs npm)")
find_program(NODE node)
find_program(NPM npm)
if(NOT NODE OR NOT NPM)
  message(FATAL_ERROR "${SCRIPT} needs node and npm, not found: ${install_hint}")
endif()
execute_process(COMMAND ${NODE} --version OUTPUT_VARIABLE node_version OUTPUT_STRIP_TRAILING_WHITESPACE)
string(REGEX MATCH "^v([0-9]+)" _ "${node_version}")
if(NOT CMAKE_MATCH_1 OR CMAKE_MATCH_1 LESS 18)
  message(FATAL_ERROR "node ${node_version} is too old for ${SCRIPT}'s pinned packages: ${install_hint}")
endif()
if(NEEDS_CHROMIUM AND NOT EXISTS /usr/bin/chromium AND NOT DEFINED ENV{LOOM_CHROMIUM})
  message(FATAL_ERROR "${SCRIPT} needs Debian's chromium package: apt-get install -y chromium")
endif()

foreach(file IN LISTS REQUIRED_FILES)
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "${SCRIPT} needs ${file}, which is missing (the models come from ../shared beside the checkout)")
  endif()
endforeach()

file(MAKE_DIRECTORY "${WORK_DIR}")
set(stamp "${WORK_DIR}/node_modules/.loom-lock-copy.json")
set(need_install TRUE)
if(EXISTS "${stamp}")
  file(SHA256 "${stamp}" installed_lock)
  file(SHA256 "${PACKAGE_DIR}/package-lock.json" wanted_lock)
  if(installed_lock STREQUAL wanted_lock)
    set(need_install FALSE)
  endif()
endif()
# The script and the modules beside it (gateway.mjs).
file(GLOB scripts "${PACKAGE_DIR}/*.mjs")
file(COPY "${PACKAGE_DIR}/package.json" "${PACKAGE_DIR}/package-lock.json" ${scripts} DESTINATION "${WORK_DIR}")
if(need_install)
  execute_process(COMMAND ${NPM} ci --no-audit --no-fund WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE npm_result)
  if(NOT npm_result EQUAL 0)
    message(FATAL_ERROR "npm ci failed in ${WORK_DIR} (it needs the npm registry the first time)")
  endif()
  file(COPY_FILE "${PACKAGE_DIR}/package-lock.json" "${stamp}")
endif()

execute_process(COMMAND ${NODE} ${SCRIPT} ${SCRIPT_ARGS} WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE test_result)
if(NOT test_result EQUAL 0)
  message(FATAL_ERROR "${SCRIPT} failed (exit ${test_result})")
endif()
