// GraphProgram: see vgf_program.h.
#include "vgf/vgf_program.h"

#include <cstring>
#include <map>
#include <new>

#include <executorch/runtime/platform/log.h>

#include "common/tensor_io.h"

namespace runtime_cpp {
namespace vgf {
namespace {

constexpr const char* kId = "VgfBackend";
using vkc::vk_error;

VkTensorDescriptionARM describe(const TensorDesc& t, VkTensorTilingARM tiling) {
  VkTensorDescriptionARM d{};
  d.sType = VK_STRUCTURE_TYPE_TENSOR_DESCRIPTION_ARM;
  d.tiling = tiling;
  d.format = static_cast<VkFormat>(t.vk_format);
  d.dimensionCount = static_cast<uint32_t>(t.shape.size());
  d.pDimensions = t.shape.data();
  d.pStrides = t.strides.empty() ? nullptr : t.strides.data();
  d.usage = VK_TENSOR_USAGE_DATA_GRAPH_BIT_ARM;
  return d;
}

bool packed(const TensorDesc& t) {
  if (t.strides.empty()) return true;
  if (t.strides.size() != t.shape.size()) return false;
  int64_t expect = static_cast<int64_t>(t.element_size);
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

// The ExecuTorch dtype a VkFormat holds (Undefined: no direct match).
ScalarType scalar_type(int32_t vk_format) {
  switch (vk_format) {
    case 13: return ScalarType::Byte;
    case 14: return ScalarType::Char;
    case 75: return ScalarType::Short;
    case 76: return ScalarType::Half;
    case 99: return ScalarType::Int;
    case 100: return ScalarType::Float;
    case 111: return ScalarType::Long;
    case 1000460000: return ScalarType::Bool;
    case 1000460001: return ScalarType::BFloat16;
    default: return ScalarType::Undefined;
  }
}

// IEEE fp32 <-> fp16 bits, round to nearest even: a VGF converted with --type-narrowing takes and
// returns fp16 where the .pte boundary stays fp32.
uint16_t to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7FFFFFFFu;
  if (x >= 0x7F800000u) return static_cast<uint16_t>(sign | (x > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (x >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past the max
  if (x < 0x38800000u) {  // subnormal half (or zero)
    if (x < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t m = (x & 0x007FFFFFu) | 0x00800000u;
    const int shift = 126 - static_cast<int>(x >> 23);  // 14..24
    uint32_t h = m >> shift;
    const uint32_t rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((x - 0x38000000u) >> 13);
  const uint32_t rest = x & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float from_half(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, x;
  if (exp == 0x1Fu) {
    x = sign | 0x7F800000u | (man << 13);
  } else if (exp != 0) {
    x = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    x = sign;
  } else {  // subnormal: normalize
    exp = 113;
    while (!(man & 0x400u)) {
      man <<= 1;
      --exp;
    }
    x = sign | (exp << 23) | ((man & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace

Error GraphProgram::create(const Model& model, std::unique_ptr<GraphProgram>* out) {
  auto p = std::unique_ptr<GraphProgram>(new (std::nothrow) GraphProgram());
  if (!p) return Error::MemoryAllocationFailed;
  Error err = create_ml_device(&p->ml_);
  if (err != Error::Ok) return err;
  err = p->create_tensors(model);
  if (err != Error::Ok) return err;
  const VkDevice dev = p->ml_->device->get();
  // One descriptor pool for every set of every segment.
  uint32_t n_sets = 0, n_bindings = 0;
  std::vector<std::map<uint32_t, uint32_t>> per_segment_sets;
  for (const auto& seg : model.segments) {
    uint32_t max_set = 0;
    for (const auto& b : seg.bindings) max_set = b.set > max_set ? b.set : max_set;
    n_sets += max_set + 1;
    n_bindings += static_cast<uint32_t>(seg.bindings.size());
  }
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_TENSOR_ARM, n_bindings > 0 ? n_bindings : 1};
  VkDescriptorPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  pool_info.maxSets = n_sets;
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &size;
  err = vk_error(vkCreateDescriptorPool(dev, &pool_info, nullptr, &p->pool_),
                 "vkCreateDescriptorPool");
  if (err != Error::Ok) return err;
  p->stages_.resize(model.segments.size());
  for (size_t i = 0; i < model.segments.size(); ++i) {
    err = p->create_stage(model, model.segments[i], &p->stages_[i]);
    if (err != Error::Ok) return err;
  }
  for (const auto& b : model.inputs) {
    p->inputs_.push_back({b.mrt, model.resources[b.mrt].vk_format, model.resources[b.mrt].nbytes});
  }
  for (const auto& b : model.outputs) {
    p->outputs_.push_back({b.mrt, model.resources[b.mrt].vk_format, model.resources[b.mrt].nbytes});
  }
  err = p->record_commands();
  if (err != Error::Ok) return err;
  *out = std::move(p);
  return Error::Ok;
}

Error GraphProgram::create_tensors(const Model& model) {
  const VkDevice dev = ml_->device->get();
  tensors_.resize(model.resources.size());
  std::vector<bool> used(model.resources.size(), false);
  for (const auto& seg : model.segments) {
    for (const auto& b : seg.bindings) used[b.mrt] = true;
  }
  for (size_t i = 0; i < used.size(); ++i) {
    if (!used[i]) continue;
    const TensorDesc& desc = model.resources[i];
    if (!packed(desc)) {
      ET_LOG(Error, "%s: VGF resource %zu has non-packed strides, which this backend does not "
                    "handle", kId, i);
      return Error::NotSupported;
    }
    const VkTensorDescriptionARM d = describe(desc, VK_TENSOR_TILING_LINEAR_ARM);
    VkTensorCreateInfoARM info{};
    info.sType = VK_STRUCTURE_TYPE_TENSOR_CREATE_INFO_ARM;
    info.pDescription = &d;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    Tensor& t = tensors_[i];
    Error err = vk_error(ml_->fn.create_tensor(dev, &info, nullptr, &t.tensor), "vkCreateTensorARM");
    if (err != Error::Ok) return err;
    VkTensorMemoryRequirementsInfoARM req_info{};
    req_info.sType = VK_STRUCTURE_TYPE_TENSOR_MEMORY_REQUIREMENTS_INFO_ARM;
    req_info.tensor = t.tensor;
    VkMemoryRequirements2 req{};
    req.sType = VK_STRUCTURE_TYPE_MEMORY_REQUIREMENTS_2;
    ml_->fn.tensor_memory_requirements(dev, &req_info, &req);
    err = vkc::DeviceMemory::allocate(
        dev, ml_->device->physical(), req.memoryRequirements,
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, &t.memory);
    if (err != Error::Ok) return err;
    VkBindTensorMemoryInfoARM bind{};
    bind.sType = VK_STRUCTURE_TYPE_BIND_TENSOR_MEMORY_INFO_ARM;
    bind.tensor = t.tensor;
    bind.memory = t.memory->get();
    err = vk_error(ml_->fn.bind_tensor_memory(dev, 1, &bind), "vkBindTensorMemoryARM");
    if (err != Error::Ok) return err;
    VkTensorViewCreateInfoARM view{};
    view.sType = VK_STRUCTURE_TYPE_TENSOR_VIEW_CREATE_INFO_ARM;
    view.tensor = t.tensor;
    view.format = d.format;
    err = vk_error(ml_->fn.create_tensor_view(dev, &view, nullptr, &t.view),
                   "vkCreateTensorViewARM");
    if (err != Error::Ok) return err;
  }
  return Error::Ok;
}

Error GraphProgram::create_stage(const Model& model, const Segment& seg, Stage* stage) {
  const VkDevice dev = ml_->device->get();
  VkShaderModuleCreateInfo module_info{};
  module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module_info.codeSize = seg.spirv_words * sizeof(uint32_t);
  module_info.pCode = seg.spirv;
  Error err = vk_error(vkCreateShaderModule(dev, &module_info, nullptr, &stage->module),
                       "vkCreateShaderModule");
  if (err != Error::Ok) return err;
  // Descriptor set layouts, one per set number up to the highest the segment uses.
  std::map<uint32_t, std::vector<VkDescriptorSetLayoutBinding>> by_set;
  uint32_t max_set = 0;
  for (const auto& b : seg.bindings) {
    by_set[b.set].push_back({b.binding, VK_DESCRIPTOR_TYPE_TENSOR_ARM, 1, VK_SHADER_STAGE_ALL,
                             nullptr});
    max_set = b.set > max_set ? b.set : max_set;
  }
  stage->set_layouts.assign(max_set + 1, VK_NULL_HANDLE);
  for (uint32_t s = 0; s <= max_set; ++s) {
    const auto& bindings = by_set[s];
    VkDescriptorSetLayoutCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
    info.bindingCount = static_cast<uint32_t>(bindings.size());
    info.pBindings = bindings.data();
    err = vk_error(vkCreateDescriptorSetLayout(dev, &info, nullptr, &stage->set_layouts[s]),
                   "vkCreateDescriptorSetLayout");
    if (err != Error::Ok) return err;
  }
  VkPipelineLayoutCreateInfo layout_info{};
  layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout_info.setLayoutCount = static_cast<uint32_t>(stage->set_layouts.size());
  layout_info.pSetLayouts = stage->set_layouts.data();
  err = vk_error(vkCreatePipelineLayout(dev, &layout_info, nullptr, &stage->layout),
                 "vkCreatePipelineLayout");
  if (err != Error::Ok) return err;
  // Resource and constant descriptions must stay put while the create call reads them.
  std::vector<VkTensorDescriptionARM> resource_desc, constant_desc;
  resource_desc.reserve(seg.bindings.size());
  constant_desc.reserve(seg.constants.size());
  std::vector<VkDataGraphPipelineResourceInfoARM> resources;
  for (const auto& b : seg.bindings) {
    resource_desc.push_back(describe(model.resources[b.mrt], VK_TENSOR_TILING_LINEAR_ARM));
    VkDataGraphPipelineResourceInfoARM r{};
    r.sType = VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_RESOURCE_INFO_ARM;
    r.pNext = &resource_desc.back();
    r.descriptorSet = b.set;
    r.binding = b.binding;
    resources.push_back(r);
  }
  std::vector<VkDataGraphPipelineConstantARM> constants;
  for (const auto& c : seg.constants) {
    constant_desc.push_back(describe(model.resources[c.mrt], VK_TENSOR_TILING_LINEAR_ARM));
    VkDataGraphPipelineConstantARM k{};
    k.sType = VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_CONSTANT_ARM;
    k.pNext = &constant_desc.back();
    k.id = c.id;
    k.pConstantData = c.data;
    constants.push_back(k);
  }
  VkDataGraphPipelineShaderModuleCreateInfoARM shader{};
  shader.sType = VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_SHADER_MODULE_CREATE_INFO_ARM;
  shader.module = stage->module;
  shader.pName = seg.entry_point.c_str();
  shader.constantCount = static_cast<uint32_t>(constants.size());
  shader.pConstants = constants.data();
  VkDataGraphPipelineCreateInfoARM info{};
  info.sType = VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_CREATE_INFO_ARM;
  info.pNext = &shader;
  info.layout = stage->layout;
  info.resourceInfoCount = static_cast<uint32_t>(resources.size());
  info.pResourceInfos = resources.data();
  err = vk_error(ml_->fn.create_pipelines(dev, VK_NULL_HANDLE, VK_NULL_HANDLE, 1, &info, nullptr,
                                          &stage->pipeline),
                 "vkCreateDataGraphPipelinesARM");
  if (err != Error::Ok) return err;
  VkDataGraphPipelineSessionCreateInfoARM session{};
  session.sType = VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_SESSION_CREATE_INFO_ARM;
  session.dataGraphPipeline = stage->pipeline;
  err = vk_error(ml_->fn.create_session(dev, &session, nullptr, &stage->session),
                 "vkCreateDataGraphPipelineSessionARM");
  if (err != Error::Ok) return err;
  err = bind_session_memory(stage);
  if (err != Error::Ok) return err;
  return write_descriptors(seg, stage);
}

Error GraphProgram::bind_session_memory(Stage* stage) {
  const VkDevice dev = ml_->device->get();
  VkDataGraphPipelineSessionBindPointRequirementsInfoARM info{};
  info.sType = VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_SESSION_BIND_POINT_REQUIREMENTS_INFO_ARM;
  info.session = stage->session;
  uint32_t count = 0;
  Error err = vk_error(ml_->fn.session_bind_points(dev, &info, &count, nullptr),
                       "vkGetDataGraphPipelineSessionBindPointRequirementsARM");
  if (err != Error::Ok) return err;
  std::vector<VkDataGraphPipelineSessionBindPointRequirementARM> reqs(count);
  for (auto& r : reqs) r.sType = VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_SESSION_BIND_POINT_REQUIREMENT_ARM;
  err = vk_error(ml_->fn.session_bind_points(dev, &info, &count, reqs.data()),
                 "vkGetDataGraphPipelineSessionBindPointRequirementsARM");
  if (err != Error::Ok) return err;
  for (const auto& r : reqs) {
    if (r.bindPointType != VK_DATA_GRAPH_PIPELINE_SESSION_BIND_POINT_TYPE_MEMORY_ARM) continue;
    for (uint32_t obj = 0; obj < r.numObjects; ++obj) {
      VkDataGraphPipelineSessionMemoryRequirementsInfoARM mem_info{};
      mem_info.sType = VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_SESSION_MEMORY_REQUIREMENTS_INFO_ARM;
      mem_info.session = stage->session;
      mem_info.bindPoint = r.bindPoint;
      mem_info.objectIndex = obj;
      VkMemoryRequirements2 req{};
      req.sType = VK_STRUCTURE_TYPE_MEMORY_REQUIREMENTS_2;
      ml_->fn.session_memory_requirements(dev, &mem_info, &req);
      if (req.memoryRequirements.size == 0) continue;
      std::unique_ptr<vkc::DeviceMemory> memory;
      err = vkc::DeviceMemory::allocate(dev, ml_->device->physical(), req.memoryRequirements, 0,
                                        &memory);
      if (err != Error::Ok) return err;
      VkBindDataGraphPipelineSessionMemoryInfoARM bind{};
      bind.sType = VK_STRUCTURE_TYPE_BIND_DATA_GRAPH_PIPELINE_SESSION_MEMORY_INFO_ARM;
      bind.session = stage->session;
      bind.bindPoint = r.bindPoint;
      bind.objectIndex = obj;
      bind.memory = memory->get();
      err = vk_error(ml_->fn.bind_session_memory(dev, 1, &bind),
                     "vkBindDataGraphPipelineSessionMemoryARM");
      if (err != Error::Ok) return err;
      stage->session_memory.push_back(std::move(memory));
    }
  }
  return Error::Ok;
}

Error GraphProgram::write_descriptors(const Segment& seg, Stage* stage) {
  const VkDevice dev = ml_->device->get();
  VkDescriptorSetAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  alloc.descriptorPool = pool_;
  alloc.descriptorSetCount = static_cast<uint32_t>(stage->set_layouts.size());
  alloc.pSetLayouts = stage->set_layouts.data();
  stage->sets.assign(stage->set_layouts.size(), VK_NULL_HANDLE);
  Error err = vk_error(vkAllocateDescriptorSets(dev, &alloc, stage->sets.data()),
                       "vkAllocateDescriptorSets");
  if (err != Error::Ok) return err;
  std::vector<VkWriteDescriptorSetTensorARM> tensor_writes(seg.bindings.size());
  std::vector<VkWriteDescriptorSet> writes(seg.bindings.size());
  for (size_t i = 0; i < seg.bindings.size(); ++i) {
    const Binding& b = seg.bindings[i];
    tensor_writes[i] = {};
    tensor_writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET_TENSOR_ARM;
    tensor_writes[i].tensorViewCount = 1;
    tensor_writes[i].pTensorViews = &tensors_[b.mrt].view;
    writes[i] = {};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].pNext = &tensor_writes[i];
    writes[i].dstSet = stage->sets[b.set];
    writes[i].dstBinding = b.binding;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_TENSOR_ARM;
  }
  vkUpdateDescriptorSets(dev, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  return Error::Ok;
}

Error GraphProgram::record_commands() {
  const VkDevice dev = ml_->device->get();
  VkCommandPoolCreateInfo pool{};
  pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool.queueFamilyIndex = ml_->device->queue_family();
  Error err = vk_error(vkCreateCommandPool(dev, &pool, nullptr, &command_pool_),
                       "vkCreateCommandPool");
  if (err != Error::Ok) return err;
  VkCommandBufferAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  alloc.commandPool = command_pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  err = vk_error(vkAllocateCommandBuffers(dev, &alloc, &commands_), "vkAllocateCommandBuffers");
  if (err != Error::Ok) return err;
  VkFenceCreateInfo fence{};
  fence.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  err = vk_error(vkCreateFence(dev, &fence, nullptr, &fence_), "vkCreateFence");
  if (err != Error::Ok) return err;
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  err = vk_error(vkBeginCommandBuffer(commands_, &begin), "vkBeginCommandBuffer");
  if (err != Error::Ok) return err;
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
  for (const Stage& s : stages_) {
    vkCmdBindPipeline(commands_, VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM, s.pipeline);
    vkCmdBindDescriptorSets(commands_, VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM, s.layout, 0,
                            static_cast<uint32_t>(s.sets.size()), s.sets.data(), 0, nullptr);
    ml_->fn.dispatch(commands_, s.session, nullptr);
    // Each segment reads what the previous one wrote; the last one's writes go to the host.
    vkCmdPipelineBarrier(commands_, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                         VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                         &barrier, 0, nullptr, 0, nullptr);
  }
  return vk_error(vkEndCommandBuffer(commands_), "vkEndCommandBuffer");
}

Error GraphProgram::copy_in(const Io& io, size_t arg, Span<EValue*> args) {
  TensorArg t;
  Error err = tensor_arg(kId, args, arg, &t);
  if (err != Error::Ok) return err;
  auto* dst = static_cast<uint8_t*>(tensors_[io.mrt].memory->mapped());
  const ScalarType want = scalar_type(io.vk_format);
  if (t.dtype == ScalarType::Long && want == ScalarType::Int && t.numel * 4 == io.nbytes) {
    // TOSA carries int64 values as int32 at the boundary.
    const auto* src = static_cast<const int64_t*>(t.data);
    for (size_t i = 0; i < t.numel; ++i) {
      const auto v = static_cast<int32_t>(src[i]);
      std::memcpy(dst + 4 * i, &v, 4);
    }
    return Error::Ok;
  }
  if (t.dtype == ScalarType::Float && want == ScalarType::Half && t.numel * 2 == io.nbytes) {
    const auto* src = static_cast<const float*>(t.data);
    for (size_t i = 0; i < t.numel; ++i) {
      const uint16_t v = to_half(src[i]);
      std::memcpy(dst + 2 * i, &v, 2);
    }
    return Error::Ok;
  }
  if (t.dtype != want || t.nbytes != io.nbytes) {
    ET_LOG(Error, "%s: input %zu is %s with %zu bytes; the VGF takes %s (VkFormat %d) with %zu "
                  "bytes: the delegate was compiled for other shapes or dtypes", kId, arg,
           dtype_name(t.dtype), t.nbytes, dtype_name(want), io.vk_format, io.nbytes);
    return Error::InvalidArgument;
  }
  std::memcpy(dst, t.data, io.nbytes);
  return Error::Ok;
}

Error GraphProgram::copy_out(const Io& io, size_t arg, Span<EValue*> args) {
  TensorArg t;
  Error err = tensor_arg(kId, args, arg, &t);
  if (err != Error::Ok) return err;
  const auto* src = static_cast<const uint8_t*>(tensors_[io.mrt].memory->mapped());
  const ScalarType have = scalar_type(io.vk_format);
  if (t.dtype == ScalarType::Long && have == ScalarType::Int && t.numel * 4 == io.nbytes) {
    auto* dst = static_cast<int64_t*>(t.data);
    for (size_t i = 0; i < t.numel; ++i) {
      int32_t v;
      std::memcpy(&v, src + 4 * i, 4);
      dst[i] = v;
    }
    return Error::Ok;
  }
  if (t.dtype == ScalarType::Float && have == ScalarType::Half && t.numel * 2 == io.nbytes) {
    auto* dst = static_cast<float*>(t.data);
    for (size_t i = 0; i < t.numel; ++i) {
      uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      dst[i] = from_half(v);
    }
    return Error::Ok;
  }
  if (t.dtype != have || t.nbytes != io.nbytes) {
    ET_LOG(Error, "%s: output %zu is %s with %zu bytes; the VGF writes %s (VkFormat %d) with %zu "
                  "bytes", kId, arg, dtype_name(t.dtype), t.nbytes, dtype_name(have), io.vk_format,
           io.nbytes);
    return Error::InvalidArgument;
  }
  std::memcpy(t.data, src, io.nbytes);
  return Error::Ok;
}

Error GraphProgram::run(Span<EValue*> args) {
  const size_t n_in = inputs_.size(), n_out = outputs_.size();
  if (args.size() != n_in + n_out) {
    ET_LOG(Error, "%s: the method passes %zu arguments; the VGF has %zu inputs and %zu outputs",
           kId, args.size(), n_in, n_out);
    return Error::InvalidArgument;
  }
  for (size_t i = 0; i < n_in; ++i) {
    const Error err = copy_in(inputs_[i], i, args);
    if (err != Error::Ok) return err;
  }
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &commands_;
  const VkDevice dev = ml_->device->get();
  Error err = vk_error(vkQueueSubmit(ml_->device->queue(), 1, &submit, fence_), "vkQueueSubmit");
  if (err != Error::Ok) return err;
  err = vk_error(vkWaitForFences(dev, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
  vkResetFences(dev, 1, &fence_);
  if (err != Error::Ok) return err;
  for (size_t i = 0; i < n_out; ++i) {
    err = copy_out(outputs_[i], n_in + i, args);
    if (err != Error::Ok) return err;
  }
  return Error::Ok;
}

GraphProgram::~GraphProgram() {
  if (!ml_ || !ml_->device) return;
  const VkDevice dev = ml_->device->get();
  vkDeviceWaitIdle(dev);
  if (fence_ != VK_NULL_HANDLE) vkDestroyFence(dev, fence_, nullptr);
  if (command_pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(dev, command_pool_, nullptr);
  for (Stage& s : stages_) {
    if (s.session != VK_NULL_HANDLE) ml_->fn.destroy_session(dev, s.session, nullptr);
    s.session_memory.clear();
    if (s.pipeline != VK_NULL_HANDLE) vkDestroyPipeline(dev, s.pipeline, nullptr);
    if (s.layout != VK_NULL_HANDLE) vkDestroyPipelineLayout(dev, s.layout, nullptr);
    for (VkDescriptorSetLayout l : s.set_layouts) {
      if (l != VK_NULL_HANDLE) vkDestroyDescriptorSetLayout(dev, l, nullptr);
    }
    if (s.module != VK_NULL_HANDLE) vkDestroyShaderModule(dev, s.module, nullptr);
  }
  if (pool_ != VK_NULL_HANDLE) vkDestroyDescriptorPool(dev, pool_, nullptr);
  for (Tensor& t : tensors_) {
    if (t.view != VK_NULL_HANDLE) ml_->fn.destroy_tensor_view(dev, t.view, nullptr);
    if (t.tensor != VK_NULL_HANDLE) ml_->fn.destroy_tensor(dev, t.tensor, nullptr);
    t.memory.reset();
  }
}

}  // namespace vgf
}  // namespace runtime_cpp
