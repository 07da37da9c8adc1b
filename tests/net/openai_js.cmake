# The official OpenAI JavaScript client (npm package "openai", pinned in js/package-lock.json) against
# build/bin/loom-gateway: js/openai_client_test.mjs. The wrapper js/run_openai_client_test.cmake copies the
# client test into the build tree, installs the pinned package there with `npm ci` when it is missing or
# the lock file changed, and runs it with node. Needs Node.js >= 20 and npm, and the npm registry once.
add_test(NAME net_openai_js_client
         COMMAND ${CMAKE_COMMAND}
                 -DNODE_SOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR}/js
                 -DNODE_WORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/openai_js
                 -DGATEWAY=$<TARGET_FILE:loom-gateway>
                 -DMODEL=${LOOM_SHARED_DIR}/models/aidreams260K.gguf
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/js/run_openai_client_test.cmake)
set_tests_properties(net_openai_js_client PROPERTIES LABELS net_clients TIMEOUT 600)
