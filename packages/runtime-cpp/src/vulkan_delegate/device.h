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
// else the first discrete GPU, then integrated, virtual, CPU (lavapipe); Vulkan 1.1 and a compute
// queue are required. What else the device offers is probed at load (Caps) and enabled when a
// program needs it: fp16 arithmetic + 16-bit storage (core in 1.2, VK_KHR_shader_float16_int8 on a
// 1.1 device), the packed int8 dot product (VK_KHR_shader_integer_dot_product, for linear_qi_dot),
// timestamps for the per-dispatch profile, tensor cores (VK_KHR_cooperative_matrix) for fp16 programs.
struct Caps {
  uint32_t api_version = 0;
  bool fp16_arithmetic = false;  // shaderFloat16
  // After Device::create: fp16 arithmetic is enabled (an fp16 program that does not run its math32 twins;
  // variant_select.h).
  bool fp16_math = false;
  bool storage16 = false;        // storageBuffer16BitAccess
  bool float16_int8_ext = false; // a 1.1 device that has fp16 arithmetic through the extension
  bool int_dot = false;          // shaderIntegerDotProduct (VK_KHR_shader_integer_dot_product)
  bool int_dot_accelerated = false;  // integerDotProduct4x8BitPackedSignedAccelerated (logged only)
  uint32_t subgroup_size = 0;
  bool subgroup_arithmetic = false;  // subgroupAdd/Max/Min in compute shaders (the row reductions' sg twins)
  // VK_KHR_cooperative_matrix with a subgroup-scope 16x16x16 fp16 x fp16 + fp32 shape, the
  // vulkanMemoryModel its SPIR-V declares, and 32-wide subgroups (gemm_tile_coop.glsl gives each of a
  // workgroup's 8 subgroups a 16x32 strip): the f16coop shader variants can run. After Device::create,
  // true only where it was enabled (an fp16 program, VKDG_COOPMAT not 0).
  bool coopmat_f16 = false;
  // VK_NV_cooperative_matrix2 on a Vulkan 1.3 device, with coopmat_f16, the workgroup-scope, flexible-dimension,
  // tensor-addressing and per-element features and a 256-invocation fp16 x fp16 + fp32 workgroup shape that fits
  // matmul_f16bigcoop2's 128x256x32 block: the runtime runs that twin for `matmul_f16big`. After Device::create, true
  // only where enabled (coopmat_f16 on, VKDG_COOPMAT2 not 0).
  bool coopmat2 = false;
  uint32_t timestamp_bits = 0;   // of the chosen queue family; 0: no timestamps
  // maxStorageBufferRange: the most bytes one storage-buffer binding (one tensor) may span; a larger
  // binding is undefined behaviour (reads past it may return zeros). VKDG_MAX_STORAGE_RANGE=<bytes>
  // lowers it (to test the refusal on a device with a large limit).
  uint64_t max_storage_range = 0;
  float timestamp_period_ns = 0;
  // VK_KHR_pipeline_executable_properties enabled (VKDG_PIPELINE_STATS=1 and the device has it): pipelines
  // are created with their compiler statistics captured and logged (pipeline_stats.h)
  bool pipeline_stats = false;
};

class Device {
 public:
  // Error (with a log line naming what is missing) when there is no usable device, or when fp16 is
  // needed and the device lacks 16-bit storage, or shaderFloat16 unless `fp16_math_optional` (the program
  // can run its math32 twins: runs_without_float16). `want_int_dot`: enable the integer dot product where
  // the device has it (caps().int_dot then says it is on). caps().fp16_math says whether fp16 arithmetic
  // is on: not where the device lacks it or VKDG_FP16_MATH=0 makes an optional program go without.
  static Error create(bool need_fp16, bool want_int_dot, std::unique_ptr<Device>* out,
                      bool fp16_math_optional = false);

  VkDevice handle() const { return device_->get(); }
  VkPhysicalDevice physical() const { return device_->physical(); }
  VkQueue queue() const { return device_->queue(); }
  uint32_t queue_family() const { return device_->queue_family(); }
  const std::string& name() const { return name_; }
  const Caps& caps() const { return caps_; }

  // A storage buffer (also a transfer source and destination) of at least `size` bytes: device-local,
  // or host-visible and mapped.
  Error buffer(uint64_t size, bool host_visible, std::unique_ptr<vkc::Buffer>* out) const;

 private:
  Device() = default;
  std::unique_ptr<vkc::Instance> instance_;  // declared first: destroyed after the device
  std::unique_ptr<vkc::Device> device_;
  std::string name_;
  Caps caps_;
};

// The features of `physical` that the delegate's kernels can use (queried, nothing enabled), under an
// instance of version `instance_api`.
Caps probe_caps(VkInstance instance, VkPhysicalDevice physical, uint32_t queue_family, uint32_t instance_api);

}  // namespace vkdg
