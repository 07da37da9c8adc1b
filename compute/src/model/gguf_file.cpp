#include "loom/compute/model/gguf_file.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <utility>

namespace loom::compute {
namespace {

// Numbers are copied out of the mapping as they lie; GGUF (as loom reads it) is little-endian.
static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

constexpr std::uint32_t kMaxDims = 4;
// Arrays of arrays are legal but no real file nests deeply; the limit keeps a hostile file from recursing
// the parser off the stack (each level costs only 12 bytes of file).
constexpr int kMaxArrayDepth = 8;
// Smallest possible encodings, used to bound counts by the bytes that remain before anything is allocated:
// key length + 1-byte key + value type + 1-byte value; name length + n_dims + one dim + type + offset.
constexpr std::uint64_t kMinKeyValueBytes = 8 + 1 + 4 + 1;
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
constexpr std::uint64_t kMaxDimension = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

std::uint64_t min_encoded_size(GgufValueType type) noexcept {
  switch (type) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::boolean: return 1;
    case GgufValueType::u16:
    case GgufValueType::i16: return 2;
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::f32: return 4;
    case GgufValueType::u64:
    case GgufValueType::i64:
    case GgufValueType::f64:
    case GgufValueType::string:  // the u64 length of an empty string
      return 8;
    case GgufValueType::array:  // element type + count of an empty array
      return 4 + 8;
  }
  return 1;
}

std::string n(std::uint64_t value) { return std::to_string(value); }

// How many elements to reserve for a count read from the file. The count has been checked against the bytes
// left, but an element in memory (a std::string, a TensorView) is several times larger than its smallest
// encoding, so a hostile count could still ask for many times the file size up front; past this cap the
// vector grows only as elements are actually parsed.
std::size_t reserve_size(std::uint64_t count) noexcept {
  constexpr std::uint64_t kMaxReserve = 1 << 16;
  return static_cast<std::size_t>(std::min(count, kMaxReserve));
}

// Reads little-endian items from the mapped bytes, checking each against the bytes that remain. Failures
// name the offset where the item starts, the key or tensor it belongs to, and what was expected.
class Reader {
 public:
  Reader(const std::string& path, const std::byte* data, std::uint64_t size) : path_(path), data_(data), size_(size) {}

  std::uint64_t pos() const noexcept { return pos_; }
  std::uint64_t remaining() const noexcept { return size_ - pos_; }
  const std::byte* here() const noexcept { return data_ + pos_; }
  void skip(std::uint64_t bytes) noexcept { pos_ += bytes; }

  [[noreturn]] void fail(std::uint64_t at, std::string_view key, std::string detail) const {
    throw ModelFileError(path_, at, std::string(key), std::move(detail));
  }

  std::string file_size_text() const { return "file size " + n(size_) + " bytes"; }

  void need(std::uint64_t bytes, const char* what, std::string_view key) const {
    if (bytes > remaining()) {
      fail(pos_, key,
           std::string(what) + " needs " + n(bytes) + " bytes but only " + n(remaining()) + " remain (" +
               file_size_text() + ")");
    }
  }

