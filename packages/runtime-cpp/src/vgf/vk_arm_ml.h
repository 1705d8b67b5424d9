// The parts of VK_ARM_tensors and VK_ARM_data_graph that VgfBackend uses, for Vulkan headers that
// predate them (Debian 12's libvulkan-dev 1.3.239).
//
// Source: the Vulkan registry, KhronosGroup/Vulkan-Headers include/vulkan/vulkan_core.h at
// "Update for Vulkan-Docs 1.4.359" (commit f9973cd97e6f3584707e7ef1c425e336f1b92a5b):
// VK_ARM_tensors spec revision 2, VK_ARM_data_graph spec revision 1. Declarations are copied as
// the spec defines them (names, values and layouts are the ABI); only what VgfBackend needs.
// Functions are device-level and fetched with vkGetDeviceProcAddr (MlDispatch below).
#pragma once

#include <vulkan/vulkan.h>

#ifndef VK_ARM_tensors
#define VK_ARM_tensors 1
VK_DEFINE_NON_DISPATCHABLE_HANDLE(VkTensorARM)
VK_DEFINE_NON_DISPATCHABLE_HANDLE(VkTensorViewARM)
#define VK_ARM_TENSORS_EXTENSION_NAME "VK_ARM_tensors"

typedef enum VkTensorTilingARM {
  VK_TENSOR_TILING_OPTIMAL_ARM = 0,
  VK_TENSOR_TILING_LINEAR_ARM = 1,
  VK_TENSOR_TILING_MAX_ENUM_ARM = 0x7FFFFFFF
} VkTensorTilingARM;
typedef VkFlags64 VkTensorCreateFlagsARM;
typedef VkFlags64 VkTensorViewCreateFlagsARM;
typedef VkFlags64 VkTensorUsageFlagsARM;
static const VkTensorUsageFlagsARM VK_TENSOR_USAGE_SHADER_BIT_ARM = 0x00000002ULL;
static const VkTensorUsageFlagsARM VK_TENSOR_USAGE_TRANSFER_SRC_BIT_ARM = 0x00000004ULL;
static const VkTensorUsageFlagsARM VK_TENSOR_USAGE_TRANSFER_DST_BIT_ARM = 0x00000008ULL;
static const VkTensorUsageFlagsARM VK_TENSOR_USAGE_DATA_GRAPH_BIT_ARM = 0x00000020ULL;

static const VkStructureType VK_STRUCTURE_TYPE_TENSOR_CREATE_INFO_ARM = (VkStructureType)1000460000;
static const VkStructureType VK_STRUCTURE_TYPE_TENSOR_VIEW_CREATE_INFO_ARM = (VkStructureType)1000460001;
static const VkStructureType VK_STRUCTURE_TYPE_BIND_TENSOR_MEMORY_INFO_ARM = (VkStructureType)1000460002;
static const VkStructureType VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET_TENSOR_ARM = (VkStructureType)1000460003;
static const VkStructureType VK_STRUCTURE_TYPE_TENSOR_DESCRIPTION_ARM = (VkStructureType)1000460006;
static const VkStructureType VK_STRUCTURE_TYPE_TENSOR_MEMORY_REQUIREMENTS_INFO_ARM = (VkStructureType)1000460007;
static const VkStructureType VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TENSOR_FEATURES_ARM = (VkStructureType)1000460009;
static const VkDescriptorType VK_DESCRIPTOR_TYPE_TENSOR_ARM = (VkDescriptorType)1000460000;
static const VkFormat VK_FORMAT_R8_BOOL_ARM = (VkFormat)1000460000;

typedef struct VkTensorDescriptionARM {
  VkStructureType sType;
  const void* pNext;
  VkTensorTilingARM tiling;
  VkFormat format;
  uint32_t dimensionCount;
  const int64_t* pDimensions;
  const int64_t* pStrides;
  VkTensorUsageFlagsARM usage;
} VkTensorDescriptionARM;

