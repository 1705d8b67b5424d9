#include "device.h"

#include <cstdlib>
#include <cstring>
#include <vector>

namespace vkdg {
namespace {

int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

bool compute_family(VkPhysicalDevice pd, uint32_t* family) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> props(n);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, props.data());
  for (uint32_t i = 0; i < n; ++i)  // a compute queue of the graphics family first (the fastest on NVIDIA)
    if (props[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      *family = i;
      return true;
    }
  return false;
}

}  // namespace

Device::~Device() {
  if (device_) vkDestroyDevice(device_, nullptr);
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

std::unique_ptr<Device> Device::create(bool need_fp16, std::string* error) {
  std::unique_ptr<Device> d(new Device());
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "executorch-vulkan-delegate";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ici{};
  ici.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ici.pApplicationInfo = &app;
  if (vkCreateInstance(&ici, nullptr, &d->instance_) != VK_SUCCESS) {
    *error = "no Vulkan driver (vkCreateInstance failed): install a GPU driver or lavapipe";
    return nullptr;
  }
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(d->instance_, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  vkEnumeratePhysicalDevices(d->instance_, &n, pds.data());
  if (n == 0) {
    *error = "no Vulkan device found: install a GPU driver or lavapipe (mesa-vulkan-drivers)";
    return nullptr;
  }
  const char* pick = std::getenv("VKDG_DEVICE");
  int best = -1, best_rank = 99;
  for (uint32_t i = 0; i < n; ++i) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(pds[i], &p);
    uint32_t fam = 0;
    if (!compute_family(pds[i], &fam) || p.apiVersion < VK_API_VERSION_1_2) continue;
    if (pick && *pick) {
      char* end = nullptr;
      long idx = std::strtol(pick, &end, 10);
      bool match = (*end == '\0') ? idx == static_cast<long>(i) : std::strstr(p.deviceName, pick) != nullptr;
      if (match) { best = static_cast<int>(i); break; }
      continue;
    }
    if (type_rank(p.deviceType) < best_rank) {
      best_rank = type_rank(p.deviceType);
      best = static_cast<int>(i);
    }
  }
  if (best < 0) {
    *error = pick ? std::string("VKDG_DEVICE=") + pick + " matches no Vulkan 1.2 device with a compute queue"
                  : "no Vulkan 1.2 device with a compute queue";
    return nullptr;
  }
  d->physical_ = pds[best];
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(d->physical_, &props);
  d->name_ = props.deviceName;
  vkGetPhysicalDeviceMemoryProperties(d->physical_, &d->memory_);
  compute_family(d->physical_, &d->queue_family_);

  VkPhysicalDeviceVulkan11Features f11{};

  f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  f11.pNext = &f12;
  VkPhysicalDeviceFeatures2 f2{};
  f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  f2.pNext = &f11;
  vkGetPhysicalDeviceFeatures2(d->physical_, &f2);
  VkPhysicalDeviceVulkan11Features e11{};
  e11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  VkPhysicalDeviceVulkan12Features e12{};
  e12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  e11.pNext = &e12;
  if (need_fp16) {
    if (!f12.shaderFloat16 || !f11.storageBuffer16BitAccess) {
      *error = d->name_ + " lacks shaderFloat16 / 16-bit storage: lower without force_fp16";
      return nullptr;
    }
    e12.shaderFloat16 = VK_TRUE;
    e11.storageBuffer16BitAccess = VK_TRUE;
  }
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci{};
  qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qci.queueFamilyIndex = d->queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  VkDeviceCreateInfo dci{};
  dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  dci.pNext = &e11;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  if (vkCreateDevice(d->physical_, &dci, nullptr, &d->device_) != VK_SUCCESS) {
    *error = "vkCreateDevice failed on " + d->name_;
    return nullptr;
  }
  vkGetDeviceQueue(d->device_, d->queue_family_, 0, &d->queue_);
  return d;
}

uint32_t Device::memory_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer) const {
  uint32_t fallback = UINT32_MAX;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    VkMemoryPropertyFlags f = memory_.memoryTypes[i].propertyFlags;
    if (!(bits & (1u << i)) || (f & want) != want) continue;
    if ((f & prefer) == prefer) return i;
    if (fallback == UINT32_MAX) fallback = i;
  }
  return fallback;
}

bool Buffer::create(const Device& dev, uint64_t size, bool host_visible, std::string* error) {
  reset();
  device_ = dev.handle();
  size_ = size < 16 ? 16 : size;
  VkBufferCreateInfo bci{};
  bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bci.size = size_;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (vkCreateBuffer(device_, &bci, nullptr, &buffer_) != VK_SUCCESS) {
    *error = "vkCreateBuffer failed";
    return false;
  }
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, buffer_, &req);
  uint32_t type = host_visible
      ? dev.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                        VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
      : dev.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  if (type == UINT32_MAX) {
    *error = "no suitable memory type";
    return false;
  }
  VkMemoryAllocateInfo mai{};
  mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = type;
  if (vkAllocateMemory(device_, &mai, nullptr, &memory_) != VK_SUCCESS) {
    *error = "out of device memory (" + std::to_string(req.size) + " bytes)";
    return false;
  }
  vkBindBufferMemory(device_, buffer_, memory_, 0);
  if (host_visible && vkMapMemory(device_, memory_, 0, VK_WHOLE_SIZE, 0, &mapped_) != VK_SUCCESS) {
    *error = "vkMapMemory failed";
    return false;
  }
  return true;
}

void Buffer::reset() {
  if (!device_) return;
  if (mapped_) vkUnmapMemory(device_, memory_);
  if (buffer_) vkDestroyBuffer(device_, buffer_, nullptr);
  if (memory_) vkFreeMemory(device_, memory_, nullptr);
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
}

}  // namespace vkdg