  template <class T>
  T read(const char* what, std::string_view key) {
    need(sizeof(T), what, key);
    T value;
    std::memcpy(&value, here(), sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string read_string(const char* what, std::string_view key) {
    const std::uint64_t at = pos_;
    const auto length = read<std::uint64_t>(what, key);
    if (length > remaining()) {
      fail(at, key,
           std::string(what) + " length " + n(length) + " exceeds the " + n(remaining()) + " bytes left in the file (" +
               file_size_text() + ")");
    }
    std::string text(reinterpret_cast<const char*>(here()), static_cast<std::size_t>(length));
    pos_ += length;
    return text;
  }

  // `count` elements of a fixed-size type; the caller has checked that they fit.
  template <class T>
  std::vector<T> read_vector(std::uint64_t count) {
    std::vector<T> items(static_cast<std::size_t>(count));
    if (count > 0) std::memcpy(items.data(), here(), static_cast<std::size_t>(count) * sizeof(T));
    pos_ += count * sizeof(T);
    return items;
  }

  bool read_bool(std::string_view key) {
    const std::uint64_t at = pos_;
    const auto byte = read<std::uint8_t>("bool value", key);
    if (byte > 1) fail(at, key, "bool value " + n(byte) + " (expected 0 or 1)");
    return byte == 1;
  }

 private:
  const std::string& path_;
  const std::byte* data_;
  std::uint64_t size_;
  std::uint64_t pos_ = 0;
};

GgufValueType read_value_type(Reader& reader, const char* what, std::string_view key) {
  const std::uint64_t at = reader.pos();
  const auto raw = reader.read<std::uint32_t>(what, key);
  const auto type = find_gguf_value_type(raw);
  if (!type) reader.fail(at, key, "unknown " + std::string(what) + " " + n(raw) + " (expected 0 to 12)");
  return *type;
}

GgufArray read_array(Reader& reader, std::string_view key, int depth);

GgufValue read_value(Reader& reader, GgufValueType type, std::string_view key) {
  switch (type) {
    case GgufValueType::u8: return reader.read<std::uint8_t>("u8 value", key);
    case GgufValueType::i8: return reader.read<std::int8_t>("i8 value", key);
    case GgufValueType::u16: return reader.read<std::uint16_t>("u16 value", key);
    case GgufValueType::i16: return reader.read<std::int16_t>("i16 value", key);
    case GgufValueType::u32: return reader.read<std::uint32_t>("u32 value", key);
    case GgufValueType::i32: return reader.read<std::int32_t>("i32 value", key);
    case GgufValueType::f32: return reader.read<float>("f32 value", key);
    case GgufValueType::boolean: return reader.read_bool(key);
    case GgufValueType::string: return reader.read_string("string value", key);
    case GgufValueType::array: return read_array(reader, key, 1);
    case GgufValueType::u64: return reader.read<std::uint64_t>("u64 value", key);
    case GgufValueType::i64: return reader.read<std::int64_t>("i64 value", key);
    case GgufValueType::f64: return reader.read<double>("f64 value", key);
  }
  return {};  // unreachable: the type was validated
}

GgufArray read_array(Reader& reader, std::string_view key, int depth) {
  const std::uint64_t type_at = reader.pos();
  const GgufValueType type = read_value_type(reader, "array element type", key);
  if (type == GgufValueType::array && depth >= kMaxArrayDepth) {
    reader.fail(type_at, key, "arrays nested more than " + n(kMaxArrayDepth) + " levels deep");
  }
  const std::uint64_t count_at = reader.pos();
  const auto count = reader.read<std::uint64_t>("array length", key);
  const std::uint64_t element_bytes = min_encoded_size(type);
  if (count > reader.remaining() / element_bytes) {
    reader.fail(count_at, key,
                "array length " + n(count) + " exceeds what the file can hold (" + n(reader.remaining()) +
                    " bytes left, each " + std::string(name(type)) + " element takes at least " + n(element_bytes) +
                    "; " + reader.file_size_text() + ")");
  }
  switch (type) {
    case GgufValueType::u8: return reader.read_vector<std::uint8_t>(count);
    case GgufValueType::i8: return reader.read_vector<std::int8_t>(count);
    case GgufValueType::u16: return reader.read_vector<std::uint16_t>(count);
    case GgufValueType::i16: return reader.read_vector<std::int16_t>(count);
    case GgufValueType::u32: return reader.read_vector<std::uint32_t>(count);
    case GgufValueType::i32: return reader.read_vector<std::int32_t>(count);
    case GgufValueType::f32: return reader.read_vector<float>(count);
    case GgufValueType::u64: return reader.read_vector<std::uint64_t>(count);
    case GgufValueType::i64: return reader.read_vector<std::int64_t>(count);
    case GgufValueType::f64: return reader.read_vector<double>(count);
    case GgufValueType::boolean: {
      std::vector<bool> items(static_cast<std::size_t>(count));
      for (std::uint64_t i = 0; i < count; ++i) items[i] = reader.read_bool(key);
      return items;
    }
    case GgufValueType::string: {
      std::vector<std::string> items;
      items.reserve(reserve_size(count));
      for (std::uint64_t i = 0; i < count; ++i) items.push_back(reader.read_string("array string", key));
      return items;
    }
    case GgufValueType::array: {
      std::vector<GgufArray> items;
      items.reserve(reserve_size(count));
      for (std::uint64_t i = 0; i < count; ++i) items.push_back(read_array(reader, key, depth + 1));
      return items;
    }
  }
  return {};  // unreachable
}

std::string dims_text(const std::vector<std::int64_t>& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

std::string printable_magic(const std::byte* bytes) {
  std::string text;
  for (int i = 0; i < 4; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    static constexpr char kHex[] = "0123456789abcdef";
    text += (i > 0 ? " " : "");
    text += kHex[c >> 4];
    text += kHex[c & 0xF];
  }
  return text;
}

std::string found_text(const GgufValue& value) {
  std::string text = "found " + value.type_name();
  text += " " + value.summary(3);
  return text;
}

}  // namespace

bool GgufFile::has_magic(const std::string& path) {
  std::array<std::byte, 4> magic{};
  return read_file_prefix(path, magic) == magic.size() && std::memcmp(magic.data(), "GGUF", 4) == 0;
}

GgufFile GgufFile::open(std::string path) {
  GgufFile file(MappedFile(std::move(path)));
  file.parse();
  return file;
}

void GgufFile::parse() {
  Reader reader(file_.path(), file_.data(), file_.size());

  reader.need(4, "the magic \"GGUF\"", {});
  if (std::memcmp(reader.here(), "GGUF", 4) != 0) {
    reader.fail(0, {}, "bad magic " + printable_magic(reader.here()) + " (expected \"GGUF\", 47 47 55 46)");
  }
  reader.skip(4);

  const std::uint64_t version_at = reader.pos();
  version_ = reader.read<std::uint32_t>("the version", {});
  if (version_ != 2 && version_ != 3) {
    const std::uint32_t swapped = __builtin_bswap32(version_);
    if (swapped >= 1 && swapped <= 3) {
      reader.fail(version_at, {},
                  "version " + n(swapped) + " of a big-endian GGUF; only little-endian files are supported");
    }
    if (version_ == 1) reader.fail(version_at, {}, "GGUF version 1 is not supported (expected version 2 or 3)");
    reader.fail(version_at, {}, "unsupported GGUF version " + n(version_) + " (expected 2 or 3)");
  }

  const std::uint64_t tensor_count_at = reader.pos();
  const auto tensor_count = reader.read<std::uint64_t>("the tensor count", {});
  const std::uint64_t kv_count_at = reader.pos();
  const auto kv_count = reader.read<std::uint64_t>("the metadata entry count", {});
  auto check_tensor_count = [&] {
    if (tensor_count > reader.remaining() / kMinTensorInfoBytes) {
      reader.fail(tensor_count_at, {},
                  "tensor count " + n(tensor_count) + " exceeds what the file can hold (" + reader.file_size_text() +
                      ", " + n(reader.remaining()) + " left at offset " + n(reader.pos()) +
                      ", each tensor info takes at least " + n(kMinTensorInfoBytes) + ")");
    }
  };
  check_tensor_count();
  if (kv_count > reader.remaining() / kMinKeyValueBytes) {
    reader.fail(kv_count_at, {},
                "metadata entry count " + n(kv_count) + " exceeds what the file can hold (" + reader.file_size_text() +
                    ", " + n(reader.remaining()) + " left at offset " + n(reader.pos()) +
                    ", each entry takes at least " + n(kMinKeyValueBytes) + ")");
  }

  metadata_.reserve(reserve_size(kv_count));
  for (std::uint64_t i = 0; i < kv_count; ++i) {
    const std::uint64_t at = reader.pos();
    std::string key = reader.read_string("metadata key", {});
    if (key.empty()) reader.fail(at, {}, "metadata entry " + n(i) + " has an empty key");
    if (const auto found = metadata_index_.find(key); found != metadata_index_.end()) {
      reader.fail(at, key, "duplicate metadata key (first at offset " + n(metadata_[found->second].offset) + ")");
    }
    const GgufValueType type = read_value_type(reader, "value type", key);
    GgufValue value = read_value(reader, type, key);
    metadata_index_.emplace(key, metadata_.size());
    metadata_.push_back(GgufKeyValue{std::move(key), std::move(value), at});
  }

  if (const auto found = metadata_index_.find(kAlignmentKey); found != metadata_index_.end()) {
    const GgufKeyValue& entry = metadata_[found->second];
    const auto alignment = entry.value.as_integer<std::uint32_t>();
    if (!alignment) reader.fail(entry.offset, entry.key, "expected a u32 alignment, " + found_text(entry.value));
    if (*alignment == 0 || !std::has_single_bit(*alignment)) {
      reader.fail(entry.offset, entry.key, "alignment " + n(*alignment) + " is not a power of two");
    }
    alignment_ = *alignment;
  }

  check_tensor_count();                        // again, now against what is left after the metadata
  std::vector<std::uint64_t> info_offsets;     // where each tensor info starts, for duplicate-name errors
  std::vector<std::uint64_t> data_offset_ats;  // where each tensor's data offset is stored
  std::vector<std::uint64_t> relative_offsets;
  tensors_.reserve(reserve_size(tensor_count));
  info_offsets.reserve(reserve_size(tensor_count));
  data_offset_ats.reserve(reserve_size(tensor_count));
  relative_offsets.reserve(reserve_size(tensor_count));
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    const std::uint64_t at = reader.pos();
    std::string tensor_name = reader.read_string("tensor name", {});
    if (tensor_name.empty()) reader.fail(at, {}, "tensor " + n(i) + " has an empty name");
    if (const auto found = tensor_index_.find(tensor_name); found != tensor_index_.end()) {
      reader.fail(at, tensor_name, "duplicate tensor name (first at offset " + n(info_offsets[found->second]) + ")");
    }

    const std::uint64_t n_dims_at = reader.pos();
    const auto n_dims = reader.read<std::uint32_t>("tensor dimension count", tensor_name);
    if (n_dims == 0 || n_dims > kMaxDims) {
      reader.fail(n_dims_at, tensor_name,
                  "tensor has " + n(n_dims) + " dimensions (expected 1 to " + n(kMaxDims) + ")");
    }
    std::vector<std::int64_t> dims;
    dims.reserve(n_dims);
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t dim_at = reader.pos();
      const auto dim = reader.read<std::uint64_t>("tensor dimension", tensor_name);
      if (dim == 0 || dim > kMaxDimension) {
        reader.fail(dim_at, tensor_name, "dimension " + n(d) + " is " + n(dim) + " (expected 1 to 2^63-1)");
      }
      if (elements > kMaxDimension / dim) {
        dims.push_back(static_cast<std::int64_t>(dim));
        reader.fail(dim_at, tensor_name,
                    "dimensions " + dims_text(dims) + " overflow: the element count exceeds 2^63-1");
      }
      elements *= dim;
      dims.push_back(static_cast<std::int64_t>(dim));
    }

    const std::uint64_t type_at = reader.pos();
    const auto raw_type = reader.read<std::uint32_t>("tensor type", tensor_name);
    const TensorTypeTraits* traits = find_tensor_type(raw_type);
    if (traits == nullptr) reader.fail(type_at, tensor_name, "unknown tensor type id " + n(raw_type));
    if (static_cast<std::uint64_t>(dims[0]) % traits->block_elements != 0) {
      reader.fail(type_at, tensor_name,
                  "row length " + n(static_cast<std::uint64_t>(dims[0])) + " is not a whole number of " +
                      std::string(traits->name) + " blocks (" + n(traits->block_elements) + " values each)");
    }
    const auto bytes = tensor_bytes(traits->type, elements);
    if (!bytes) {
      reader.fail(
          type_at, tensor_name,
          "dimensions " + dims_text(dims) + " of type " + std::string(traits->name) + " overflow the byte size");
    }

    const std::uint64_t offset_at = reader.pos();
    const auto relative = reader.read<std::uint64_t>("tensor data offset", tensor_name);
    if (relative % alignment_ != 0) {
      reader.fail(offset_at, tensor_name,
                  "data offset " + n(relative) + " is not a multiple of the alignment " + n(alignment_));
    }

    tensor_index_.emplace(tensor_name, tensors_.size());
    tensors_.push_back(TensorView{std::move(tensor_name), traits->type, std::move(dims), nullptr, *bytes});
    info_offsets.push_back(at);
    data_offset_ats.push_back(offset_at);
    relative_offsets.push_back(relative);
  }

