// vulkan_common: the Vulkan instance/device plumbing shared by runtime-cpp's Vulkan backends
// (VgfBackend in src/vgf, the Vulkan GPU delegate in src/vulkan_delegate).
//
// API (namespace runtime_cpp::vkc; every failure is an executorch Error plus one log line):
//   vk_error(result, what)            VkResult -> Error (OUT_OF_*_MEMORY -> MemoryAllocationFailed,
//                                     missing layer/extension/feature/driver -> NotSupported, else
//                                     Internal), logging "<what> failed: VK_ERROR_..." .
//   result_name(result)               "VK_ERROR_..." text for log lines.
//   loader_version(&version)          Ok when libvulkan answers vkEnumerateInstanceVersion.
//   instance_layer_available(name)    whether the loader can find an explicit layer (VK_LAYER_PATH).
//   Instance::create(options, &out)   VkInstance with the requested API version, layers (all required,
//                                     enabled in the order given) and instance extensions.
//   pick_physical_device(inst, &out)  prefers discrete > integrated > virtual > CPU; the env var
//                                     RUNTIME_CPP_VK_DEVICE overrides it with an index or a substring
//                                     of the device name (e.g. "llvmpipe").
//   device_has_extension(phys, name)  device extension query (as the instance's layers expose it).
//   pick_queue_family(phys, required, preferred, &out)
//                                     first family with all `required` bits, preferring one that
//                                     also has `preferred` bits.
//   Device::create(phys, family, extensions, features_pnext, &out)
//                                     VkDevice with one queue of `family`; `features_pnext` is the
//                                     caller's VkPhysicalDevice*Features chain (may be null).
//   find_memory_type(phys, type_bits, required, &out)
//   DeviceMemory::allocate(dev, phys, requirements, properties, &out)
//                                     RAII VkDeviceMemory, persistently mapped when host-visible.
//   HostBuffer::create(dev, phys, size, usage, &out)
//                                     RAII VkBuffer + host-visible coherent memory, mapped.
//
// Objects are owned through std::unique_ptr and destroyed in reverse order of creation by their
// owners (a Device must outlive the memory and buffers made on it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

#include <executorch/runtime/core/error.h>

namespace runtime_cpp {
namespace vkc {

using executorch::runtime::Error;

// Env var naming the physical device to use (index or name substring).
constexpr const char* kDeviceEnvVar = "RUNTIME_CPP_VK_DEVICE";
// The apt command that installs the loader and the lavapipe CPU driver on Debian/Ubuntu.
constexpr const char* kAptInstall =
    "apt-get install -y --no-install-recommends libvulkan1 mesa-vulkan-drivers";

const char* result_name(VkResult result);
Error vk_error(VkResult result, const char* what);

Error loader_version(uint32_t* version);
bool instance_layer_available(const char* name);

struct InstanceOptions {
  const char* app_name = "runtime_cpp";
  uint32_t api_version = VK_API_VERSION_1_3;
  std::vector<std::string> layers;      // enabled in this order (the loader stacks them so)
  std::vector<std::string> extensions;  // instance extensions
};

class Instance {
 public:
  static Error create(const InstanceOptions& options, std::unique_ptr<Instance>* out);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;
  VkInstance get() const { return instance_; }

 private:
  Instance() = default;
  VkInstance instance_ = VK_NULL_HANDLE;
};

struct PhysicalDevice {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties properties{};
};

Error pick_physical_device(VkInstance instance, PhysicalDevice* out);
bool device_has_extension(VkPhysicalDevice device, const char* name);
Error pick_queue_family(VkPhysicalDevice device, VkQueueFlags required, VkQueueFlags preferred,
                        uint32_t* out);

class Device {
 public:
  static Error create(VkPhysicalDevice physical, uint32_t queue_family,
                      const std::vector<const char*>& extensions, const void* features_pnext,
                      std::unique_ptr<Device>* out);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  VkDevice get() const { return device_; }
  VkPhysicalDevice physical() const { return physical_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return family_; }

 private:
  Device() = default;
  VkDevice device_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
};

Error find_memory_type(VkPhysicalDevice physical, uint32_t type_bits,
                       VkMemoryPropertyFlags required, uint32_t* out);

class DeviceMemory {
 public:
  static Error allocate(VkDevice device, VkPhysicalDevice physical,
                        const VkMemoryRequirements& requirements, VkMemoryPropertyFlags properties,
                        std::unique_ptr<DeviceMemory>* out);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  VkDeviceMemory get() const { return memory_; }
  void* mapped() const { return mapped_; }  // null unless host-visible
  VkDeviceSize size() const { return size_; }

 private:
  DeviceMemory() = default;
  VkDevice device_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void* mapped_ = nullptr;
  VkDeviceSize size_ = 0;
};

class HostBuffer {
 public:
  static Error create(VkDevice device, VkPhysicalDevice physical, VkDeviceSize size,
                      VkBufferUsageFlags usage, std::unique_ptr<HostBuffer>* out);
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  VkBuffer get() const { return buffer_; }
  void* mapped() const { return memory_ ? memory_->mapped() : nullptr; }
  VkDeviceSize size() const { return size_; }

 private:
  HostBuffer() = default;
  VkDevice device_ = VK_NULL_HANDLE;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  std::unique_ptr<DeviceMemory> memory_;
  VkDeviceSize size_ = 0;
};

}  // namespace vkc
}  // namespace runtime_cpp
