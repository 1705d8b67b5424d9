// The delegate's device on top of vulkan_common: see device.h.
#include "device.h"

#include <cstring>
#include <new>
#include <vector>

#include <executorch/runtime/platform/log.h>

namespace vkdg {

Caps probe_caps(VkPhysicalDevice physical, uint32_t queue_family, uint32_t instance_api) {
  Caps caps;
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(physical, &props);
  caps.api_version = props.apiVersion < instance_api ? props.apiVersion : instance_api;
  caps.timestamp_period_ns = props.limits.timestampPeriod;
  caps.float16_int8_ext = caps.api_version < VK_API_VERSION_1_2 &&
                          vkc::device_has_extension(physical, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  // The 1.1-era structures (core in 1.2 under the same layout), so one query serves both versions.
  VkPhysicalDevice16BitStorageFeatures s16{};
  s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  VkPhysicalDeviceShaderFloat16Int8Features f16{};
  f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  const bool has_f16_struct = caps.api_version >= VK_API_VERSION_1_2 || caps.float16_int8_ext;
  s16.pNext = has_f16_struct ? &f16 : nullptr;
  // The int8 dot product (core in 1.3, which this instance never asks for): through its extension.
  const bool has_dot = vkc::device_has_extension(physical, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{};
  dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  if (has_dot) {
    if (has_f16_struct) f16.pNext = &dot;
    else s16.pNext = &dot;
  }
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &s16;
  vkGetPhysicalDeviceFeatures2(physical, &features);
  caps.storage16 = s16.storageBuffer16BitAccess;
  caps.fp16_arithmetic = has_f16_struct && f16.shaderFloat16;
  caps.int_dot = has_dot && dot.shaderIntegerDotProduct;
  VkPhysicalDeviceSubgroupProperties sub{};
  sub.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  VkPhysicalDeviceProperties2 props2{};
  props2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props2.pNext = &sub;
  VkPhysicalDeviceShaderIntegerDotProductProperties dot_props{};
  dot_props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES;
  if (has_dot) sub.pNext = &dot_props;
  vkGetPhysicalDeviceProperties2(physical, &props2);
  caps.subgroup_size = sub.subgroupSize;
  caps.int_dot_accelerated = has_dot && dot_props.integerDotProduct4x8BitPackedSignedAccelerated;
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, families.data());
  if (queue_family < count) caps.timestamp_bits = families[queue_family].timestampValidBits;
  return caps;
}

Error Device::create(bool need_fp16, bool want_int_dot, std::unique_ptr<Device>* out) {
  auto d = std::unique_ptr<Device>(new (std::nothrow) Device());
  if (!d) return Error::MemoryAllocationFailed;
  vkc::InstanceOptions options;
  options.app_name = "VkComputeBackend";
  // 1.2 (the highest we use) where the loader has it, else 1.1; a device's usable version is the lower
  // of its own and this one.
  uint32_t loader = VK_API_VERSION_1_1;
  if (vkc::loader_version(&loader) != Error::Ok) loader = VK_API_VERSION_1_1;
  options.api_version = loader >= VK_API_VERSION_1_2 ? VK_API_VERSION_1_2 : VK_API_VERSION_1_1;
  Error err = vkc::Instance::create(options, &d->instance_);
  if (err != Error::Ok) return err;
  vkc::PhysicalDevice physical;
  vkc::DeviceRequirements needs;
  needs.min_api_version = VK_API_VERSION_1_1;
  needs.queue_flags = VK_QUEUE_COMPUTE_BIT;
  err = vkc::pick_physical_device(d->instance_->get(), &physical, needs);
  if (err != Error::Ok) return err;
  d->name_ = physical.properties.deviceName;
  uint32_t family = 0;
  // A family with graphics too when there is one: the main queue, the fastest on NVIDIA.
  err = vkc::pick_queue_family(physical.handle, VK_QUEUE_COMPUTE_BIT, VK_QUEUE_GRAPHICS_BIT, &family);
  if (err != Error::Ok) return err;
  d->caps_ = probe_caps(physical.handle, family, options.api_version);
  Caps& caps = d->caps_;
  caps.int_dot = caps.int_dot && want_int_dot;  // from here on: whether it is enabled
  if (need_fp16 && !(caps.fp16_arithmetic && caps.storage16)) {
    ET_LOG(Error, "VkComputeBackend: %s lacks %s: lower without force_fp16", d->name_.c_str(),
           caps.fp16_arithmetic ? "16-bit storage buffers" : "shaderFloat16 (fp16 arithmetic)");
    return Error::NotSupported;
  }
  VkPhysicalDevice16BitStorageFeatures s16{};
  s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  VkPhysicalDeviceShaderFloat16Int8Features f16{};
  f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  std::vector<const char*> extensions;
  if (need_fp16) {
    s16.storageBuffer16BitAccess = VK_TRUE;
    f16.shaderFloat16 = VK_TRUE;
    s16.pNext = &f16;
    if (caps.float16_int8_ext) extensions.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  }
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{};
  dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  const void* chain = need_fp16 ? static_cast<const void*>(&s16) : nullptr;
  if (caps.int_dot) {
    dot.shaderIntegerDotProduct = VK_TRUE;
    dot.pNext = const_cast<void*>(chain);
    chain = &dot;
    extensions.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  }
  ET_LOG(Info, "VkComputeBackend: %s, Vulkan %u.%u, fp16 arithmetic %d, 16-bit storage %d, subgroup %u, "
         "timestamps %u bits, int8 dot product %d (accelerated %d)", d->name_.c_str(),
         VK_API_VERSION_MAJOR(caps.api_version), VK_API_VERSION_MINOR(caps.api_version), caps.fp16_arithmetic,
         caps.storage16, caps.subgroup_size, caps.timestamp_bits, caps.int_dot, caps.int_dot_accelerated);
  err = vkc::Device::create(physical.handle, family, extensions, chain, &d->device_);
  if (err != Error::Ok) return err;
  *out = std::move(d);
  return Error::Ok;
}

Error Device::buffer(uint64_t size, bool host_visible, std::unique_ptr<vkc::Buffer>* out) const {
  const VkBufferUsageFlags usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  const uint64_t bytes = size < 16 ? 16 : size;  // Vulkan has no empty buffers
  if (host_visible) return vkc::Buffer::host(handle(), physical(), bytes, usage, out);
  return vkc::Buffer::create(handle(), physical(), bytes, usage,
                             VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, out);
}

}  // namespace vkdg