  // pos <= size < 2^63 and alignment < 2^32: no overflow.
  data_offset_ = (reader.pos() + alignment_ - 1) / alignment_ * alignment_;
  const std::uint64_t data_bytes = file_.size() > data_offset_ ? file_.size() - data_offset_ : 0;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    TensorView& tensor = tensors_[i];
    const std::uint64_t relative = relative_offsets[i];
    if (relative > data_bytes || tensor.bytes > data_bytes - relative) {
      reader.fail(data_offset_ats[i], tensor.name,
                  "tensor data (" + n(tensor.bytes) + " bytes at data offset " + n(relative) + ", file offset " +
                      n(data_offset_) + " + " + n(relative) + ") runs past the end of the file (" +
                      reader.file_size_text() + ")");
    }
    tensor.data = file_.data() + data_offset_ + relative;
  }
}

// ---- metadata access ----------------------------------------------------------------------------------

const GgufValue* GgufFile::find(std::string_view key) const noexcept {
  const auto found = metadata_index_.find(key);
  return found == metadata_index_.end() ? nullptr : &metadata_[found->second].value;
}

void GgufFile::fail_key(std::string_view key, std::string detail) const {
  std::optional<std::uint64_t> offset;
  if (const auto found = metadata_index_.find(key); found != metadata_index_.end()) {
    offset = metadata_[found->second].offset;
  }
  throw ModelFileError(path(), offset, std::string(key), std::move(detail));
}

