// Vulkan instance/device/buffer helpers of the compute delegate (RAII; errors logged and returned).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <vulkan/vulkan.h>

namespace vkdg {

// One instance + logical device + compute queue. Device choice: VKDG_DEVICE (an index or a substring
// of the device name) if set, else the first discrete GPU, then integrated, virtual, CPU (lavapipe).
class Device {
 public:
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // nullptr with `*error` set when there is no usable device (or fp16 is needed and unsupported).
  static std::unique_ptr<Device> create(bool need_fp16, std::string* error);

  VkDevice handle() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  const std::string& name() const { return name_; }
  // Index of a memory type with `want` flags (and `prefer` when possible); UINT32_MAX if none.
  uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer) const;

 private:
  Device() = default;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkPhysicalDeviceMemoryProperties memory_{};
  std::string name_;
};

// A buffer with its own memory; host-visible ones stay mapped.
class Buffer {
 public:
  Buffer() = default;
  ~Buffer() { reset(); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  bool create(const Device& dev, uint64_t size, bool host_visible, std::string* error);
  void reset();
  VkBuffer handle() const { return buffer_; }
  void* mapped() const { return mapped_; }
  uint64_t size() const { return size_; }

 private:
  VkDevice device_ = VK_NULL_HANDLE;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void* mapped_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace vkdg
