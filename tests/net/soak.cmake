# The soak test (label soak): 64 clients on both transports doing everything at once (generate, cancel,
# disconnect, malformed frames, slow reading, multi-turn) against one loom-gateway for 60 s, then checks
# that nothing leaked (engine bookkeeping, KV blocks, file descriptors, memory) and that the gateway still
# gives the same greedy text. By hand, longer:
#   /usr/bin/python3 tests/net/soak_test.py build/bin/loom-gateway ../shared --minutes 30
add_test(NAME net_soak
         COMMAND ${LOOM_SYSTEM_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/soak_test.py
                 $<TARGET_FILE:loom-gateway> ${LOOM_SHARED_DIR} --seconds 60)
set_tests_properties(net_soak PROPERTIES LABELS soak TIMEOUT 300)