typedef struct VkTensorCreateInfoARM {
  VkStructureType sType;
  const void* pNext;
  VkTensorCreateFlagsARM flags;
  const VkTensorDescriptionARM* pDescription;
  VkSharingMode sharingMode;
  uint32_t queueFamilyIndexCount;
  const uint32_t* pQueueFamilyIndices;
} VkTensorCreateInfoARM;

typedef struct VkTensorViewCreateInfoARM {
  VkStructureType sType;
  const void* pNext;
  VkTensorViewCreateFlagsARM flags;
  VkTensorARM tensor;
  VkFormat format;
} VkTensorViewCreateInfoARM;

typedef struct VkTensorMemoryRequirementsInfoARM {
  VkStructureType sType;
  const void* pNext;
  VkTensorARM tensor;
} VkTensorMemoryRequirementsInfoARM;

typedef struct VkBindTensorMemoryInfoARM {
  VkStructureType sType;
  const void* pNext;
  VkTensorARM tensor;
  VkDeviceMemory memory;
  VkDeviceSize memoryOffset;
} VkBindTensorMemoryInfoARM;

typedef struct VkWriteDescriptorSetTensorARM {
  VkStructureType sType;
  const void* pNext;
  uint32_t tensorViewCount;
  const VkTensorViewARM* pTensorViews;
} VkWriteDescriptorSetTensorARM;

typedef struct VkPhysicalDeviceTensorFeaturesARM {
  VkStructureType sType;
  void* pNext;
  VkBool32 tensorNonPacked;
  VkBool32 shaderTensorAccess;
  VkBool32 shaderStorageTensorArrayDynamicIndexing;
  VkBool32 shaderStorageTensorArrayNonUniformIndexing;
  VkBool32 descriptorBindingStorageTensorUpdateAfterBind;
  VkBool32 tensors;
} VkPhysicalDeviceTensorFeaturesARM;

typedef VkResult(VKAPI_PTR* PFN_vkCreateTensorARM)(VkDevice, const VkTensorCreateInfoARM*,
                                                  const VkAllocationCallbacks*, VkTensorARM*);
typedef void(VKAPI_PTR* PFN_vkDestroyTensorARM)(VkDevice, VkTensorARM, const VkAllocationCallbacks*);
typedef VkResult(VKAPI_PTR* PFN_vkCreateTensorViewARM)(VkDevice, const VkTensorViewCreateInfoARM*,
                                                      const VkAllocationCallbacks*, VkTensorViewARM*);
typedef void(VKAPI_PTR* PFN_vkDestroyTensorViewARM)(VkDevice, VkTensorViewARM,
                                                   const VkAllocationCallbacks*);
typedef void(VKAPI_PTR* PFN_vkGetTensorMemoryRequirementsARM)(
    VkDevice, const VkTensorMemoryRequirementsInfoARM*, VkMemoryRequirements2*);
typedef VkResult(VKAPI_PTR* PFN_vkBindTensorMemoryARM)(VkDevice, uint32_t,
                                                      const VkBindTensorMemoryInfoARM*);
#endif  // VK_ARM_tensors

#ifndef VK_ARM_data_graph
#define VK_ARM_data_graph 1
VK_DEFINE_NON_DISPATCHABLE_HANDLE(VkDataGraphPipelineSessionARM)
#define VK_ARM_DATA_GRAPH_EXTENSION_NAME "VK_ARM_data_graph"

