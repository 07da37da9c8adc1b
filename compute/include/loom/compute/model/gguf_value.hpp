// GgufValue and GgufArray: one metadata value of a GGUF file, as stored (its exact type is kept, so that a
// file can be written back unchanged and `loom info` can show what the writer chose). Arrays are typed
// vectors, not a value per element: a tokenizer's 32000 scores are one std::vector<float>, its tokens one
// std::vector<std::string>. The variant index of both types equals the GGUF value type id, which keeps the
// mapping between file and memory in one place.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace loom::compute {

// The value type ids stored in a GGUF file.
enum class GgufValueType : std::uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

// "u8", "i32", "f32", "bool", "string", "array", ...
std::string_view name(GgufValueType type) noexcept;
// The type for a raw id from a file; nullopt when the id is unknown.
std::optional<GgufValueType> find_gguf_value_type(std::uint32_t raw_id) noexcept;
bool is_integer(GgufValueType type) noexcept;

class GgufArray {
 public:
  // Alternative i holds elements of GGUF type id i; nested arrays are vectors of GgufArray.
  using Storage = std::variant<std::vector<std::uint8_t>, std::vector<std::int8_t>, std::vector<std::uint16_t>,
                               std::vector<std::int16_t>, std::vector<std::uint32_t>, std::vector<std::int32_t>,
                               std::vector<float>, std::vector<bool>, std::vector<std::string>, std::vector<GgufArray>,
                               std::vector<std::uint64_t>, std::vector<std::int64_t>, std::vector<double>>;

  GgufArray() = default;  // an empty array of u8
  // Implicit on purpose: `GgufArray(std::vector<float>{...})` and `writer.add_array(key, tokens)` read plainly.
  template <class T>
    requires std::is_constructible_v<Storage, std::vector<T>&&>
  GgufArray(std::vector<T> items) : items_(std::move(items)) {}

  GgufValueType element_type() const noexcept { return static_cast<GgufValueType>(items_.index()); }
  std::size_t size() const noexcept;
  bool empty() const noexcept { return size() == 0; }

  // The elements when they are stored as T, else nullptr.
  template <class T>
  const std::vector<T>* get_if() const noexcept {
    return std::get_if<std::vector<T>>(&items_);
  }
  const Storage& storage() const noexcept { return items_; }

  // The elements converted to integer type T, when they are integers and every one fits; else nullopt.
  // Writers differ in the integer type they pick for the same array (i32 vs u32 token types, say).
  template <std::integral T>
  std::optional<std::vector<T>> to_integers() const;

  // Up to `max_items` elements, then "..." and the count: `["<unk>", "<s>", ... (32000 items)]`.
  std::string summary(std::size_t max_items = 6) const;

  bool operator==(const GgufArray&) const = default;

 private:
  Storage items_;
};

class GgufValue {
 public:
  // Alternative i is GGUF type id i.
  using Storage = std::variant<std::uint8_t, std::int8_t, std::uint16_t, std::int16_t, std::uint32_t, std::int32_t,
                               float, bool, std::string, GgufArray, std::uint64_t, std::int64_t, double>;

  template <class T>
  static constexpr bool is_alternative = []<std::size_t... I>(std::index_sequence<I...>) {
    return (std::is_same_v<T, std::variant_alternative_t<I, Storage>> || ...);
  }
  (std::make_index_sequence<std::variant_size_v<Storage>>{});

  GgufValue() = default;  // u8 0
  // Only the exact alternative types convert, so `GgufValue(std::uint32_t{4})` is a u32 and nothing narrows
  // or turns into a bool by accident; text converts to string.
  // Implicit on purpose: `writer.add("llama.block_count", std::uint32_t{4})`.
  template <class T>
    requires(is_alternative<std::remove_cvref_t<T>> && !std::is_same_v<std::remove_cvref_t<T>, std::string>)
  GgufValue(T&& value) : value_(std::in_place_type<std::remove_cvref_t<T>>, std::forward<T>(value)) {}
  GgufValue(std::string text) : value_(std::in_place_type<std::string>, std::move(text)) {}
  GgufValue(std::string_view text) : value_(std::in_place_type<std::string>, text) {}
  GgufValue(const char* text) : value_(std::in_place_type<std::string>, text) {}
  template <class T>
    requires std::is_constructible_v<GgufArray, std::vector<T>&&>
  GgufValue(std::vector<T> items) : value_(std::in_place_type<GgufArray>, std::move(items)) {}

  GgufValueType type() const noexcept { return static_cast<GgufValueType>(value_.index()); }
  // "u32", "string", "array<string>", "array<array<i32>>", ...
  std::string type_name() const;

  template <class T>
  const T* get_if() const noexcept {
    return std::get_if<T>(&value_);
  }
  const GgufArray* array() const noexcept { return std::get_if<GgufArray>(&value_); }
  const Storage& storage() const noexcept { return value_; }

  // The value as integer type T when it is stored as any integer type and fits in T; else nullopt.
  template <std::integral T>
  std::optional<T> as_integer() const noexcept;
  // The value of an f32 or f64.
  std::optional<double> as_float() const noexcept;

  // The value for people: `4096`, `1e-05`, `true`, `"llama"`, `["<unk>", "<s>", ... (32000 items)]`.
  std::string summary(std::size_t max_items = 6) const;

  bool operator==(const GgufValue&) const = default;

 private:
  Storage value_;
};

namespace gguf_detail {

template <std::integral T, class U>
std::optional<T> convert_integer(U value) noexcept {
  if constexpr (std::is_same_v<U, bool> || std::is_same_v<T, bool>) {
    return std::nullopt;  // bool is its own GGUF type, never an integer
  } else if constexpr (std::is_integral_v<U>) {
    if (std::in_range<T>(value)) return static_cast<T>(value);
    return std::nullopt;
  } else {
    return std::nullopt;
  }
}

}  // namespace gguf_detail

template <std::integral T>
std::optional<T> GgufValue::as_integer() const noexcept {
  return std::visit([](const auto& v) -> std::optional<T> { return gguf_detail::convert_integer<T>(v); }, value_);
}

template <std::integral T>
std::optional<std::vector<T>> GgufArray::to_integers() const {
  return std::visit(
      [](const auto& items) -> std::optional<std::vector<T>> {
        using Element = typename std::remove_cvref_t<decltype(items)>::value_type;
        if constexpr (std::is_integral_v<Element> && !std::is_same_v<Element, bool>) {
          std::vector<T> out;
          out.reserve(items.size());
          for (const Element item : items) {
            auto converted = gguf_detail::convert_integer<T>(item);
            if (!converted) return std::nullopt;
            out.push_back(*converted);
          }
          return out;
        } else {
          return std::nullopt;
        }
      },
      items_);
}

}  // namespace loom::compute
