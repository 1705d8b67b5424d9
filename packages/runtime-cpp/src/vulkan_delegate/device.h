// The Vulkan device of one loaded delegate partition, made with runtime-cpp's vulkan_common (device
// choice, fp16 features, memory types and RAII buffers live there).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "vulkan_common/vk_common.h"

namespace vkdg {

using executorch::runtime::Error;
namespace vkc = runtime_cpp::vkc;

// One instance + logical device + compute queue. Device choice (vkc::pick_physical_device):
// RUNTIME_CPP_VK_DEVICE (or its alias VKDG_DEVICE) = an index or a substring of the device name,
// else the first discrete GPU, then integrated, virtual, CPU (lavapipe); Vulkan 1.2 and a compute
// queue are required.
class Device {
 public:
  // Error (with a log line naming what is missing) when there is no usable device, or when fp16 is
  // needed and the device lacks shaderFloat16 / 16-bit storage.
  static Error create(bool need_fp16, std::unique_ptr<Device>* out);

  VkDevice handle() const { return device_->get(); }
  VkPhysicalDevice physical() const { return device_->physical(); }
  VkQueue queue() const { return device_->queue(); }
  uint32_t queue_family() const { return device_->queue_family(); }
  const std::string& name() const { return name_; }

  // A storage buffer (also a transfer source and destination) of at least `size` bytes: device-local,
  // or host-visible and mapped.
  Error buffer(uint64_t size, bool host_visible, std::unique_ptr<vkc::Buffer>* out) const;

 private:
  Device() = default;
  std::unique_ptr<vkc::Instance> instance_;  // declared first: destroyed after the device
  std::unique_ptr<vkc::Device> device_;
  std::string name_;
};

}  // namespace vkdg