typedef enum VkDataGraphPipelineSessionBindPointARM {
  VK_DATA_GRAPH_PIPELINE_SESSION_BIND_POINT_TRANSIENT_ARM = 0,
  VK_DATA_GRAPH_PIPELINE_SESSION_BIND_POINT_MAX_ENUM_ARM = 0x7FFFFFFF
} VkDataGraphPipelineSessionBindPointARM;
typedef enum VkDataGraphPipelineSessionBindPointTypeARM {
  VK_DATA_GRAPH_PIPELINE_SESSION_BIND_POINT_TYPE_MEMORY_ARM = 0,
  VK_DATA_GRAPH_PIPELINE_SESSION_BIND_POINT_TYPE_MAX_ENUM_ARM = 0x7FFFFFFF
} VkDataGraphPipelineSessionBindPointTypeARM;
typedef VkFlags64 VkDataGraphPipelineSessionCreateFlagsARM;
typedef VkFlags64 VkDataGraphPipelineDispatchFlagsARM;
// VkPipelineCreateFlags2 (VK_KHR_maintenance5 / Vulkan 1.4) is also newer than Debian's headers.
typedef VkFlags64 RuntimeCppPipelineCreateFlags2;

static const VkStructureType VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_CREATE_INFO_ARM = (VkStructureType)1000507000;
static const VkStructureType VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_SESSION_CREATE_INFO_ARM = (VkStructureType)1000507001;
static const VkStructureType VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_RESOURCE_INFO_ARM = (VkStructureType)1000507002;
static const VkStructureType VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_CONSTANT_ARM = (VkStructureType)1000507003;
static const VkStructureType VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_SESSION_MEMORY_REQUIREMENTS_INFO_ARM = (VkStructureType)1000507004;
static const VkStructureType VK_STRUCTURE_TYPE_BIND_DATA_GRAPH_PIPELINE_SESSION_MEMORY_INFO_ARM = (VkStructureType)1000507005;
static const VkStructureType VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DATA_GRAPH_FEATURES_ARM = (VkStructureType)1000507006;
static const VkStructureType VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_SHADER_MODULE_CREATE_INFO_ARM = (VkStructureType)1000507007;
static const VkStructureType VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_SESSION_BIND_POINT_REQUIREMENTS_INFO_ARM = (VkStructureType)1000507011;
static const VkStructureType VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_SESSION_BIND_POINT_REQUIREMENT_ARM = (VkStructureType)1000507012;
static const VkPipelineBindPoint VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM = (VkPipelineBindPoint)1000507000;
static const VkQueueFlagBits VK_QUEUE_DATA_GRAPH_BIT_ARM = (VkQueueFlagBits)0x00000400;

typedef struct VkPhysicalDeviceDataGraphFeaturesARM {
  VkStructureType sType;
  void* pNext;
  VkBool32 dataGraph;
  VkBool32 dataGraphUpdateAfterBind;
  VkBool32 dataGraphSpecializationConstants;
  VkBool32 dataGraphDescriptorBuffer;
  VkBool32 dataGraphShaderModule;
} VkPhysicalDeviceDataGraphFeaturesARM;

typedef struct VkDataGraphPipelineConstantARM {
  VkStructureType sType;
  const void* pNext;
  uint32_t id;
  const void* pConstantData;
} VkDataGraphPipelineConstantARM;

typedef struct VkDataGraphPipelineResourceInfoARM {
  VkStructureType sType;
  const void* pNext;
  uint32_t descriptorSet;
  uint32_t binding;
  uint32_t arrayElement;
} VkDataGraphPipelineResourceInfoARM;

typedef struct VkDataGraphPipelineCreateInfoARM {
  VkStructureType sType;
  const void* pNext;
  RuntimeCppPipelineCreateFlags2 flags;
  VkPipelineLayout layout;
  uint32_t resourceInfoCount;
  const VkDataGraphPipelineResourceInfoARM* pResourceInfos;
} VkDataGraphPipelineCreateInfoARM;

typedef struct VkDataGraphPipelineShaderModuleCreateInfoARM {
  VkStructureType sType;
  const void* pNext;
  VkShaderModule module;
  const char* pName;
  const VkSpecializationInfo* pSpecializationInfo;
  uint32_t constantCount;
  const VkDataGraphPipelineConstantARM* pConstants;
} VkDataGraphPipelineShaderModuleCreateInfoARM;

