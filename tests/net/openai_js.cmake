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
set_tests_properties(net_openai_js_client PROPERTIES LABELS net_clients TIMEOUT 600 RESOURCE_LOCK openai_js_work)

# Tool calls (whole and streamed, forced by tool_choice) and reasoning_content through the same client, on a
# model `loom synth` writes with Qwen 2.5's template as its own (js/openai_tools_test.mjs).
add_test(NAME net_openai_js_tools
         COMMAND ${CMAKE_COMMAND}
                 -DPACKAGE_DIR=${CMAKE_CURRENT_SOURCE_DIR}/js
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/openai_js
                 -DSCRIPT=openai_tools_test.mjs
                 "-DSCRIPT_ARGS=$<TARGET_FILE:loom-gateway>;$<TARGET_FILE:loom>;${LOOM_SHARED_DIR}"
                 "-DREQUIRED_FILES=$<TARGET_FILE:loom-gateway>;$<TARGET_FILE:loom>;${LOOM_SHARED_DIR}/vocab/ggml-vocab-gpt-2.gguf;${LOOM_SHARED_DIR}/templates/templates/Qwen-Qwen2.5-7B-Instruct.jinja;${LOOM_SHARED_DIR}/templates/templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"
                 -DNEEDS_CHROMIUM=OFF
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/node/run_node_test.cmake)
set_tests_properties(net_openai_js_tools PROPERTIES LABELS net_clients TIMEOUT 600 RESOURCE_LOCK openai_js_work)

# SSE keep-alive comments (": ping", --sse-ping-interval-ms) in a stream the same client reads as usual; a
# long prompt on synth11M prefills for many 10 ms intervals (js/openai_sse_ping_test.mjs).
add_test(NAME net_openai_js_sse_ping
         COMMAND ${CMAKE_COMMAND}
                 -DPACKAGE_DIR=${CMAKE_CURRENT_SOURCE_DIR}/js
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/openai_js
                 -DSCRIPT=openai_sse_ping_test.mjs
                 "-DSCRIPT_ARGS=$<TARGET_FILE:loom-gateway>;${LOOM_SHARED_DIR}/models/synth11M-q8_0.gguf"
                 "-DREQUIRED_FILES=$<TARGET_FILE:loom-gateway>;${LOOM_SHARED_DIR}/models/synth11M-q8_0.gguf"
                 -DNEEDS_CHROMIUM=OFF
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/node/run_node_test.cmake)
set_tests_properties(net_openai_js_sse_ping PROPERTIES LABELS net_clients TIMEOUT 120 RESOURCE_LOCK openai_js_work)
# loom's defaults and extensions through the same client: no max_tokens, fields refused unless lenient,
# trimming reported, /v1/models meta, and llama.cpp's /tokenize, /detokenize, /apply-template
# (js/openai_extensions_test.mjs).
add_test(NAME net_openai_js_extensions
         COMMAND ${CMAKE_COMMAND}
                 -DPACKAGE_DIR=${CMAKE_CURRENT_SOURCE_DIR}/js
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/openai_js
                 -DSCRIPT=openai_extensions_test.mjs
                 "-DSCRIPT_ARGS=$<TARGET_FILE:loom-gateway>;${LOOM_SHARED_DIR}/models/aidreams260K.gguf"
                 "-DREQUIRED_FILES=$<TARGET_FILE:loom-gateway>;${LOOM_SHARED_DIR}/models/aidreams260K.gguf"
                 -DNEEDS_CHROMIUM=OFF
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/node/run_node_test.cmake)
set_tests_properties(net_openai_js_extensions PROPERTIES LABELS net_clients TIMEOUT 600 RESOURCE_LOCK openai_js_work)
