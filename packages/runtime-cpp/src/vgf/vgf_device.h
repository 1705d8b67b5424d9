// The Vulkan side of VgfBackend: a device with VK_ARM_tensors + VK_ARM_data_graph (native, or
// through the ML SDK emulation layers), and the extension entry points fetched from it.
#pragma once

#include <memory>

#include "vgf/vk_arm_ml.h"
#include "vulkan_common/vk_common.h"

namespace runtime_cpp {
namespace vgf {

using executorch::runtime::Error;

// Layer names of the ML SDK for Vulkan emulation layers, in the order they must stack.
constexpr const char* kGraphLayer = "VK_LAYER_ML_Graph_Emulation";
constexpr const char* kTensorLayer = "VK_LAYER_ML_Tensor_Emulation";

struct MlDispatch {
  PFN_vkCreateTensorARM create_tensor = nullptr;
  PFN_vkDestroyTensorARM destroy_tensor = nullptr;
  PFN_vkCreateTensorViewARM create_tensor_view = nullptr;
  PFN_vkDestroyTensorViewARM destroy_tensor_view = nullptr;
  PFN_vkGetTensorMemoryRequirementsARM tensor_memory_requirements = nullptr;
  PFN_vkBindTensorMemoryARM bind_tensor_memory = nullptr;
  PFN_vkCreateDataGraphPipelinesARM create_pipelines = nullptr;
  PFN_vkCreateDataGraphPipelineSessionARM create_session = nullptr;
  PFN_vkGetDataGraphPipelineSessionBindPointRequirementsARM session_bind_points = nullptr;
  PFN_vkGetDataGraphPipelineSessionMemoryRequirementsARM session_memory_requirements = nullptr;
  PFN_vkBindDataGraphPipelineSessionMemoryARM bind_session_memory = nullptr;
  PFN_vkDestroyDataGraphPipelineSessionARM destroy_session = nullptr;
  PFN_vkCmdDispatchDataGraphARM dispatch = nullptr;
};

// One instance + device + queue for one loaded delegate (no process-wide Vulkan state).
struct MlDevice {
  std::unique_ptr<vkc::Instance> instance;
  std::unique_ptr<vkc::Device> device;
  MlDispatch fn;
  bool emulated = false;  // the extensions come from the emulation layers
  char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE] = {};
};

// Creates the device; the log line of a failure says which piece is missing and how to get it.
Error create_ml_device(std::unique_ptr<MlDevice>* out);

}  // namespace vgf
}  // namespace runtime_cpp
