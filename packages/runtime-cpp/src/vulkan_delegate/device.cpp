// The delegate's device on top of vulkan_common: see device.h.
#include "device.h"

#include <new>

#include <executorch/runtime/platform/log.h>

namespace vkdg {

Error Device::create(bool need_fp16, std::unique_ptr<Device>* out) {
  auto d = std::unique_ptr<Device>(new (std::nothrow) Device());
  if (!d) return Error::MemoryAllocationFailed;
  vkc::InstanceOptions options;
  options.app_name = "VkComputeBackend";
  options.api_version = VK_API_VERSION_1_2;
  Error err = vkc::Instance::create(options, &d->instance_);
  if (err != Error::Ok) return err;
  vkc::PhysicalDevice physical;
  vkc::DeviceRequirements needs;
  needs.min_api_version = VK_API_VERSION_1_2;
  needs.queue_flags = VK_QUEUE_COMPUTE_BIT;
  err = vkc::pick_physical_device(d->instance_->get(), &physical, needs);
  if (err != Error::Ok) return err;
  d->name_ = physical.properties.deviceName;
  uint32_t family = 0;
  // A family with graphics too when there is one: the main queue, the fastest on NVIDIA.
  err = vkc::pick_queue_family(physical.handle, VK_QUEUE_COMPUTE_BIT, VK_QUEUE_GRAPHICS_BIT, &family);
  if (err != Error::Ok) return err;
  vkc::Fp16Features fp16;
  if (need_fp16 && !vkc::Fp16Features::supported(physical.handle)) {
    ET_LOG(Error, "VkComputeBackend: %s lacks shaderFloat16 / 16-bit storage buffers: lower without "
                  "force_fp16", d->name_.c_str());
    return Error::NotSupported;
  }
  err = vkc::Device::create(physical.handle, family, {}, need_fp16 ? fp16.enable() : nullptr,
                            &d->device_);
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
