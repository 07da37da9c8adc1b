# The web chat page in a real browser (tests/net/browser/chat_page_test.mjs): headless Chromium opens
# loom-gateway's page, chats, stops a generation, and saves screenshots into build/test-artifacts.
# It needs Debian's chromium (/usr/bin/chromium) and Node.js 18+ with npm; node/run_node_test.cmake installs
# the pinned playwright-core (no browser download) the first time. A missing piece fails the test naming it.
add_test(NAME net_browser_chat_page
         COMMAND ${CMAKE_COMMAND}
                 -DPACKAGE_DIR=${CMAKE_CURRENT_SOURCE_DIR}/browser
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/browser
                 -DSCRIPT=chat_page_test.mjs
                 "-DSCRIPT_ARGS=--gateway;$<TARGET_FILE:loom-gateway>;--models;${LOOM_SHARED_DIR}/models;--artifacts;${CMAKE_BINARY_DIR}/test-artifacts"
                 "-DREQUIRED_FILES=$<TARGET_FILE:loom-gateway>;${LOOM_SHARED_DIR}/models/aidreams260K.gguf;${LOOM_SHARED_DIR}/models/synth11M-q4_0.gguf"
                 -DNEEDS_CHROMIUM=ON
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/node/run_node_test.cmake)
set_tests_properties(net_browser_chat_page PROPERTIES LABELS net_clients TIMEOUT 240 RESOURCE_LOCK browser_work)

# CORS from a page on another origin (tests/net/browser/cors_test.mjs): a static server started by the test
# serves the page; its fetch to /v1/chat/completions (whole and streamed) works from an origin listed in
# --cors-origins and fails with a TypeError from one that is not. Same package and work folder as above.
add_test(NAME net_browser_cors
         COMMAND ${CMAKE_COMMAND}
                 -DPACKAGE_DIR=${CMAKE_CURRENT_SOURCE_DIR}/browser
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/browser
                 -DSCRIPT=cors_test.mjs
                 "-DSCRIPT_ARGS=--gateway;$<TARGET_FILE:loom-gateway>;--models;${LOOM_SHARED_DIR}/models"
                 "-DREQUIRED_FILES=$<TARGET_FILE:loom-gateway>;${LOOM_SHARED_DIR}/models/aidreams260K.gguf"
                 -DNEEDS_CHROMIUM=ON
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/node/run_node_test.cmake)
set_tests_properties(net_browser_cors PROPERTIES LABELS net_clients TIMEOUT 120 RESOURCE_LOCK browser_work)
