// KvCache: where the forward pass keeps each layer's keys and values for the positions it has seen, stored
// as IEEE half floats: half the memory of F32 (the cache, not the weights, bounds how many sequences fit),
// at a precision attention does not notice. For now one contiguous buffer per sequence
// ([layer][position][kv_dim] for K and for V); the paged-cache issue replaces it with block tables over a
// shared pool, behind the same key()/value() accessors.
#pragma once

#include <cstdint>
#include <vector>

namespace loom::compute {

class KvCache {
 public:
  KvCache(std::int64_t layers, std::int64_t context_length, std::int64_t kv_dim)
      : layers_(layers), context_(context_length), kv_dim_(kv_dim),
        keys_(static_cast<std::size_t>(layers * context_length * kv_dim)),
        values_(keys_.size()) {}

  std::int64_t context_length() const noexcept { return context_; }
  std::uint16_t* key(std::int64_t layer, std::int64_t position) noexcept { return &keys_[offset(layer, position)]; }
  std::uint16_t* value(std::int64_t layer, std::int64_t position) noexcept { return &values_[offset(layer, position)]; }

 private:
  std::size_t offset(std::int64_t layer, std::int64_t position) const noexcept {
    return static_cast<std::size_t>((layer * context_ + position) * kv_dim_);
  }
  std::int64_t layers_, context_, kv_dim_;
  std::vector<std::uint16_t> keys_, values_;  // f16 bits
};

}  // namespace loom::compute
