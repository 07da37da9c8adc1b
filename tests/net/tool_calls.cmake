# Forced tool calls end to end in every family's syntax (issue 22): loom-gateway on a random-weight model with
# the Llama 32k vocabulary and each shared tool template (--chat-template-file), tool_choice required or a
# named function over the WebSocket protocol and /v1/chat/completions, each call's arguments validated by
# Debian's python3-jsonschema. `--seeds N` runs more seeds by hand.
add_test(NAME net_tool_calls
         COMMAND ${LOOM_SYSTEM_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/tool_calls_test.py
                 $<TARGET_FILE:loom-gateway> ${LOOM_SHARED_DIR})
set_tests_properties(net_tool_calls PROPERTIES LABELS net_clients TIMEOUT 600)
