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
//   pick_physical_device(inst, &out, requirements)
//                                     among the devices meeting `requirements` (API version, queue
//                                     flags), prefers discrete > integrated > virtual > CPU; the env
//                                     var RUNTIME_CPP_VK_DEVICE (older alias: VKDG_DEVICE, read when
//                                     the first is unset) overrides it with an index or a substring
//                                     of the device name (e.g. "llvmpipe").
//   Fp16Features                      the Vulkan 1.1/1.2 feature chain for fp16 arithmetic and 16-bit
//                                     storage buffers: query a device, enable them on Device::create.
//   device_has_extension(phys, name)  device extension query (as the instance's layers expose it).
//   pick_queue_family(phys, required, preferred, &out)
//                                     first family with all `required` bits, preferring one that
//                                     also has `preferred` bits.
//   Device::create(phys, family, extensions, features_pnext, &out)
//                                     VkDevice with one queue of `family`; `features_pnext` is the
//                                     caller's VkPhysicalDevice*Features chain (may be null).
//   find_memory_type(phys, type_bits, required, &out, preferred)
//                                     a type with all `required` flags, one with `preferred` too first.
//   DeviceMemory::allocate(dev, phys, requirements, properties, &out, preferred)
//                                     RAII VkDeviceMemory, persistently mapped when host-visible.
//   Buffer::create(dev, phys, size, usage, properties, &out, preferred)
//                                     RAII VkBuffer + its own memory (mapped when host-visible);
//                                     Buffer::host(...) = host-visible coherent, preferring cached.
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

// Env var naming the physical device to use (index or name substring); the alias is the Vulkan
// delegate's older name for it, read only when the first is unset.
constexpr const char* kDeviceEnvVar = "RUNTIME_CPP_VK_DEVICE";
constexpr const char* kDeviceEnvAlias = "VKDG_DEVICE";
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

// What a backend needs of a physical device; devices without it are never picked.
struct DeviceRequirements {
  uint32_t min_api_version = VK_API_VERSION_1_0;
  VkQueueFlags queue_flags = 0;  // some queue family must have all of these
};

Error pick_physical_device(VkInstance instance, PhysicalDevice* out,
                           const DeviceRequirements& requirements = {});

// fp16 arithmetic in shaders (shaderFloat16) and 16-bit storage buffers, as one feature chain.
// Not copyable: the chain points into itself.
class Fp16Features {
 public:
  Fp16Features();
  Fp16Features(const Fp16Features&) = delete;
  Fp16Features& operator=(const Fp16Features&) = delete;
  // Whether `physical` has both features.
  static bool supported(VkPhysicalDevice physical);
  // The chain with both features set, for Device::create's `features_pnext`.
  const void* enable();

 private:
  VkPhysicalDeviceVulkan11Features v11_{};
  VkPhysicalDeviceVulkan12Features v12_{};
};
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
                       VkMemoryPropertyFlags required, uint32_t* out,
                       VkMemoryPropertyFlags preferred = 0);

class DeviceMemory {
 public:
  static Error allocate(VkDevice device, VkPhysicalDevice physical,
                        const VkMemoryRequirements& requirements, VkMemoryPropertyFlags properties,
                        std::unique_ptr<DeviceMemory>* out, VkMemoryPropertyFlags preferred = 0);
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

class Buffer {
 public:
  static Error create(VkDevice device, VkPhysicalDevice physical, VkDeviceSize size,
                      VkBufferUsageFlags usage, VkMemoryPropertyFlags properties,
                      std::unique_ptr<Buffer>* out, VkMemoryPropertyFlags preferred = 0);
  // Host-visible coherent memory (cached when the driver has it: fast read-back), mapped.
  static Error host(VkDevice device, VkPhysicalDevice physical, VkDeviceSize size,
                    VkBufferUsageFlags usage, std::unique_ptr<Buffer>* out);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  VkBuffer get() const { return buffer_; }
  void* mapped() const { return memory_ ? memory_->mapped() : nullptr; }
  VkDeviceSize size() const { return size_; }

 private:
  Buffer() = default;
  VkDevice device_ = VK_NULL_HANDLE;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  std::unique_ptr<DeviceMemory> memory_;
  VkDeviceSize size_ = 0;
};

}  // namespace vkc
}  // namespace runtime_cpp
