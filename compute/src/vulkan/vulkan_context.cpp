#include "loom/compute/vulkan/vulkan_context.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>

#include "driver_allocations.hpp"

namespace loom::compute::vulkan {
namespace {

// The Vulkan version the shaders are compiled for (glslc --target-env=vulkan1.2).
constexpr std::uint32_t kRequiredApi = VK_API_VERSION_1_2;

std::string version_text(std::uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

std::string_view type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

VkInstance create_instance() {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "loom";
  app.pEngineName = "loom";
  app.apiVersion = kRequiredApi;
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult result = vkCreateInstance(&info, nullptr, &instance);
  if (result == VK_ERROR_INCOMPATIBLE_DRIVER) return VK_NULL_HANDLE;  // a loader without any driver
  check(result, "vkCreateInstance");
  return instance;
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance instance) {
  std::uint32_t count = 0;
  check(vkEnumeratePhysicalDevices(instance, &count, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devices(count);
  check(vkEnumeratePhysicalDevices(instance, &count, devices.data()), "vkEnumeratePhysicalDevices");
  devices.resize(count);
  return devices;
}

bool has_extension(VkPhysicalDevice device, const char* name) {
  std::uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, extensions.data());
  return std::any_of(extensions.begin(), extensions.end(),
                     [name](const VkExtensionProperties& e) { return std::strcmp(e.extensionName, name) == 0; });
}

std::optional<std::uint32_t> compute_queue_family(VkPhysicalDevice device) {
  std::uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, families.data());
  // A compute-only family first (a dedicated compute queue on GPUs that have one), else any with compute.
  for (std::uint32_t i = 0; i < count; ++i) {
    if ((families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && !(families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) return i;
  }
  for (std::uint32_t i = 0; i < count; ++i) {
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return i;
  }
  return std::nullopt;
}

// The optional features the shaders may use, as far as the device has them.
struct Features {
  VkPhysicalDeviceFeatures2 core{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features v11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  Features() {
    core.pNext = &v11;
    v11.pNext = &v12;
  }
  Features(const Features&) = delete;
};

void query_features(VkPhysicalDevice device, Features& f) { vkGetPhysicalDeviceFeatures2(device, &f.core); }

// Keeps only the features loom's shaders may ask for (what the device has of them).
void keep_wanted(const Features& has, Features& want) {
  want.core.features.shaderInt16 = has.core.features.shaderInt16;
  want.core.features.shaderInt64 = has.core.features.shaderInt64;
  want.core.features.shaderFloat64 = has.core.features.shaderFloat64;
  want.v11.storageBuffer16BitAccess = has.v11.storageBuffer16BitAccess;
  want.v11.uniformAndStorageBuffer16BitAccess = has.v11.uniformAndStorageBuffer16BitAccess;
  want.v12.storageBuffer8BitAccess = has.v12.storageBuffer8BitAccess;
  want.v12.uniformAndStorageBuffer8BitAccess = has.v12.uniformAndStorageBuffer8BitAccess;
  want.v12.shaderInt8 = has.v12.shaderInt8;
  want.v12.shaderFloat16 = has.v12.shaderFloat16;
}

DeviceDescription describe(VkPhysicalDevice device, int index) {
  DeviceDescription d;
  d.index = index;
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties maintenance{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  subgroup.pNext = &driver;
  driver.pNext = &maintenance;
  VkPhysicalDeviceProperties2 properties{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  properties.pNext = &subgroup;
  vkGetPhysicalDeviceProperties2(device, &properties);
  const VkPhysicalDeviceProperties& p = properties.properties;
  const VkPhysicalDeviceLimits& limits = p.limits;
  d.name = p.deviceName;
  d.type = type_name(p.deviceType);
  d.vendor_id = p.vendorID;
  d.device_id = p.deviceID;
  d.api_version = version_text(p.apiVersion);
  d.driver = std::string(driver.driverName);
  if (driver.driverInfo[0] != '\0') d.driver += std::string(" ") + driver.driverInfo;
  d.max_workgroup_invocations = limits.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) d.max_workgroup_count[static_cast<std::size_t>(i)] = limits.maxComputeWorkGroupCount[i];
  d.max_push_constant_bytes = limits.maxPushConstantsSize;
  d.max_storage_buffer_range = limits.maxStorageBufferRange;
  d.min_storage_buffer_offset_alignment = limits.minStorageBufferOffsetAlignment;
  d.max_memory_allocation_bytes = maintenance.maxMemoryAllocationSize;
  d.subgroup_size = subgroup.subgroupSize;
  d.subgroup_arithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
                          (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) != 0;

  VkPhysicalDeviceMemoryProperties memory;
  vkGetPhysicalDeviceMemoryProperties(device, &memory);
  for (std::uint32_t h = 0; h < memory.memoryHeapCount; ++h) {
    if (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
      d.device_local_bytes = std::max<std::uint64_t>(d.device_local_bytes, memory.memoryHeaps[h].size);
    }
  }
  for (std::uint32_t t = 0; t < memory.memoryTypeCount; ++t) {
    if (memory.memoryTypes[t].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
      const auto& heap = memory.memoryHeaps[memory.memoryTypes[t].heapIndex];
      d.host_visible_bytes = std::max<std::uint64_t>(d.host_visible_bytes, heap.size);
    }
  }

  Features features;
  query_features(device, features);
  d.shader_float16 = features.v12.shaderFloat16 == VK_TRUE;
  d.shader_float64 = features.core.features.shaderFloat64 == VK_TRUE;
  d.shader_int8 = features.v12.shaderInt8 == VK_TRUE;
  d.push_descriptors = has_extension(device, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);

  if (p.apiVersion < kRequiredApi) {
    d.unusable = "Vulkan " + d.api_version + " (the backend needs 1.2)";
  } else if (!d.push_descriptors) {
    d.unusable = "no VK_KHR_push_descriptor";
  } else if (!compute_queue_family(device)) {
    d.unusable = "no compute queue";
  } else if (limits.maxPushConstantsSize < 128) {
    d.unusable = "push constants of " + std::to_string(limits.maxPushConstantsSize) + " bytes (needs 128)";
  }
  return d;
}

}  // namespace

VulkanError::VulkanError(const std::string& what, VkResult result)
    : std::runtime_error(what + ": " + std::string(result_name(result))), result_(result) {}

void check(VkResult result, const char* what) {
  if (result != VK_SUCCESS) throw VulkanError(what, result);
}

std::string_view result_name(VkResult result) noexcept {
  switch (result) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_SHADER_NV: return "VK_ERROR_INVALID_SHADER_NV";
    default: return "VkResult(unknown)";
  }
}

std::vector<DeviceDescription> list_devices() {
  const detail::DriverAllocations driver;
  const VkInstance instance = create_instance();
  if (instance == VK_NULL_HANDLE) return {};
  std::vector<DeviceDescription> devices;
  try {
    const auto physical = physical_devices(instance);
    for (std::size_t i = 0; i < physical.size(); ++i) devices.push_back(describe(physical[i], static_cast<int>(i)));
  } catch (...) {
    vkDestroyInstance(instance, nullptr);
    throw;
  }
  vkDestroyInstance(instance, nullptr);
  return devices;
}

std::optional<int> parse_device_spec(std::string_view spec) {
  if (spec == "vulkan") return std::nullopt;
  constexpr std::string_view prefix = "vulkan:";
  if (spec.substr(0, prefix.size()) == prefix && spec.size() > prefix.size() && spec.size() <= prefix.size() + 4) {
    int index = 0;
    const char* first = spec.data() + prefix.size();
    const char* last = spec.data() + spec.size();
    const auto [end, error] = std::from_chars(first, last, index);
    if (error == std::errc() && end == last && index >= 0) return index;
  }
  throw std::invalid_argument("device '" + std::string(spec) + "': expected vulkan or vulkan:N (N a device index from `loom info --devices`)");
}

std::unique_ptr<VulkanContext> VulkanContext::open(std::optional<int> index) {
  const detail::DriverAllocations driver;
  std::unique_ptr<VulkanContext> context(new VulkanContext());
  context->instance_ = create_instance();
  if (context->instance_ == VK_NULL_HANDLE) {
    throw std::runtime_error("no Vulkan device: the Vulkan loader found no driver (install your GPU's Vulkan driver, or mesa-vulkan-drivers for lavapipe)");
  }
  const auto physical = physical_devices(context->instance_);
  if (physical.empty()) throw std::runtime_error("no Vulkan device: the Vulkan loader lists none");
  std::vector<DeviceDescription> described;
  for (std::size_t i = 0; i < physical.size(); ++i) described.push_back(describe(physical[i], static_cast<int>(i)));

  int chosen = -1;
  if (index) {
    if (*index < 0 || *index >= static_cast<int>(physical.size())) {
      throw std::runtime_error("device vulkan:" + std::to_string(*index) + " does not exist: this machine has " +
                               std::to_string(physical.size()) + " Vulkan device(s), vulkan:0.." +
                               std::to_string(physical.size() - 1) + " (`loom info --devices` lists them)");
    }
    chosen = *index;
  } else {
    // The first usable discrete GPU, else the first usable device of any kind.
    for (const auto& d : described) {
      if (d.unusable.empty() && d.type == "discrete") { chosen = d.index; break; }
    }
    for (const auto& d : described) {
      if (chosen < 0 && d.unusable.empty()) chosen = d.index;
    }
    if (chosen < 0) {
      throw std::runtime_error("no usable Vulkan device: " + described.front().name + ": " + described.front().unusable);
    }
  }
  const DeviceDescription& d = described[static_cast<std::size_t>(chosen)];
  if (!d.unusable.empty()) {
    throw std::runtime_error("Vulkan device " + std::to_string(chosen) + " (" + d.name + ") cannot run loom: " + d.unusable);
  }
  context->description_ = d;
  context->physical_ = physical[static_cast<std::size_t>(chosen)];
  context->queue_family_ = *compute_queue_family(context->physical_);
  vkGetPhysicalDeviceMemoryProperties(context->physical_, &context->memory_);

  Features has;
  query_features(context->physical_, has);
  Features want;
  keep_wanted(has, want);
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue.queueFamilyIndex = context->queue_family_;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  const char* extensions[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
  VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  info.pNext = &want.core;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue;
  info.enabledExtensionCount = 1;
  info.ppEnabledExtensionNames = extensions;
  check(vkCreateDevice(context->physical_, &info, nullptr, &context->device_), "vkCreateDevice");
  vkGetDeviceQueue(context->device_, context->queue_family_, 0, &context->queue_);
  context->push_descriptor_set_ = reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(
      vkGetDeviceProcAddr(context->device_, "vkCmdPushDescriptorSetKHR"));
  if (context->push_descriptor_set_ == nullptr) throw std::runtime_error("vkCmdPushDescriptorSetKHR is missing on " + d.name);
  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = context->queue_family_;
  check(vkCreateCommandPool(context->device_, &pool, nullptr, &context->command_pool_), "vkCreateCommandPool");
  return context;
}

VulkanContext::~VulkanContext() {
  const detail::DriverAllocations driver;
  if (device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);
    if (command_pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device_, command_pool_, nullptr);
    vkDestroyDevice(device_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

std::optional<std::uint32_t> VulkanContext::memory_type(std::uint32_t type_bits, VkMemoryPropertyFlags required,
                                                        VkMemoryPropertyFlags preferred) const noexcept {
  std::optional<std::uint32_t> fallback;
  for (std::uint32_t t = 0; t < memory_.memoryTypeCount; ++t) {
    if (!(type_bits & (1u << t))) continue;
    const VkMemoryPropertyFlags flags = memory_.memoryTypes[t].propertyFlags;
    if ((flags & required) != required) continue;
    if ((flags & preferred) == preferred) return t;
    if (!fallback) fallback = t;
  }
  return fallback;
}

}  // namespace loom::compute::vulkan
