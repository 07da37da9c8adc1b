#include "loom/compute/model/gguf_writer.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/model/model_file_error.hpp"

namespace loom::compute {
namespace {

static_assert(std::endian::native == std::endian::little, "the GGUF writer assumes a little-endian host");

constexpr std::uint32_t kVersion = 3;

class Bytes {
 public:
  explicit Bytes(std::vector<std::byte>& out) : out_(out) {}

  void raw(const void* data, std::size_t size) {
    // resize + memcpy rather than insert(): GCC 12 at -O3 reports a false -Wstringop-overflow on insert.
    if (size == 0) return;
    const std::size_t at = out_.size();
    out_.resize(at + size);
    std::memcpy(out_.data() + at, data, size);
  }
  template <class T>
  void put(T value) {
    raw(&value, sizeof(T));
  }
  void string(const std::string& text) {
    put<std::uint64_t>(text.size());
    raw(text.data(), text.size());
  }
  void pad_to(std::uint64_t alignment) { out_.resize((out_.size() + alignment - 1) / alignment * alignment); }

  void array(const GgufArray& items) {
    put(static_cast<std::uint32_t>(items.element_type()));
    put<std::uint64_t>(items.size());
    std::visit(
        [this](const auto& elements) {
          using Element = typename std::remove_cvref_t<decltype(elements)>::value_type;
          if constexpr (std::is_same_v<Element, bool>) {
            for (const bool flag : elements) put<std::uint8_t>(flag ? 1 : 0);
          } else if constexpr (std::is_same_v<Element, std::string>) {
            for (const auto& text : elements) string(text);
          } else if constexpr (std::is_same_v<Element, GgufArray>) {
            for (const auto& nested : elements) array(nested);
          } else {
            raw(elements.data(), elements.size() * sizeof(Element));
          }
        },
        items.storage());
  }

  void value(const GgufValue& v) {
    std::visit(
        [this](const auto& item) {
          using Item = std::remove_cvref_t<decltype(item)>;
          if constexpr (std::is_same_v<Item, bool>) {
            put<std::uint8_t>(item ? 1 : 0);
          } else if constexpr (std::is_same_v<Item, std::string>) {
            string(item);
          } else if constexpr (std::is_same_v<Item, GgufArray>) {
            array(item);
          } else {
            put(item);
          }
        },
        v.storage());
  }

 private:
  std::vector<std::byte>& out_;
};

std::uint64_t aligned(std::uint64_t offset, std::uint64_t alignment) {
  return (offset + alignment - 1) / alignment * alignment;
}

}  // namespace

void GgufWriter::add(std::string key, GgufValue value) {
  if (key.empty()) throw std::invalid_argument("GGUF metadata key must not be empty");
  if (std::any_of(metadata_.begin(), metadata_.end(), [&](const Entry& e) { return e.key == key; })) {
    throw std::invalid_argument("duplicate GGUF metadata key '" + key + "'");
  }
  if (key == GgufFile::kAlignmentKey) {
    const auto alignment = value.as_integer<std::uint32_t>();
    if (value.type() != GgufValueType::u32 || !alignment || *alignment == 0 || !std::has_single_bit(*alignment)) {
      throw std::invalid_argument("general.alignment must be a u32 power of two, got " + value.type_name() + " " +
                                  value.summary());
    }
  }
  metadata_.push_back(Entry{std::move(key), std::move(value)});
}

void GgufWriter::set_alignment(std::uint32_t alignment) {
  const auto existing =
      std::find_if(metadata_.begin(), metadata_.end(), [](const Entry& e) { return e.key == GgufFile::kAlignmentKey; });
  if (existing != metadata_.end()) {
    if (alignment == 0 || !std::has_single_bit(alignment)) {
      throw std::invalid_argument("general.alignment must be a power of two, got " + std::to_string(alignment));
    }
    existing->value = alignment;
  } else {
    add(std::string(GgufFile::kAlignmentKey), alignment);
  }
}

std::uint32_t GgufWriter::alignment() const {
  for (const auto& e : metadata_) {
    if (e.key == GgufFile::kAlignmentKey) return *e.value.as_integer<std::uint32_t>();  // validated in add()
  }
  return GgufFile::kDefaultAlignment;
}

void GgufWriter::add_tensor(std::string name, TensorType type, std::vector<std::int64_t> dims,
                            std::span<const std::byte> data) {
  if (name.empty()) throw std::invalid_argument("GGUF tensor name must not be empty");
  if (std::any_of(tensors_.begin(), tensors_.end(), [&](const Tensor& t) { return t.name == name; })) {
    throw std::invalid_argument("duplicate GGUF tensor name '" + name + "'");
  }
  if (dims.empty() || dims.size() > 4) {
    throw std::invalid_argument("tensor '" + name + "' needs 1 to 4 dimensions, got " + std::to_string(dims.size()));
  }
  std::uint64_t elements = 1;
  for (const auto d : dims) {
    if (d <= 0) throw std::invalid_argument("tensor '" + name + "' has a dimension " + std::to_string(d));
    if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(d), &elements)) {
      throw std::invalid_argument("tensor '" + name + "' has too many elements");
    }
  }
  const auto& t = traits(type);
  const auto bytes = tensor_bytes(type, elements);
  if (static_cast<std::uint64_t>(dims[0]) % t.block_elements != 0 || !bytes) {
    throw std::invalid_argument("tensor '" + name + "': row length " + std::to_string(dims[0]) +
                                " is not a whole number of " + std::string(t.name) + " blocks");
  }
  if (*bytes != data.size()) {
    throw std::invalid_argument("tensor '" + name + "': " + std::string(t.name) + " data of these dims takes " +
                                std::to_string(*bytes) + " bytes, got " + std::to_string(data.size()));
  }
  tensors_.push_back(Tensor{std::move(name), type, std::move(dims), std::vector<std::byte>(data.begin(), data.end())});
}

