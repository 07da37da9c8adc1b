// GET /: the web chat page, one self-contained HTML document (inline CSS and JS, nothing from a CDN) that
// talks to /v1/ws: it opens a session, streams replies token by token, keeps the conversation, and has a
// stop button that sends cancel.
#pragma once

#include <string_view>

namespace loom::net {

std::string_view chat_page_html() noexcept;

}  // namespace loom::net
