# `cmake --install` and `cpack`: what goes where, in two components.
#   runtime      the binaries (loom, loom-gateway, loom-ws-client): what the Debian package holds (cpack -G DEB).
#   development  the static libraries, their public headers (each library's include/ tree; the headers
#                under */src stay private) and the CMake package, so that an application does
#                  find_package(loom CONFIG REQUIRED)
#                  target_link_libraries(app PRIVATE loom::engine)   # loom::net for the gateway library
# tests/install checks both: an out-of-tree build of examples/embed_asio against an installed prefix, and
# the Debian package's contents and dependencies.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(LOOM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/loom)

install(TARGETS loom loom-gateway loom-ws-client loom-loadgen
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

# The libraries carry EXPORT_NAMEs (proto, cache, compute, actors, engine, net) and the namespace makes them
# loom::proto ... loom::net, the same names as the ALIAS targets inside this build.
install(TARGETS loom_proto loom_cache loom_compute loom_actors loom_engine loom_net
        EXPORT loomTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development)
# Each library names its include root for users already ($<INSTALL_INTERFACE:include>); the trees all
# merge into PREFIX/include/loom/.
foreach(include_root IN ITEMS proto/include cache/include compute/include actors/runtime/include
                              actors/engine/include net/include)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${include_root}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          COMPONENT development)
endforeach()

install(EXPORT loomTargets NAMESPACE loom:: DESTINATION ${LOOM_INSTALL_CMAKEDIR} COMPONENT development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/loomConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/loomConfig.cmake
                              INSTALL_DESTINATION ${LOOM_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the interface, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/loomConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/loomConfig.cmake ${PROJECT_BINARY_DIR}/loomConfigVersion.cmake
        DESTINATION ${LOOM_INSTALL_CMAKEDIR} COMPONENT development)

# The Debian package: the binaries only (the runtime component), installed under /usr, its Depends computed
# by dpkg-shlibdeps from the libraries they link (ICU, fmt, libstdc++, libc).
set(CPACK_PACKAGE_NAME loom)
set(CPACK_PACKAGE_VENDOR "loom")
set(CPACK_PACKAGE_CONTACT "loom maintainers <loom@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LLM inference server and embeddable engine")
# The control file's Description: cpack puts the summary first, then this long text (indented).
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
    "loom serves Llama-family GGUF models (llama, qwen2, qwen3) on the CPU: loom-gateway streams tokens\n"
    "over WebSocket and an OpenAI-compatible HTTP API (with a web chat page), and the loom command-line\n"
    "tool generates, chats, tokenizes and inspects models.")
string(REPLACE ";" "" CPACK_DEBIAN_RUNTIME_DESCRIPTION "${CPACK_DEBIAN_RUNTIME_DESCRIPTION}")
set(CPACK_GENERATOR DEB)
set(CPACK_COMPONENTS_ALL runtime)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME loom)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # loom_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CPACK_PACKAGE_CONTACT}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
include(CPack)
