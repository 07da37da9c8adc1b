# The web chat page in a real browser (tests/net/browser/chat_page_test.mjs): headless Chromium opens
# loom-gateway's page, chats, stops a generation, and saves screenshots into build/test-artifacts.
# It needs Debian's chromium (/usr/bin/chromium) and Node.js 20+ with npm; the wrapper installs the pinned
# playwright-core (npm ci, under the build tree) the first time. A missing piece fails the test naming it.
add_test(NAME net_browser_chat_page
         COMMAND ${CMAKE_COMMAND}
                 -DSOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR}/browser
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/browser
                 -DGATEWAY=$<TARGET_FILE:loom-gateway>
                 -DMODELS=${LOOM_SHARED_DIR}/models
                 -DARTIFACTS=${CMAKE_BINARY_DIR}/test-artifacts
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/browser/run_chat_page_test.cmake)
set_tests_properties(net_browser_chat_page PROPERTIES LABELS net_clients TIMEOUT 240)
