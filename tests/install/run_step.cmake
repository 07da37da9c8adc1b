# run_step(NAME COMMAND...) for the install tests' cmake -P scripts: runs the command; on a non-zero exit,
# fails naming the step (prefixed with STEP_PREFIX, the test's name), with the command and its output.
# The output (stdout and stderr together) is left in STEP_OUTPUT.
function(run_step name)
  message(STATUS "${STEP_PREFIX}: ${name}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "${STEP_PREFIX}: step '${name}' failed (${rc}):\n${ARGN}\n${out}")
  endif()
  set(STEP_OUTPUT "${out}" PARENT_SCOPE)
endfunction()
