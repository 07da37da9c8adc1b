#include "loom/compute/model/gguf_value.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <system_error>

namespace loom::compute {
namespace {

constexpr std::array<std::string_view, 13> kTypeNames{"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                      "bool", "string", "array", "u64", "i64", "f64"};

// Long strings (chat templates run to kilobytes) are cut for display, at a UTF-8 character boundary.
constexpr std::size_t kMaxShownStringBytes = 80;

template <class F>
std::string shortest(F value) {
  std::array<char, 64> buffer{};
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  return std::string(buffer.data(), result.ptr);
}

std::string quoted(std::string_view text) {
  bool cut = false;
  if (text.size() > kMaxShownStringBytes) {
    std::size_t end = kMaxShownStringBytes;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
    text = text.substr(0, end);
    cut = true;
  }
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (byte < 0x20 || byte == 0x7F) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\x";
          out += kHex[byte >> 4];
          out += kHex[byte & 0xF];
        } else {
          out += c;
        }
    }
  }
  out += cut ? "\"..." : "\"";
  return out;
}

template <class T>
std::string show(const T& value, std::size_t max_items) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return quoted(value);
  } else if constexpr (std::is_same_v<T, GgufArray>) {
    return value.summary(max_items);
  } else if constexpr (std::is_floating_point_v<T>) {
    return shortest(value);
  } else {
    return std::to_string(value);  // integers; u8/i8 promote, so they print as numbers, not characters
  }
}

// "array<f32>", "array<array<i32>>"; the inner type of an empty array of arrays is unknowable: "array<array<?>>".
std::string array_type_name(const GgufArray& a) {
  std::string inner;
  if (const auto* nested = a.get_if<GgufArray>()) {
    inner = nested->empty() ? "array<?>" : array_type_name(nested->front());
  } else {
    inner = name(a.element_type());
  }
  return "array<" + inner + ">";
}

}  // namespace

std::string_view name(GgufValueType type) noexcept {
  const auto index = static_cast<std::size_t>(type);
  return index < kTypeNames.size() ? kTypeNames[index] : std::string_view("unknown");
}

std::optional<GgufValueType> find_gguf_value_type(std::uint32_t raw_id) noexcept {
  if (raw_id < kTypeNames.size()) return static_cast<GgufValueType>(raw_id);
  return std::nullopt;
}

bool is_integer(GgufValueType type) noexcept {
  switch (type) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::u16:
    case GgufValueType::i16:
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::u64:
    case GgufValueType::i64: return true;
    default: return false;
  }
}

std::size_t GgufArray::size() const noexcept {
  return std::visit([](const auto& items) { return items.size(); }, items_);
}

std::string GgufArray::summary(std::size_t max_items) const {
  return std::visit(
      [max_items](const auto& items) {
        std::string out = "[";
        const std::size_t shown = std::min(items.size(), max_items);
        for (std::size_t i = 0; i < shown; ++i) {
          if (i > 0) out += ", ";
          using Element = typename std::remove_cvref_t<decltype(items)>::value_type;
          out += show(static_cast<Element>(items[i]), max_items);
        }
        if (shown < items.size()) out += (shown > 0 ? ", ... (" : "... (") + std::to_string(items.size()) + " items)";
        out += "]";
        return out;
      },
      items_);
}

std::string GgufValue::type_name() const {
  const GgufArray* a = array();
  return a != nullptr ? array_type_name(*a) : std::string(name(type()));
}

std::optional<double> GgufValue::as_float() const noexcept {
  if (const auto* f = get_if<float>()) return static_cast<double>(*f);
  if (const auto* d = get_if<double>()) return *d;
  return std::nullopt;
}

std::string GgufValue::summary(std::size_t max_items) const {
  return std::visit([max_items](const auto& v) { return show(v, max_items); }, value_);
}

}  // namespace loom::compute