std::vector<std::byte> GgufWriter::header() const {
  const std::uint64_t align = alignment();
  std::vector<std::byte> out;
  Bytes bytes(out);
  bytes.raw("GGUF", 4);
  bytes.put<std::uint32_t>(kVersion);
  bytes.put<std::uint64_t>(tensors_.size());
  bytes.put<std::uint64_t>(metadata_.size());
  for (const auto& entry : metadata_) {
    bytes.string(entry.key);
    bytes.put(static_cast<std::uint32_t>(entry.value.type()));
    bytes.value(entry.value);
  }
  std::uint64_t offset = 0;
  for (const auto& tensor : tensors_) {
    bytes.string(tensor.name);
    bytes.put<std::uint32_t>(static_cast<std::uint32_t>(tensor.dims.size()));
    for (const auto d : tensor.dims) bytes.put<std::uint64_t>(static_cast<std::uint64_t>(d));
    bytes.put(static_cast<std::uint32_t>(tensor.type));
    bytes.put<std::uint64_t>(offset);
    offset = aligned(offset + tensor.data.size(), align);
  }
  bytes.pad_to(align);
  return out;
}

std::vector<std::byte> GgufWriter::to_bytes() const {
  std::vector<std::byte> out = header();
  const std::uint64_t align = alignment();
  for (const auto& tensor : tensors_) {
    out.insert(out.end(), tensor.data.begin(), tensor.data.end());
    out.resize(aligned(out.size(), align));
  }
  return out;
}

void GgufWriter::write(const std::string& path) const {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  auto check = [&](const char* what) {
    if (!file) {
      throw ModelFileError(path, std::nullopt, {}, std::string(what) + ": " + std::generic_category().message(errno));
    }
  };
  check("cannot open for writing");
  const std::vector<std::byte> head = header();
  file.write(reinterpret_cast<const char*>(head.data()), static_cast<std::streamsize>(head.size()));
  const std::uint64_t align = alignment();
  static constexpr char kZeros[256] = {};
  for (const auto& tensor : tensors_) {
    file.write(reinterpret_cast<const char*>(tensor.data.data()), static_cast<std::streamsize>(tensor.data.size()));
    std::uint64_t padding = aligned(tensor.data.size(), align) - tensor.data.size();
    while (padding > 0) {
      const auto chunk = std::min<std::uint64_t>(padding, sizeof(kZeros));
      file.write(kZeros, static_cast<std::streamsize>(chunk));
      padding -= chunk;
    }
    check("cannot write");
  }
  file.close();
  check("cannot write");
}

}  // namespace loom::compute