const GgufValue& GgufFile::get(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) fail_key(key, "missing metadata key");
  return *value;
}

namespace {

// "expected u32, found i32 -1 (out of range)" / "expected string, found u32 4"
std::string mismatch(std::string_view expected, const GgufValue& value) {
  std::string text = "expected " + std::string(expected) + ", " + found_text(value);
  if (is_integer(value.type()) && !value.array()) text += " (out of range)";
  return text;
}

}  // namespace

template <class T>
T GgufFile::get_integer(std::string_view key, GgufValueType expected) const {
  const GgufValue* value = find(key);
  if (value == nullptr) fail_key(key, "missing metadata key (expected " + std::string(name(expected)) + ")");
  const auto converted = value->as_integer<T>();
  if (!converted) fail_key(key, mismatch(name(expected), *value));
  return *converted;
}

template <class T>
std::optional<T> GgufFile::find_integer(std::string_view key, GgufValueType expected) const {
  if (!has(key)) return std::nullopt;
  return get_integer<T>(key, expected);
}

const std::string& GgufFile::get_string(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) fail_key(key, "missing metadata key (expected string)");
  const auto* text = value->get_if<std::string>();
  if (text == nullptr) fail_key(key, mismatch("string", *value));
  return *text;
}

std::uint32_t GgufFile::get_u32(std::string_view key) const {
  return get_integer<std::uint32_t>(key, GgufValueType::u32);
}
std::int32_t GgufFile::get_i32(std::string_view key) const {
  return get_integer<std::int32_t>(key, GgufValueType::i32);
}
std::uint64_t GgufFile::get_u64(std::string_view key) const {
  return get_integer<std::uint64_t>(key, GgufValueType::u64);
}
std::int64_t GgufFile::get_i64(std::string_view key) const {
  return get_integer<std::int64_t>(key, GgufValueType::i64);
}

