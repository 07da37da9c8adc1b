# The web chat page in a real browser (tests/net/browser/chat_page_test.mjs): headless Chromium opens
# loom-gateway's page, chats, stops a generation, and saves screenshots into build/test-artifacts.
# It needs Debian's chromium (/usr/bin/chromium), Node.js 20+ and `npm ci` in tests/net/browser (which
# installs playwright-core; it downloads no browser). A missing piece fails the test with a message naming it.
set(LOOM_BROWSER_TEST_DIR ${CMAKE_CURRENT_SOURCE_DIR}/browser)
find_program(LOOM_NODE_EXECUTABLE node)

if(LOOM_NODE_EXECUTABLE)
  add_test(NAME net_browser_chat_page
           COMMAND ${LOOM_NODE_EXECUTABLE} ${LOOM_BROWSER_TEST_DIR}/chat_page_test.mjs
                   --gateway $<TARGET_FILE:loom-gateway>
                   --models ${LOOM_SHARED_DIR}/models
                   --artifacts ${CMAKE_BINARY_DIR}/test-artifacts
           WORKING_DIRECTORY ${LOOM_BROWSER_TEST_DIR})
else()
  set(missing_node_script ${CMAKE_CURRENT_BINARY_DIR}/browser_test_missing_node.cmake)
  file(WRITE ${missing_node_script}
       "message(FATAL_ERROR \"net_browser_chat_page: node was not found when CMake ran: install Node.js 20+ "
       "(Debian: nodejs npm), run 'npm ci' in ${LOOM_BROWSER_TEST_DIR}, and configure again\")\n")
  add_test(NAME net_browser_chat_page COMMAND ${CMAKE_COMMAND} -P ${missing_node_script})
endif()
set_tests_properties(net_browser_chat_page PROPERTIES LABELS net_clients TIMEOUT 180)
