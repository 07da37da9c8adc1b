# debian_package (cmake -P): cpack -G DEB in the build, then the package checked with dpkg-deb: named loom,
# this version, the three binaries under /usr/bin and nothing of the development component (static libraries,
# headers, the CMake package), and Depends naming the Debian runtime libraries the binaries link.
#   -DLOOM_BUILD_DIR -DWORK_DIR -DCPACK -DDPKG_DEB -DVERSION
cmake_minimum_required(VERSION 3.25)

set(STEP_PREFIX "package test")
include("${CMAKE_CURRENT_LIST_DIR}/run_step.cmake")

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

run_step("cpack -G DEB" "${CMAKE_COMMAND}" -E chdir "${LOOM_BUILD_DIR}"
         "${CPACK}" -G DEB --config "${LOOM_BUILD_DIR}/CPackConfig.cmake" -B "${WORK_DIR}")
file(GLOB packages "${WORK_DIR}/*.deb")
list(LENGTH packages count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "package test: expected one .deb in ${WORK_DIR}, found ${count}: ${packages}")
endif()
message(STATUS "package test: ${packages}")

run_step("dpkg-deb -c" "${DPKG_DEB}" -c "${packages}")
set(contents "${STEP_OUTPUT}")
foreach(binary loom loom-gateway loom-ws-client loom-loadgen)
  if(NOT contents MATCHES "\\./usr/bin/${binary}\n")
    message(FATAL_ERROR "package test: the package lacks /usr/bin/${binary}:\n${contents}")
  endif()
endforeach()
if(contents MATCHES "\\.(a|hpp|cmake)\n" OR contents MATCHES "/include/")
  message(FATAL_ERROR "package test: the package holds development files:\n${contents}")
endif()

run_step("dpkg-deb -I" "${DPKG_DEB}" -I "${packages}")
set(info "${STEP_OUTPUT}")
foreach(pattern "\n Package: loom\n" "\n Version: ${VERSION}\n" "\n Section: " "\n Maintainer: "
                "\n Depends: [^\n]*libc6" "\n Depends: [^\n]*libstdc\\+\\+6"
                "\n Depends: [^\n]*libicu")
  if(NOT info MATCHES "${pattern}")
    message(FATAL_ERROR "package test: the package's control lacks '${pattern}':\n${info}")
  endif()
endforeach()
# Every product runs on loom's own kernels: OpenBLAS is the benchmarks' baseline, not a runtime dependency.
if(info MATCHES "\n Depends: [^\n]*libopenblas")
  message(FATAL_ERROR "package test: the package depends on OpenBLAS, which loom no longer calls:\n${info}")
endif()
# The packaged binaries run (their libraries resolve on this system).
set(root "${WORK_DIR}/root")
run_step("dpkg-deb -x" "${DPKG_DEB}" -x "${packages}" "${root}")
foreach(binary loom loom-gateway loom-ws-client loom-loadgen)
  run_step("${binary} --version" "${root}/usr/bin/${binary}" --version)
  if(NOT STEP_OUTPUT MATCHES "^${binary} ${VERSION}")
    message(FATAL_ERROR "package test: ${binary} --version printed:\n${STEP_OUTPUT}")
  endif()
endforeach()

message(STATUS "package test: the package's control and contents:\n${info}\n${contents}")