float GgufFile::get_f32(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) fail_key(key, "missing metadata key (expected f32)");
  const auto number = value->as_float();
  if (!number) fail_key(key, mismatch("f32", *value));
  return static_cast<float>(*number);
}

bool GgufFile::get_bool(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) fail_key(key, "missing metadata key (expected bool)");
  const auto* flag = value->get_if<bool>();
  if (flag == nullptr) fail_key(key, mismatch("bool", *value));
  return *flag;
}

const GgufArray& GgufFile::get_array(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) fail_key(key, "missing metadata key (expected an array)");
  const GgufArray* items = value->array();
  if (items == nullptr) fail_key(key, mismatch("an array", *value));
  return *items;
}

const std::vector<std::string>& GgufFile::get_string_array(std::string_view key) const {
  const GgufArray& items = get_array(key);
  const auto* strings = items.get_if<std::string>();
  if (strings == nullptr) fail_key(key, mismatch("array<string>", *find(key)));
  return *strings;
}

std::span<const float> GgufFile::get_f32_array(std::string_view key) const {
  const GgufArray& items = get_array(key);
  const auto* floats = items.get_if<float>();
  if (floats == nullptr) fail_key(key, mismatch("array<f32>", *find(key)));
  return *floats;
}

std::vector<std::int32_t> GgufFile::get_i32_array(std::string_view key) const {
  const GgufArray& items = get_array(key);
  auto integers = items.to_integers<std::int32_t>();
  if (!integers) {
    fail_key(key, "expected an integer array whose values fit in i32, " + found_text(*find(key)));
  }
  return std::move(*integers);
}

std::optional<std::string> GgufFile::find_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}
std::optional<std::uint32_t> GgufFile::find_u32(std::string_view key) const {
  return find_integer<std::uint32_t>(key, GgufValueType::u32);
}
std::optional<std::int32_t> GgufFile::find_i32(std::string_view key) const {
  return find_integer<std::int32_t>(key, GgufValueType::i32);
}
std::optional<std::uint64_t> GgufFile::find_u64(std::string_view key) const {
  return find_integer<std::uint64_t>(key, GgufValueType::u64);
}
std::optional<float> GgufFile::find_f32(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_f32(key);
}
std::optional<bool> GgufFile::find_bool(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_bool(key);
}

// ---- tensors ------------------------------------------------------------------------------------------

const TensorView* GgufFile::find_tensor(std::string_view tensor_name) const noexcept {
  const auto found = tensor_index_.find(tensor_name);
  return found == tensor_index_.end() ? nullptr : &tensors_[found->second];
}

const TensorView& GgufFile::get_tensor(std::string_view tensor_name) const {
  const TensorView* tensor = find_tensor(tensor_name);
  if (tensor == nullptr) throw ModelFileError(path(), std::nullopt, std::string(tensor_name), "missing tensor");
  return *tensor;
}

}  // namespace loom::compute
