#include "loom/compute/vulkan/vulkan_pipeline.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "driver_allocations.hpp"

namespace loom::compute::vulkan {
namespace detail {
struct EmbeddedShader {
  std::string_view name;
  std::span<const std::uint32_t> words;
};
extern const EmbeddedShader kEmbeddedShaders[];
extern const std::size_t kEmbeddedShaderCount;
}  // namespace detail

std::span<const std::uint32_t> shader_code(std::string_view name) {
  for (std::size_t i = 0; i < detail::kEmbeddedShaderCount; ++i) {
    if (detail::kEmbeddedShaders[i].name == name) return detail::kEmbeddedShaders[i].words;
  }
  throw std::out_of_range("no Vulkan shader named '" + std::string(name) + "' is built into this library");
}

std::vector<std::string> shader_names() {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < detail::kEmbeddedShaderCount; ++i) names.emplace_back(detail::kEmbeddedShaders[i].name);
  std::sort(names.begin(), names.end());
  return names;
}

ComputePipeline::ComputePipeline(VulkanContext& context, std::string_view shader, std::uint32_t bindings,
                                 std::uint32_t push_constant_bytes, std::span<const std::uint32_t> specialization)
    : device_(context.device()), shader_(shader), bindings_(bindings), push_constant_bytes_(push_constant_bytes) {
  if (push_constant_bytes % 4 != 0 || push_constant_bytes > context.description().max_push_constant_bytes) {
    throw std::invalid_argument("shader " + shader_ + ": push constants of " + std::to_string(push_constant_bytes) +
                                " bytes (a multiple of 4, at most " +
                                std::to_string(context.description().max_push_constant_bytes) + ")");
  }
  const auto code = shader_code(shader);
  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = code.size_bytes();
  module_info.pCode = code.data();
  VkShaderModule module = VK_NULL_HANDLE;
  check(vkCreateShaderModule(device_, &module_info, nullptr, &module), "vkCreateShaderModule");

  std::vector<VkDescriptorSetLayoutBinding> layout_bindings(bindings);
  for (std::uint32_t b = 0; b < bindings; ++b) {
    layout_bindings[b] = {b, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  }
  VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set_info.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  set_info.bindingCount = bindings;
  set_info.pBindings = layout_bindings.data();
  const VkPushConstantRange push_range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_constant_bytes};
  std::vector<VkSpecializationMapEntry> entries(specialization.size());
  for (std::uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, i * 4, 4};
  const VkSpecializationInfo specialization_info{static_cast<std::uint32_t>(entries.size()), entries.data(),
                                                 specialization.size_bytes(), specialization.data()};
  try {
    check(vkCreateDescriptorSetLayout(device_, &set_info, nullptr, &set_layout_), "vkCreateDescriptorSetLayout");
    VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    layout_info.setLayoutCount = 1;
    layout_info.pSetLayouts = &set_layout_;
    layout_info.pushConstantRangeCount = push_constant_bytes > 0 ? 1 : 0;
    layout_info.pPushConstantRanges = &push_range;
    check(vkCreatePipelineLayout(device_, &layout_info, nullptr, &layout_), "vkCreatePipelineLayout");
    VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = module;
    info.stage.pName = "main";
    info.stage.pSpecializationInfo = entries.empty() ? nullptr : &specialization_info;
    info.layout = layout_;
    const detail::DriverAllocations driver;  // the driver's compiler keeps caches for the process's life
    const VkResult result = vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &info, nullptr, &pipeline_);
    if (result != VK_SUCCESS) throw VulkanError("vkCreateComputePipelines(" + shader_ + ")", result);
  } catch (...) {
    vkDestroyShaderModule(device_, module, nullptr);
    if (layout_ != VK_NULL_HANDLE) vkDestroyPipelineLayout(device_, layout_, nullptr);
    if (set_layout_ != VK_NULL_HANDLE) vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
    throw;
  }
  vkDestroyShaderModule(device_, module, nullptr);  // the pipeline keeps what it needs
}

ComputePipeline::~ComputePipeline() {
  vkDestroyPipeline(device_, pipeline_, nullptr);
  vkDestroyPipelineLayout(device_, layout_, nullptr);
  vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
}

const ComputePipeline& PipelineCache::get(std::string_view shader, std::uint32_t bindings,
                                          std::uint32_t push_constant_bytes,
                                          std::span<const std::uint32_t> specialization) {
  Key key{std::string(shader), bindings, push_constant_bytes,
          std::vector<std::uint32_t>(specialization.begin(), specialization.end())};
  auto found = pipelines_.find(key);
  if (found == pipelines_.end()) {
    auto pipeline = std::make_unique<ComputePipeline>(context_, shader, bindings, push_constant_bytes, specialization);
    found = pipelines_.emplace(std::move(key), std::move(pipeline)).first;
  }
  return *found->second;
}

}  // namespace loom::compute::vulkan
