// Compute pipelines made from the SPIR-V that glslc compiled at build time (compute/src/vulkan/shaders/*.comp,
// embedded in the library by name: the file's stem), and the cache that makes each (shader, specialization)
// pipeline once per device. A pipeline's interface is positional: storage buffers at set 0, bindings
// 0..bindings-1 (pushed per dispatch, VK_KHR_push_descriptor), one push-constant block of push_constant_bytes,
// and specialization constants with ids 0..n-1 (workgroup sizes and other shape constants a shader is
// specialised for).
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "loom/compute/vulkan/vulkan_context.hpp"

namespace loom::compute::vulkan {

// The embedded SPIR-V of a shader by name ("rms_norm" for shaders/rms_norm.comp). Throws std::out_of_range
// naming an unknown shader.
std::span<const std::uint32_t> shader_code(std::string_view name);
// Every embedded shader's name, sorted.
std::vector<std::string> shader_names();

class ComputePipeline {
 public:
  ComputePipeline(VulkanContext& context, std::string_view shader, std::uint32_t bindings,
                  std::uint32_t push_constant_bytes, std::span<const std::uint32_t> specialization = {});
  ~ComputePipeline();
  ComputePipeline(const ComputePipeline&) = delete;
  ComputePipeline& operator=(const ComputePipeline&) = delete;

  const std::string& shader() const noexcept { return shader_; }
  std::uint32_t bindings() const noexcept { return bindings_; }
  std::uint32_t push_constant_bytes() const noexcept { return push_constant_bytes_; }
  VkPipeline pipeline() const noexcept { return pipeline_; }
  VkPipelineLayout layout() const noexcept { return layout_; }

 private:
  VkDevice device_ = VK_NULL_HANDLE;
  std::string shader_;
  std::uint32_t bindings_ = 0;
  std::uint32_t push_constant_bytes_ = 0;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

// Pipelines by (shader, bindings, push-constant size, specialization), made on first use and kept for the
// cache's life (a load makes the ones its model needs; steps only look them up).
class PipelineCache {
 public:
  explicit PipelineCache(VulkanContext& context) : context_(context) {}
  const ComputePipeline& get(std::string_view shader, std::uint32_t bindings, std::uint32_t push_constant_bytes,
                             std::span<const std::uint32_t> specialization = {});
  std::size_t size() const noexcept { return pipelines_.size(); }
  VulkanContext& context() const noexcept { return context_; }

 private:
  using Key = std::tuple<std::string, std::uint32_t, std::uint32_t, std::vector<std::uint32_t>>;
  VulkanContext& context_;
  std::map<Key, std::unique_ptr<ComputePipeline>> pipelines_;
};

}  // namespace loom::compute::vulkan