typedef struct VkDataGraphPipelineSessionCreateInfoARM {
  VkStructureType sType;
  const void* pNext;
  VkDataGraphPipelineSessionCreateFlagsARM flags;
  VkPipeline dataGraphPipeline;
} VkDataGraphPipelineSessionCreateInfoARM;

typedef struct VkDataGraphPipelineSessionBindPointRequirementsInfoARM {
  VkStructureType sType;
  const void* pNext;
  VkDataGraphPipelineSessionARM session;
} VkDataGraphPipelineSessionBindPointRequirementsInfoARM;

typedef struct VkDataGraphPipelineSessionBindPointRequirementARM {
  VkStructureType sType;
  void* pNext;
  VkDataGraphPipelineSessionBindPointARM bindPoint;
  VkDataGraphPipelineSessionBindPointTypeARM bindPointType;
  uint32_t numObjects;
} VkDataGraphPipelineSessionBindPointRequirementARM;

typedef struct VkDataGraphPipelineSessionMemoryRequirementsInfoARM {
  VkStructureType sType;
  const void* pNext;
  VkDataGraphPipelineSessionARM session;
  VkDataGraphPipelineSessionBindPointARM bindPoint;
  uint32_t objectIndex;
} VkDataGraphPipelineSessionMemoryRequirementsInfoARM;

typedef struct VkBindDataGraphPipelineSessionMemoryInfoARM {
  VkStructureType sType;
  const void* pNext;
  VkDataGraphPipelineSessionARM session;
  VkDataGraphPipelineSessionBindPointARM bindPoint;
  uint32_t objectIndex;
  VkDeviceMemory memory;
  VkDeviceSize memoryOffset;
} VkBindDataGraphPipelineSessionMemoryInfoARM;

typedef struct VkDataGraphPipelineDispatchInfoARM {
  VkStructureType sType;
  void* pNext;
  VkDataGraphPipelineDispatchFlagsARM flags;
} VkDataGraphPipelineDispatchInfoARM;

typedef VkResult(VKAPI_PTR* PFN_vkCreateDataGraphPipelinesARM)(
    VkDevice, VkDeferredOperationKHR, VkPipelineCache, uint32_t,
    const VkDataGraphPipelineCreateInfoARM*, const VkAllocationCallbacks*, VkPipeline*);
typedef VkResult(VKAPI_PTR* PFN_vkCreateDataGraphPipelineSessionARM)(
    VkDevice, const VkDataGraphPipelineSessionCreateInfoARM*, const VkAllocationCallbacks*,
    VkDataGraphPipelineSessionARM*);
typedef VkResult(VKAPI_PTR* PFN_vkGetDataGraphPipelineSessionBindPointRequirementsARM)(
    VkDevice, const VkDataGraphPipelineSessionBindPointRequirementsInfoARM*, uint32_t*,
    VkDataGraphPipelineSessionBindPointRequirementARM*);
typedef void(VKAPI_PTR* PFN_vkGetDataGraphPipelineSessionMemoryRequirementsARM)(
    VkDevice, const VkDataGraphPipelineSessionMemoryRequirementsInfoARM*, VkMemoryRequirements2*);
typedef VkResult(VKAPI_PTR* PFN_vkBindDataGraphPipelineSessionMemoryARM)(
    VkDevice, uint32_t, const VkBindDataGraphPipelineSessionMemoryInfoARM*);
typedef void(VKAPI_PTR* PFN_vkDestroyDataGraphPipelineSessionARM)(
    VkDevice, VkDataGraphPipelineSessionARM, const VkAllocationCallbacks*);
typedef void(VKAPI_PTR* PFN_vkCmdDispatchDataGraphARM)(VkCommandBuffer, VkDataGraphPipelineSessionARM,
                                                      const VkDataGraphPipelineDispatchInfoARM*);
#endif  // VK_ARM_data_graph
