// vulkan_common implementation: see vk_common.h for the API.
#include "vulkan_common/vk_common.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include <executorch/runtime/platform/log.h>

namespace runtime_cpp {
namespace vkc {

const char* result_name(VkResult result) {
  switch (result) {
#define RUNTIME_CPP_VK_CASE(x) \
  case x:                      \
    return #x;
    RUNTIME_CPP_VK_CASE(VK_SUCCESS)
    RUNTIME_CPP_VK_CASE(VK_NOT_READY)
    RUNTIME_CPP_VK_CASE(VK_TIMEOUT)
    RUNTIME_CPP_VK_CASE(VK_INCOMPLETE)
    RUNTIME_CPP_VK_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    RUNTIME_CPP_VK_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    RUNTIME_CPP_VK_CASE(VK_ERROR_INITIALIZATION_FAILED)
    RUNTIME_CPP_VK_CASE(VK_ERROR_DEVICE_LOST)
    RUNTIME_CPP_VK_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    RUNTIME_CPP_VK_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    RUNTIME_CPP_VK_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    RUNTIME_CPP_VK_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    RUNTIME_CPP_VK_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    RUNTIME_CPP_VK_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    RUNTIME_CPP_VK_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    RUNTIME_CPP_VK_CASE(VK_ERROR_FRAGMENTED_POOL)
    RUNTIME_CPP_VK_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    RUNTIME_CPP_VK_CASE(VK_ERROR_UNKNOWN)
#undef RUNTIME_CPP_VK_CASE
    default:
      return "VkResult(other)";
  }
}

Error vk_error(VkResult result, const char* what) {
  if (result == VK_SUCCESS) return Error::Ok;
  ET_LOG(Error, "vulkan: %s failed: %s (%d)", what, result_name(result), static_cast<int>(result));
  switch (result) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_FRAGMENTED_POOL:
    case VK_ERROR_TOO_MANY_OBJECTS:
      return Error::MemoryAllocationFailed;
    case VK_ERROR_LAYER_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_FEATURE_NOT_PRESENT:
    case VK_ERROR_INCOMPATIBLE_DRIVER:
    case VK_ERROR_FORMAT_NOT_SUPPORTED:
    case VK_ERROR_INITIALIZATION_FAILED:
      return Error::NotSupported;
    default:
      return Error::Internal;
  }
}

Error loader_version(uint32_t* version) {
  *version = 0;
  return vk_error(vkEnumerateInstanceVersion(version), "vkEnumerateInstanceVersion");
}

bool instance_layer_available(const char* name) {
  uint32_t count = 0;
  if (vkEnumerateInstanceLayerProperties(&count, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(count);
  if (vkEnumerateInstanceLayerProperties(&count, layers.data()) != VK_SUCCESS) return false;
  for (const auto& layer : layers) {
    if (std::strcmp(layer.layerName, name) == 0) return true;
  }
  return false;
}

Error Instance::create(const InstanceOptions& options, std::unique_ptr<Instance>* out) {
  std::vector<const char*> layers;
  for (const auto& name : options.layers) {
    if (!instance_layer_available(name.c_str())) {
      ET_LOG(Error, "vulkan: layer %s is not on the loader's path (VK_LAYER_PATH / "
                    "VK_ADD_LAYER_PATH)", name.c_str());
      return Error::NotSupported;
    }
    layers.push_back(name.c_str());
  }
  std::vector<const char*> extensions;
  for (const auto& name : options.extensions) extensions.push_back(name.c_str());
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = options.app_name;
  app.pEngineName = "runtime_cpp";
  app.apiVersion = options.api_version;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  auto instance = std::unique_ptr<Instance>(new (std::nothrow) Instance());
  if (!instance) return Error::MemoryAllocationFailed;
  const VkResult r = vkCreateInstance(&info, nullptr, &instance->instance_);
  if (r != VK_SUCCESS) {
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
      ET_LOG(Error, "vulkan: no Vulkan driver found; on Debian/Ubuntu: %s", kAptInstall);
    }
    return vk_error(r, "vkCreateInstance");
  }
  *out = std::move(instance);
  return Error::Ok;
}

Instance::~Instance() {
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

namespace {

int type_rank(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return 3;
    default:
      return 4;
  }
}

bool all_digits(const char* s) {
  if (*s == '\0') return false;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') return false;
  }
  return true;
}

}  // namespace

namespace {

bool has_queue(VkPhysicalDevice device, VkQueueFlags flags) {
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, families.data());
  for (const auto& f : families) {
    if ((f.queueFlags & flags) == flags && f.queueCount > 0) return true;
  }
  return false;
}

bool meets(const PhysicalDevice& dev, const DeviceRequirements& req) {
  return dev.properties.apiVersion >= req.min_api_version && has_queue(dev.handle, req.queue_flags);
}

// The device override: RUNTIME_CPP_VK_DEVICE, else its alias; `*name` says which one was read.
const char* device_override(const char** name) {
  for (const char* var : {kDeviceEnvVar, kDeviceEnvAlias}) {
    const char* value = std::getenv(var);
    if (value != nullptr && *value != '\0') {
      *name = var;
      return value;
    }
  }
  return nullptr;
}

}  // namespace

