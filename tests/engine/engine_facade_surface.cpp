// Compiled only to check what loom/engine.hpp pulls in (check_facade_includes.cmake): an application that
// embeds the Engine includes this one header and must not compile compute's model or kernel headers.
#include "loom/engine.hpp"

int engine_facade_surface() { return sizeof(loom::Engine) > 0 ? 0 : 1; }
