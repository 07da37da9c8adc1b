// KvCacheOptions: the KV storage a backend allocates at load: block size, element type and size. Part of
// the load options every backend takes (backend.hpp); the CPU backend's PagedKvCache reads it.
#pragma once

#include <cstdint>

#include "loom/compute/tensor_type.hpp"

namespace loom::compute {

struct KvCacheOptions {
  std::int64_t block_size = 16;       // token slots per block, >= 1
  TensorType type = TensorType::f16;  // f16 or f32
  std::uint64_t budget_bytes = 0;     // K and V of all layers together; 0: room for the token count asked
};

}  // namespace loom::compute