Error pick_physical_device(VkInstance instance, PhysicalDevice* out,
                           const DeviceRequirements& requirements) {
  uint32_t count = 0;
  Error err = vk_error(vkEnumeratePhysicalDevices(instance, &count, nullptr),
                       "vkEnumeratePhysicalDevices");
  if (err != Error::Ok) return err;
  if (count == 0) {
    ET_LOG(Error, "vulkan: no physical device (no driver installed?); for the lavapipe CPU "
                  "driver: %s", kAptInstall);
    return Error::NotSupported;
  }
  std::vector<VkPhysicalDevice> devices(count);
  err = vk_error(vkEnumeratePhysicalDevices(instance, &count, devices.data()),
                 "vkEnumeratePhysicalDevices");
  if (err != Error::Ok) return err;
  std::vector<PhysicalDevice> all(count);
  for (uint32_t i = 0; i < count; ++i) {
    all[i].handle = devices[i];
    vkGetPhysicalDeviceProperties(devices[i], &all[i].properties);
  }
  const char* var = nullptr;
  const char* wanted = device_override(&var);
  if (wanted != nullptr) {
    const PhysicalDevice* match = nullptr;
    if (all_digits(wanted)) {
      const unsigned long index = std::strtoul(wanted, nullptr, 10);
      if (index < all.size()) match = &all[index];
    } else {
      for (const auto& dev : all) {
        if (std::strstr(dev.properties.deviceName, wanted) != nullptr) {
          match = &dev;
          break;
        }
      }
    }
    if (match != nullptr && meets(*match, requirements)) {
      *out = *match;
      return Error::Ok;
    }
    ET_LOG(Error, "vulkan: %s=%s matches %s of the %u devices (first: %s)", var, wanted,
           match ? "a device without the needed API version/queue, none" : "none", count,
           all[0].properties.deviceName);
    return Error::InvalidArgument;
  }
  const PhysicalDevice* best = nullptr;
  for (const auto& dev : all) {
    if (!meets(dev, requirements)) continue;
    if (best == nullptr ||
        type_rank(dev.properties.deviceType) < type_rank(best->properties.deviceType)) {
      best = &dev;
    }
  }
  if (best == nullptr) {
    ET_LOG(Error, "vulkan: none of the %u devices has Vulkan %u.%u and a queue with flags 0x%x "
                  "(first: %s)", count, VK_API_VERSION_MAJOR(requirements.min_api_version),
           VK_API_VERSION_MINOR(requirements.min_api_version),
           static_cast<unsigned>(requirements.queue_flags), all[0].properties.deviceName);
    return Error::NotSupported;
  }
  *out = *best;
  return Error::Ok;
}

Fp16Features::Fp16Features() {
  v11_.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  v11_.pNext = &v12_;
  v12_.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
}

bool Fp16Features::supported(VkPhysicalDevice physical) {
  Fp16Features chain;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &chain.v11_;
  vkGetPhysicalDeviceFeatures2(physical, &features);
  return chain.v12_.shaderFloat16 && chain.v11_.storageBuffer16BitAccess;
}

const void* Fp16Features::enable() {
  v12_.shaderFloat16 = VK_TRUE;
  v11_.storageBuffer16BitAccess = VK_TRUE;
  return &v11_;
}

bool device_has_extension(VkPhysicalDevice device, const char* name) {
  uint32_t count = 0;
  if (vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr) != VK_SUCCESS) {
    return false;
  }
  std::vector<VkExtensionProperties> props(count);
  if (vkEnumerateDeviceExtensionProperties(device, nullptr, &count, props.data()) != VK_SUCCESS) {
    return false;
  }
  for (const auto& p : props) {
    if (std::strcmp(p.extensionName, name) == 0) return true;
  }
  return false;
}

Error pick_queue_family(VkPhysicalDevice device, VkQueueFlags required, VkQueueFlags preferred,
                        uint32_t* out) {
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, families.data());
  bool found = false;
  for (uint32_t i = 0; i < count; ++i) {
    const VkQueueFlags flags = families[i].queueFlags;
    if ((flags & required) != required || families[i].queueCount == 0) continue;
    if ((flags & preferred) == preferred) {
      *out = i;
      return Error::Ok;
    }
    if (!found) {
      *out = i;
      found = true;
    }
  }
  if (found) return Error::Ok;
  ET_LOG(Error, "vulkan: no queue family with flags 0x%x among %u families",
         static_cast<unsigned>(required), count);
  return Error::NotSupported;
}

