# The WebSocket protocol from an independent client: a Python script (Debian's python3-websockets, run with
# the system /usr/bin/python3) that starts loom-gateway, streams a greedy completion and checks it against
# the reference outputs in ../shared, then stops the gateway with SIGTERM. The script fails naming the
# package to install when the websockets module is missing.
add_test(NAME net_ws_python_client
         COMMAND ${LOOM_SYSTEM_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/ws_client_test.py
                 $<TARGET_FILE:loom-gateway> ${LOOM_SHARED_DIR})
set_tests_properties(net_ws_python_client PROPERTIES LABELS net_clients TIMEOUT 180)
