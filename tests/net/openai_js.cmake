# The official OpenAI JavaScript client (npm package "openai", pinned in js/package-lock.json) against
# build/bin/loom-gateway: js/openai_client_test.mjs, run by node/run_node_test.cmake (Node.js 18+ with npm;
# the npm registry once, for `npm ci`).
add_test(NAME net_openai_js_client
         COMMAND ${CMAKE_COMMAND}
                 -DPACKAGE_DIR=${CMAKE_CURRENT_SOURCE_DIR}/js
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/openai_js
                 -DSCRIPT=openai_client_test.mjs
                 "-DSCRIPT_ARGS=$<TARGET_FILE:loom-gateway>;${LOOM_SHARED_DIR}/models/aidreams260K.gguf"
                 "-DREQUIRED_FILES=$<TARGET_FILE:loom-gateway>;${LOOM_SHARED_DIR}/models/aidreams260K.gguf"
                 -DNEEDS_CHROMIUM=OFF
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/node/run_node_test.cmake)
set_tests_properties(net_openai_js_client PROPERTIES LABELS net_clients TIMEOUT 600)