Error Device::create(VkPhysicalDevice physical, uint32_t queue_family,
                     const std::vector<const char*>& extensions, const void* features_pnext,
                     std::unique_ptr<Device>* out) {
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{};
  queue.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue.queueFamilyIndex = queue_family;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkDeviceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  info.pNext = features_pnext;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue;
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  auto device = std::unique_ptr<Device>(new (std::nothrow) Device());
  if (!device) return Error::MemoryAllocationFailed;
  const Error err = vk_error(vkCreateDevice(physical, &info, nullptr, &device->device_),
                             "vkCreateDevice");
  if (err != Error::Ok) return err;
  device->physical_ = physical;
  device->family_ = queue_family;
  vkGetDeviceQueue(device->device_, queue_family, 0, &device->queue_);
  *out = std::move(device);
  return Error::Ok;
}

Device::~Device() {
  if (device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);
    vkDestroyDevice(device_, nullptr);
  }
}

Error find_memory_type(VkPhysicalDevice physical, uint32_t type_bits,
                       VkMemoryPropertyFlags required, uint32_t* out,
                       VkMemoryPropertyFlags preferred) {
  VkPhysicalDeviceMemoryProperties props;
  vkGetPhysicalDeviceMemoryProperties(physical, &props);
  for (const VkMemoryPropertyFlags want : {required | preferred, required}) {
    for (uint32_t i = 0; i < props.memoryTypeCount; ++i) {
      if ((type_bits & (1u << i)) && (props.memoryTypes[i].propertyFlags & want) == want) {
        *out = i;
        return Error::Ok;
      }
    }
  }
  ET_LOG(Error, "vulkan: no memory type with properties 0x%x in mask 0x%x",
         static_cast<unsigned>(required), type_bits);
  return Error::NotSupported;
}

Error DeviceMemory::allocate(VkDevice device, VkPhysicalDevice physical,
                             const VkMemoryRequirements& requirements,
                             VkMemoryPropertyFlags properties, std::unique_ptr<DeviceMemory>* out,
                             VkMemoryPropertyFlags preferred) {
  uint32_t type = 0;
  Error err = find_memory_type(physical, requirements.memoryTypeBits, properties, &type, preferred);
  if (err != Error::Ok) return err;
  VkMemoryAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  info.allocationSize = requirements.size;
  info.memoryTypeIndex = type;
  auto memory = std::unique_ptr<DeviceMemory>(new (std::nothrow) DeviceMemory());
  if (!memory) return Error::MemoryAllocationFailed;
  memory->device_ = device;
  memory->size_ = requirements.size;
  err = vk_error(vkAllocateMemory(device, &info, nullptr, &memory->memory_), "vkAllocateMemory");
  if (err != Error::Ok) return err;
  if (properties & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
    err = vk_error(vkMapMemory(device, memory->memory_, 0, VK_WHOLE_SIZE, 0, &memory->mapped_),
                   "vkMapMemory");
    if (err != Error::Ok) return err;
  }
  *out = std::move(memory);
  return Error::Ok;
}

DeviceMemory::~DeviceMemory() {
  if (memory_ != VK_NULL_HANDLE) {
    if (mapped_ != nullptr) vkUnmapMemory(device_, memory_);
    vkFreeMemory(device_, memory_, nullptr);
  }
}

Error Buffer::create(VkDevice device, VkPhysicalDevice physical, VkDeviceSize size,
                     VkBufferUsageFlags usage, VkMemoryPropertyFlags properties,
                     std::unique_ptr<Buffer>* out, VkMemoryPropertyFlags preferred) {
  auto buffer = std::unique_ptr<Buffer>(new (std::nothrow) Buffer());
  if (!buffer) return Error::MemoryAllocationFailed;
  buffer->device_ = device;
  buffer->size_ = size;
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = size;
  info.usage = usage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  Error err = vk_error(vkCreateBuffer(device, &info, nullptr, &buffer->buffer_), "vkCreateBuffer");
  if (err != Error::Ok) return err;
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device, buffer->buffer_, &req);
  err = DeviceMemory::allocate(device, physical, req, properties, &buffer->memory_, preferred);
  if (err != Error::Ok) return err;
  err = vk_error(vkBindBufferMemory(device, buffer->buffer_, buffer->memory_->get(), 0),
                 "vkBindBufferMemory");
  if (err != Error::Ok) return err;
  *out = std::move(buffer);
  return Error::Ok;
}

Error Buffer::host(VkDevice device, VkPhysicalDevice physical, VkDeviceSize size,
                   VkBufferUsageFlags usage, std::unique_ptr<Buffer>* out) {
  return create(device, physical, size, usage,
                VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, out,
                VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
}

Buffer::~Buffer() {
  if (buffer_ != VK_NULL_HANDLE) vkDestroyBuffer(device_, buffer_, nullptr);
  memory_.reset();
}

}  // namespace vkc
}  // namespace runtime_cpp
