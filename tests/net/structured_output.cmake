# Constrained output end to end (issue 21): loom-gateway on a random-weight model with the Llama 32k
# vocabulary, JSON under a table of schemas over many seeds through OpenAI's routes (whole and streamed) and
# the WebSocket protocol, each answer validated by Debian's python3-jsonschema; grammars and refusals too.
# `--seeds N` runs more seeds by hand.
add_test(NAME net_structured_output
         COMMAND ${LOOM_SYSTEM_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/structured_output_test.py
                 $<TARGET_FILE:loom-gateway> ${LOOM_SHARED_DIR})
set_tests_properties(net_structured_output PROPERTIES LABELS net_clients TIMEOUT 600)
