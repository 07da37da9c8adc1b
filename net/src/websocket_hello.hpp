// The hello message a WebSocket connection sends first: protocol and server version, the model, its
// context, the limits a client must respect (named as the gateway's configuration keys, which its HTTP
// errors name too) and the features this server offers. PROTOCOL.md ("hello") documents each entry.
#pragma once

#include "gateway_context.hpp"
#include "loom/proto/hello.hpp"

namespace loom::net {

proto::Hello make_hello(const GatewayContext& context);

}  // namespace loom::net
