// VK_ARM_tensors + VK_ARM_data_graph device creation: see vgf_device.h.
#include "vgf/vgf_device.h"

#include <cstring>
#include <new>

#include <executorch/runtime/platform/log.h>

namespace runtime_cpp {
namespace vgf {
namespace {

constexpr const char* kId = "VgfBackend";

bool has_ml_extensions(VkPhysicalDevice dev) {
  return vkc::device_has_extension(dev, VK_ARM_TENSORS_EXTENSION_NAME) &&
         vkc::device_has_extension(dev, VK_ARM_DATA_GRAPH_EXTENSION_NAME);
}

Error make_instance(bool with_layers, std::unique_ptr<vkc::Instance>* instance,
                    vkc::PhysicalDevice* physical) {
  vkc::InstanceOptions options;
  options.app_name = kId;
  if (with_layers) options.layers = {kGraphLayer, kTensorLayer};  // Graph above Tensor
  Error err = vkc::Instance::create(options, instance);
  if (err != Error::Ok) return err;
  return vkc::pick_physical_device((*instance)->get(), physical);
}

template <typename T>
Error load(VkDevice device, const char* name, T* fn) {
  *fn = reinterpret_cast<T>(vkGetDeviceProcAddr(device, name));
  if (*fn == nullptr) {
    ET_LOG(Error, "%s: the device does not expose %s", kId, name);
    return Error::NotSupported;
  }
  return Error::Ok;
}

Error load_dispatch(VkDevice d, MlDispatch* f) {
  const Error errors[] = {
      load(d, "vkCreateTensorARM", &f->create_tensor),
      load(d, "vkDestroyTensorARM", &f->destroy_tensor),
      load(d, "vkCreateTensorViewARM", &f->create_tensor_view),
      load(d, "vkDestroyTensorViewARM", &f->destroy_tensor_view),
      load(d, "vkGetTensorMemoryRequirementsARM", &f->tensor_memory_requirements),
      load(d, "vkBindTensorMemoryARM", &f->bind_tensor_memory),
      load(d, "vkCreateDataGraphPipelinesARM", &f->create_pipelines),
      load(d, "vkCreateDataGraphPipelineSessionARM", &f->create_session),
      load(d, "vkGetDataGraphPipelineSessionBindPointRequirementsARM", &f->session_bind_points),
      load(d, "vkGetDataGraphPipelineSessionMemoryRequirementsARM",
           &f->session_memory_requirements),
      load(d, "vkBindDataGraphPipelineSessionMemoryARM", &f->bind_session_memory),
      load(d, "vkDestroyDataGraphPipelineSessionARM", &f->destroy_session),
      load(d, "vkCmdDispatchDataGraphARM", &f->dispatch),
  };
  for (const Error e : errors) {
    if (e != Error::Ok) return e;
  }
  return Error::Ok;
}

}  // namespace

Error create_ml_device(std::unique_ptr<MlDevice>* out) {
  uint32_t version = 0;
  if (vkc::loader_version(&version) != Error::Ok) {
    ET_LOG(Error, "%s: the Vulkan loader does not answer; install it: %s", kId, vkc::kAptInstall);
    return Error::NotSupported;
  }
  auto ml = std::unique_ptr<MlDevice>(new (std::nothrow) MlDevice());
  if (!ml) return Error::MemoryAllocationFailed;
  vkc::PhysicalDevice physical;
  // A driver with the extensions needs no layers; otherwise stack the emulation layers.
  Error err = make_instance(false, &ml->instance, &physical);
  if (err != Error::Ok) return err;
  if (!has_ml_extensions(physical.handle)) {
    ml->instance.reset();
    if (!vkc::instance_layer_available(kGraphLayer) ||
        !vkc::instance_layer_available(kTensorLayer)) {
      ET_LOG(Error, "%s: device %s lacks VK_ARM_tensors/VK_ARM_data_graph and the ML SDK "
                    "emulation layers (%s, %s) are not on the loader's path: `import arm_vgf` and "
                    "run inside arm_vgf.environment.layer_environment(), or set VK_LAYER_PATH to "
                    "the folders arm_vgf.environment.layer_manifest_dirs() writes (Graph first)",
             kId, physical.properties.deviceName, kGraphLayer, kTensorLayer);
      return Error::NotSupported;
    }
    err = make_instance(true, &ml->instance, &physical);
    if (err != Error::Ok) return err;
    if (!has_ml_extensions(physical.handle)) {
      ET_LOG(Error, "%s: device %s still lacks VK_ARM_tensors/VK_ARM_data_graph with the "
                    "emulation layers: the loader stacked them in the wrong order (each manifest "
                    "needs its own VK_LAYER_PATH folder, Graph first)", kId,
             physical.properties.deviceName);
      return Error::NotSupported;
    }
    ml->emulated = true;
  }
  std::memcpy(ml->name, physical.properties.deviceName, sizeof(ml->name));
  ml->name[sizeof(ml->name) - 1] = '\0';
  uint32_t family = 0;
  err = vkc::pick_queue_family(physical.handle, VK_QUEUE_COMPUTE_BIT, VK_QUEUE_DATA_GRAPH_BIT_ARM,
                               &family);
  if (err != Error::Ok) return err;
  VkPhysicalDeviceDataGraphFeaturesARM graph{};
  graph.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DATA_GRAPH_FEATURES_ARM;
  graph.dataGraph = VK_TRUE;
  VkPhysicalDeviceTensorFeaturesARM tensors{};
  tensors.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TENSOR_FEATURES_ARM;
  tensors.pNext = &graph;
  tensors.tensors = VK_TRUE;
  VkPhysicalDeviceVulkan13Features v13{};
  v13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES;
  v13.pNext = &tensors;
  v13.synchronization2 = VK_TRUE;
  const std::vector<const char*> extensions = {VK_ARM_TENSORS_EXTENSION_NAME,
                                               VK_ARM_DATA_GRAPH_EXTENSION_NAME};
  err = vkc::Device::create(physical.handle, family, extensions, &v13, &ml->device);
  if (err != Error::Ok) {
    ET_LOG(Error, "%s: could not create a VK_ARM_tensors + VK_ARM_data_graph device on %s", kId,
           physical.properties.deviceName);
    return err;
  }
  err = load_dispatch(ml->device->get(), &ml->fn);
  if (err != Error::Ok) return err;
  *out = std::move(ml);
  return Error::Ok;
}

}  // namespace vgf
}  // namespace runtime_cpp
