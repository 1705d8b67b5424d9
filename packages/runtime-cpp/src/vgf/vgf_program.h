// One loaded VGF delegate on the device: tensors (host-visible, persistently mapped) for every
// resource the segments bind, one data-graph pipeline + session per segment with the constants
// baked in, descriptor sets written once and a command buffer recorded once. `run` copies the
// inputs in, submits that command buffer, waits, and copies the outputs out.
#pragma once

#include <memory>
#include <vector>

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/span.h>

#include "vgf/vgf_device.h"
#include "vgf/vgf_model.h"

namespace runtime_cpp {
namespace vgf {

using executorch::runtime::EValue;
using executorch::runtime::Span;

class GraphProgram {
 public:
  // Builds everything from `model` (whose pointers into the payload must be valid during the call).
  static Error create(const Model& model, std::unique_ptr<GraphProgram>* out);
  ~GraphProgram();
  GraphProgram(const GraphProgram&) = delete;
  GraphProgram& operator=(const GraphProgram&) = delete;

  // args: the delegate's inputs then outputs, in VGF model sequence order.
  Error run(Span<EValue*> args);

 private:
  struct Tensor {
    VkTensorARM tensor = VK_NULL_HANDLE;
    VkTensorViewARM view = VK_NULL_HANDLE;
    std::unique_ptr<vkc::DeviceMemory> memory;
  };
  struct Stage {
    VkShaderModule module = VK_NULL_HANDLE;
    std::vector<VkDescriptorSetLayout> set_layouts;  // indexed by set number
    std::vector<VkDescriptorSet> sets;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkPipeline pipeline = VK_NULL_HANDLE;
    VkDataGraphPipelineSessionARM session = VK_NULL_HANDLE;
    std::vector<std::unique_ptr<vkc::DeviceMemory>> session_memory;
  };
  struct Io {
    uint32_t mrt;
    int32_t vk_format;
    size_t nbytes;
  };

  GraphProgram() = default;
  Error create_tensors(const Model& model);
  Error create_stage(const Model& model, const Segment& segment, Stage* stage);
  Error bind_session_memory(Stage* stage);
  Error write_descriptors(const Segment& segment, Stage* stage);
  Error record_commands();
  Error copy_in(const Io& io, size_t arg, Span<EValue*> args);
  Error copy_out(const Io& io, size_t arg, Span<EValue*> args);

  std::unique_ptr<MlDevice> ml_;
  std::vector<Tensor> tensors_;  // indexed by MRT index; unused entries stay null
  std::vector<Stage> stages_;
  std::vector<Io> inputs_, outputs_;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
};

}  // namespace vgf
}  // namespace runtime_cpp
