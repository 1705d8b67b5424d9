// The delegate's device on top of vulkan_common: see device.h.
#include "device.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include <executorch/runtime/platform/log.h>

#include "pipeline_stats.h"
#include "variant_select.h"
#include "vk_coopmat.h"

namespace vkdg {
namespace {

// The device lists a subgroup-scope M=N=K=16 shape with fp16 A and B and fp32 C and result (the one
// gemm_tile_coop.glsl uses; NVIDIA lists it from Turing on).
bool has_coopmat_f16_16(VkInstance instance, VkPhysicalDevice physical) {
  if (!vkc::device_has_extension(physical, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME)) return false;
  auto query = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  uint32_t count = 0;
  if (!query || query(physical, &count, nullptr) != VK_SUCCESS || !count) return false;
  std::vector<VkCooperativeMatrixPropertiesKHR> shapes(count);
  for (auto& s : shapes) {
    s = VkCooperativeMatrixPropertiesKHR{};
    s.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
  }
  if (query(physical, &count, shapes.data()) != VK_SUCCESS) return false;
  if (std::getenv("VKDG_LOG_COOPMAT")) {  // what the device offers (bench: which bigger shapes to try)
    ET_LOG(Info, "VkComputeBackend: VK_NV_cooperative_matrix2 %d; %u cooperative-matrix shapes (M N K A B C R scope, "
                 "component types as VkComponentTypeKHR):",
           int(vkc::device_has_extension(physical, "VK_NV_cooperative_matrix2")), count);
    for (const auto& s : shapes)
      ET_LOG(Info, "  %u %u %u %d %d %d %d %d", s.MSize, s.NSize, s.KSize, int(s.AType), int(s.BType), int(s.CType),
             int(s.ResultType), int(s.scope));
  }
  for (uint32_t i = 0; i < count; ++i) {
    const auto& s = shapes[i];
    if (s.MSize == 16 && s.NSize == 16 && s.KSize == 16 && s.scope == VK_SCOPE_SUBGROUP_KHR &&
        s.AType == VK_COMPONENT_TYPE_FLOAT16_KHR && s.BType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
        s.CType == VK_COMPONENT_TYPE_FLOAT32_KHR && s.ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR)
      return true;
  }
  return false;
}

// matmul_f16bigcoop2's needs beyond the extension's features: a workgroup-scope fp16 x fp16 + fp32 flexible shape for
// 256 invocations whose granularities divide its 128 (M) x 256 (N) x 32 (K) block, and workgroup-scope matrices of
// up to 256 rows or columns in a 256-invocation workgroup.
bool has_coopmat2_block(VkInstance instance, VkPhysicalDevice physical) {
  auto query = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV"));
  uint32_t count = 0;
  if (!query || query(physical, &count, nullptr) != VK_SUCCESS || !count) return false;
  std::vector<VkCooperativeMatrixFlexibleDimensionsPropertiesNV> shapes(count);
  for (auto& s : shapes) {
    s = VkCooperativeMatrixFlexibleDimensionsPropertiesNV{};
    s.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV;
  }
  if (query(physical, &count, shapes.data()) != VK_SUCCESS) return false;
  VkPhysicalDeviceCooperativeMatrix2PropertiesNV limits{};
  limits.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV;
  VkPhysicalDeviceProperties2 props2{};
  props2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props2.pNext = &limits;
  vkGetPhysicalDeviceProperties2(physical, &props2);
  const bool log = std::getenv("VKDG_LOG_COOPMAT") != nullptr;
  if (log)
    ET_LOG(Info, "VkComputeBackend: VK_NV_cooperative_matrix2: workgroup scope up to %u invocations, dimensions up to %u, "
                 "%u B shared memory reserved; %u flexible shapes (granularity M N K, A B C R, scope, invocations):",
           limits.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize, limits.cooperativeMatrixFlexibleDimensionsMaxDimension,
           limits.cooperativeMatrixWorkgroupScopeReservedSharedMemory, count);
  if (limits.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize < 256 ||
      limits.cooperativeMatrixFlexibleDimensionsMaxDimension < 256)
    return false;
  bool found = false;
  for (const auto& s : shapes) {
    if (log)
      ET_LOG(Info, "  %u %u %u %d %d %d %d %d %u", s.MGranularity, s.NGranularity, s.KGranularity, int(s.AType),
             int(s.BType), int(s.CType), int(s.ResultType), int(s.scope), s.workgroupInvocations);
    found = found || (s.scope == VK_SCOPE_WORKGROUP_KHR && s.workgroupInvocations == 256 && s.MGranularity &&
                      s.NGranularity && s.KGranularity && 128 % s.MGranularity == 0 && 256 % s.NGranularity == 0 &&
                      32 % s.KGranularity == 0 && s.AType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
                      s.BType == VK_COMPONENT_TYPE_FLOAT16_KHR && s.CType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
                      s.ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR);
  }
  return found;
}

}  // namespace

Caps probe_caps(VkInstance instance, VkPhysicalDevice physical, uint32_t queue_family, uint32_t instance_api) {
  Caps caps;
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(physical, &props);
  caps.api_version = props.apiVersion < instance_api ? props.apiVersion : instance_api;
  caps.timestamp_period_ns = props.limits.timestampPeriod;
  caps.max_storage_range = props.limits.maxStorageBufferRange;
  if (const char* lowered = std::getenv("VKDG_MAX_STORAGE_RANGE")) {
    const unsigned long long v = std::strtoull(lowered, nullptr, 10);
    if (v > 0 && v < caps.max_storage_range) caps.max_storage_range = v;
  }
  caps.float16_int8_ext = caps.api_version < VK_API_VERSION_1_2 &&
                          vkc::device_has_extension(physical, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  // The 1.1-era structures (core in 1.2 under the same layout), so one query serves both versions.
  VkPhysicalDevice16BitStorageFeatures s16{};
  s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  VkPhysicalDeviceShaderFloat16Int8Features f16{};
  f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  const bool has_f16_struct = caps.api_version >= VK_API_VERSION_1_2 || caps.float16_int8_ext;
  s16.pNext = has_f16_struct ? &f16 : nullptr;
  // Each optional feature structure is appended to the chain its device supports.
  void** tail = has_f16_struct ? &f16.pNext : &s16.pNext;
  VkPhysicalDeviceVulkanMemoryModelFeatures mm{};
  mm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR coop{};
  coop.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
  const bool has_coop_ext = caps.api_version >= VK_API_VERSION_1_2 &&
                            vkc::device_has_extension(physical, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  if (has_coop_ext) {
    *tail = &mm;
    mm.pNext = &coop;
    tail = &coop.pNext;
  }
  // coopmat2's SPIR-V is 1.6: a Vulkan 1.3 device
  VkPhysicalDeviceCooperativeMatrix2FeaturesNV coop2{};
  coop2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV;
  const bool has_coop2_ext = has_coop_ext && caps.api_version >= VK_API_VERSION_1_3 &&
                             vkc::device_has_extension(physical, VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
  if (has_coop2_ext) {
    *tail = &coop2;
    tail = &coop2.pNext;
  }
  // The int8 dot product (core in 1.3, which this instance never asks for): through its extension.
  const bool has_dot = vkc::device_has_extension(physical, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{};
  dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  if (has_dot) *tail = &dot;
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
  caps.subgroup_arithmetic = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                             (sub.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) &&
                             (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  caps.coopmat_f16 = has_coop_ext && coop.cooperativeMatrix && mm.vulkanMemoryModel && caps.fp16_arithmetic &&
                     caps.storage16 && caps.subgroup_size == 32 && has_coopmat_f16_16(instance, physical);
  caps.coopmat2 = caps.coopmat_f16 && has_coop2_ext && coop2.cooperativeMatrixWorkgroupScope &&
                  coop2.cooperativeMatrixFlexibleDimensions && coop2.cooperativeMatrixTensorAddressing &&
                  coop2.cooperativeMatrixPerElementOperations && has_coopmat2_block(instance, physical);
  caps.int_dot_accelerated = has_dot && dot_props.integerDotProduct4x8BitPackedSignedAccelerated;
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, families.data());
  if (queue_family < count) caps.timestamp_bits = families[queue_family].timestampValidBits;
  return caps;
}

Error Device::create(bool need_fp16, bool want_int_dot, std::unique_ptr<Device>* out, bool fp16_math_optional) {
  auto d = std::unique_ptr<Device>(new (std::nothrow) Device());
  if (!d) return Error::MemoryAllocationFailed;
  vkc::InstanceOptions options;
  options.app_name = "VkComputeBackend";
  // 1.3 (the highest we use: coopmat2's SPIR-V 1.6) where the loader has it, else 1.2 or 1.1; a device's usable
  // version is the lower of its own and this one.
  uint32_t loader = VK_API_VERSION_1_1;
  if (vkc::loader_version(&loader) != Error::Ok) loader = VK_API_VERSION_1_1;
  options.api_version = loader >= VK_API_VERSION_1_3   ? VK_API_VERSION_1_3
                        : loader >= VK_API_VERSION_1_2 ? VK_API_VERSION_1_2
                                                       : VK_API_VERSION_1_1;
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
  d->caps_ = probe_caps(d->instance_->get(), physical.handle, family, options.api_version);
  const char* coop_env = std::getenv("VKDG_COOPMAT");  // "0": the generic fp16 tiles even where coopmat is
  Caps& caps = d->caps_;
  // fp16 arithmetic unless the program can go without it (its math32 twins) and the device lacks it or
  // VKDG_FP16_MATH=0 asks for the fp32-arithmetic path
  caps.fp16_math = need_fp16 && caps.fp16_arithmetic && !(fp16_math_optional && fp16_math_disabled());
  caps.coopmat_f16 = caps.coopmat_f16 && caps.fp16_math && !(coop_env && std::strcmp(coop_env, "0") == 0);
  const char* coop2_env = std::getenv("VKDG_COOPMAT2");  // "0": the VK_KHR_cooperative_matrix tiles only
  caps.coopmat2 = caps.coopmat2 && caps.coopmat_f16 && !(coop2_env && std::strcmp(coop2_env, "0") == 0);
  caps.int_dot = caps.int_dot && want_int_dot;  // from here on: whether each is enabled
  if (need_fp16 && !(caps.storage16 && (caps.fp16_arithmetic || fp16_math_optional))) {
    ET_LOG(Error, "VkComputeBackend: %s lacks %s: lower without force_fp16", d->name_.c_str(),
           caps.storage16 ? "shaderFloat16 (fp16 arithmetic, which this program's GEMM kernels need)"
                          : "16-bit storage buffers");
    return Error::NotSupported;
  }
  VkPhysicalDevice16BitStorageFeatures s16{};
  s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  VkPhysicalDeviceShaderFloat16Int8Features f16{};
  f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  std::vector<const char*> extensions;
  if (need_fp16) s16.storageBuffer16BitAccess = VK_TRUE;
  if (caps.fp16_math) {
    f16.shaderFloat16 = VK_TRUE;
    s16.pNext = &f16;
    if (caps.float16_int8_ext) extensions.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  }
  // The enabled features' chain: s16 (fp16 programs) -> f16 (fp16 arithmetic), memory model -> coopmat,
  // int8 dot product.
  const void* chain = need_fp16 ? static_cast<const void*>(&s16) : nullptr;
  void** tail = caps.fp16_math ? &f16.pNext : need_fp16 ? &s16.pNext : nullptr;
  auto append = [&](void* feature, void** feature_tail) {
    if (tail) *tail = feature;
    else chain = feature;
    tail = feature_tail;
  };
  VkPhysicalDeviceVulkanMemoryModelFeatures mm{};
  mm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR coop{};
  coop.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
  if (caps.coopmat_f16) {  // the f16coop variants' SPIR-V: CooperativeMatrixKHR + VulkanMemoryModel
    mm.vulkanMemoryModel = VK_TRUE;
    coop.cooperativeMatrix = VK_TRUE;
    append(&mm, &mm.pNext);
    append(&coop, &coop.pNext);
    extensions.push_back(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  }
  VkPhysicalDeviceCooperativeMatrix2FeaturesNV coop2{};
  coop2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV;
  if (caps.coopmat2) {  // what matmul_f16bigcoop2's SPIR-V declares
    coop2.cooperativeMatrixWorkgroupScope = VK_TRUE;
    coop2.cooperativeMatrixFlexibleDimensions = VK_TRUE;
    coop2.cooperativeMatrixTensorAddressing = VK_TRUE;
    coop2.cooperativeMatrixPerElementOperations = VK_TRUE;
    append(&coop2, &coop2.pNext);
    extensions.push_back(VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
  }
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{};
  dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  if (caps.int_dot) {
    dot.shaderIntegerDotProduct = VK_TRUE;
    append(&dot, &dot.pNext);
    extensions.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  }
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR exe{};
  exe.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR;
  caps.pipeline_stats = pipeline_stats_requested() &&
                        vkc::device_has_extension(physical.handle, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  if (caps.pipeline_stats) {
    exe.pipelineExecutableInfo = VK_TRUE;
    append(&exe, &exe.pNext);
    extensions.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  }
  ET_LOG(Info, "VkComputeBackend: %s, Vulkan %u.%u, fp16 arithmetic %d (enabled %d), 16-bit storage %d, subgroup %u "
         "(arithmetic %d), "
         "timestamps %u bits, cooperative matrix %d (NV 2: %d), int8 dot product %d (accelerated %d)", d->name_.c_str(),
         VK_API_VERSION_MAJOR(caps.api_version), VK_API_VERSION_MINOR(caps.api_version), caps.fp16_arithmetic, caps.fp16_math,
         caps.storage16, caps.subgroup_size, caps.subgroup_arithmetic, caps.timestamp_bits, caps.coopmat_f16, caps.coopmat2,
         caps.int_dot,
         caps.int_dot_accelerated);
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
