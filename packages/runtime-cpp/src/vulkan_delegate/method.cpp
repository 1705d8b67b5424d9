#include "method.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/platform/log.h>

#include "barrier_plan.h"
#include "io_convert.h"
#include "opcodes.h"
#include "payload_check.h"
#include "pipeline_stats.h"
#include "shader_table.h"
#include "variant_select.h"

namespace vkdg {

using executorch::aten::ScalarType;
using executorch::aten::SizesType;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::Span;

namespace {

constexpr uint64_t kStagingAlign = 256;
constexpr uint32_t kMaxGroups = 65535;

// A failed Vulkan call: vulkan_common's Error mapping and log line, naming the call.
#define VK_TRY(call) ET_CHECK_OK_OR_RETURN_ERROR(vkc::vk_error((call), #call))

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

constexpr char kIntLinear[] = "linear_qi_";
constexpr char kIntLinearDot[] = "linear_qi_dot_";

// The integer linear (linear_qi) runs as linear_qi_dot, its OpSDot twin, where the device has the int8
// dot product, unless VKDG_INT_DOT=0 forces the int32 multiply-add variant.
bool wants_int_dot(const Program& prog) {
  const char* env = std::getenv("VKDG_INT_DOT");
  if (env && std::strcmp(env, "0") == 0) return false;
  for (const auto& name : prog.shaders)
    if (name.rfind(kIntLinear, 0) == 0) return true;
  return false;
}

void use_int_dot(Program* prog) {
  for (auto& name : prog->shaders)
    if (name.rfind(kIntLinear, 0) == 0 && name.rfind(kIntLinearDot, 0) != 0)
      name = kIntLinearDot + name.substr(sizeof(kIntLinear) - 1);
}

}  // namespace

Method::~Method() {
  if (!dev_) return;
  VkDevice d = dev_->handle();
  vkDeviceWaitIdle(d);  // buffers and the device itself are RAII members
  if (fence_) vkDestroyFence(d, fence_, nullptr);
  if (queries_) vkDestroyQueryPool(d, queries_, nullptr);
  if (cmd_pool_) vkDestroyCommandPool(d, cmd_pool_, nullptr);
  if (pool_) vkDestroyDescriptorPool(d, pool_, nullptr);
  for (auto& p : pipelines_) {
    if (p.pipeline) vkDestroyPipeline(d, p.pipeline, nullptr);
    if (p.layout) vkDestroyPipelineLayout(d, p.layout, nullptr);
    if (p.set_layout) vkDestroyDescriptorSetLayout(d, p.set_layout, nullptr);
    if (p.module) vkDestroyShaderModule(d, p.module, nullptr);
  }
}

uint64_t Method::tensor_bytes(uint32_t id, const std::vector<int64_t>& symbols) const {
  const TensorDesc& t = prog_.tensors[id];
  uint64_t n = t.dtype == kF16 ? 2 : t.dtype == kU8 ? 1 : 4;
  for (const auto& d : t.dims) n *= static_cast<uint64_t>(d.eval(symbols));
  return n;
}

Error Method::load(const uint8_t* payload, size_t size, std::unique_ptr<Method>* out) {
  auto method = std::unique_ptr<Method>(new (std::nothrow) Method());
  if (!method) return Error::MemoryAllocationFailed;
  ET_CHECK_OK_OR_RETURN_ERROR(method->init(payload, size));
  *out = std::move(method);
  return Error::Ok;
}

Error Method::init(const uint8_t* payload, size_t size) {
  Error err = parse_program(payload, size, &prog_);
  if (err != Error::Ok) return err;
  for (const auto& name : prog_.shaders)
    if (!find_shader(name)) {
      ET_LOG(Error, "VkComputeBackend: shader %s is not in this runtime; rebuild runtime-cpp", name.c_str());
      return Error::DelegateInvalidCompatibility;
    }
  ET_CHECK_OK_OR_RETURN_ERROR(check_op_codes(prog_));
  ET_CHECK_OK_OR_RETURN_ERROR(
      Device::create(prog_.uses_f16(), wants_int_dot(prog_), &dev_, runs_without_float16(prog_)));
  if (prog_.uses_f16() && !dev_->caps().fp16_math) use_math32(&prog_);
  if (dev_->caps().subgroup_arithmetic && !subgroups_disabled()) use_subgroup_twins(&prog_);
  if (!dev_->caps().subgroup_arithmetic || subgroups_disabled() || gemv_words_disabled()) use_gemv_chunks(&prog_);
  if (dev_->caps().int_dot) use_int_dot(&prog_);
  uint64_t staging = 0;
  std::vector<int64_t> max_symbols;
  for (const auto& s : prog_.symbols) max_symbols.push_back(s.max);
  for (int32_t i : prog_.inputs) {
    staging_offset_.push_back(staging);
    if (i >= 0) staging = align_up(staging + prog_.tensors[i].nbytes, kStagingAlign);
  }
  for (uint32_t o : prog_.outputs) {
    staging_offset_.push_back(staging);
    staging = align_up(staging + prog_.tensors[o].nbytes, kStagingAlign);
  }
  ET_CHECK_OK_OR_RETURN_ERROR(dev_->buffer(prog_.arena_bytes, false, &arena_));
  ET_CHECK_OK_OR_RETURN_ERROR(dev_->buffer(prog_.constants.size(), false, &consts_));
  ET_CHECK_OK_OR_RETURN_ERROR(dev_->buffer(staging, true, &staging_));
  VkCommandPoolCreateInfo cpi{};
  cpi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cpi.queueFamilyIndex = dev_->queue_family();
  VK_TRY(vkCreateCommandPool(dev_->handle(), &cpi, nullptr, &cmd_pool_));
  VkCommandBufferAllocateInfo cai{};
  cai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  cai.commandPool = cmd_pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  VK_TRY(vkAllocateCommandBuffers(dev_->handle(), &cai, &cmd_));
  VkFenceCreateInfo fci{};
  fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  VK_TRY(vkCreateFence(dev_->handle(), &fci, nullptr, &fence_));
  if ((err = create_pipelines()) != Error::Ok || (err = create_descriptors()) != Error::Ok ||
      (err = upload_constants()) != Error::Ok)
    return err;
  ET_LOG(Info, "VkComputeBackend: %s, %zu dispatches, device memory %llu bytes (arena %llu, constants %llu)",
         dev_->name().c_str(), prog_.dispatches.size(), static_cast<unsigned long long>(device_bytes()),
         static_cast<unsigned long long>(prog_.arena_bytes), static_cast<unsigned long long>(consts_->size()));
  ET_CHECK_OK_OR_RETURN_ERROR(create_profile());
  return record(max_symbols);
}

Error Method::create_profile() {
  const char* path = std::getenv("VKDG_PROFILE");
  if (!path || !*path || prog_.dispatches.empty()) return Error::Ok;
  if (!dev_->caps().timestamp_bits) {
    ET_LOG(Error, "VkComputeBackend: VKDG_PROFILE is set but %s has no timestamps on its compute queue; "
           "no profile is written", dev_->name().c_str());
    return Error::Ok;
  }
  VkQueryPoolCreateInfo qi{};
  qi.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
  qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qi.queryCount = static_cast<uint32_t>(2 * prog_.dispatches.size());
  VK_TRY(vkCreateQueryPool(dev_->handle(), &qi, nullptr, &queries_));
  profile_path_ = path;
  query_of_.assign(prog_.dispatches.size(), -1);
  profile_ns_.assign(prog_.dispatches.size(), 0.0);
  return Error::Ok;
}

// Adds this call's per-dispatch times and rewrites the CSV: dispatch, shader, name (the PyTorch module
// and op, when the payload names them), calls, mean microseconds. Several delegated partitions (or
// programs) in one process append their own blocks: each Method writes "<path>.<this pointer>" when
// the path holds "%p", else the path itself.
void Method::write_profile() {
  const size_t n = prog_.dispatches.size();
  std::vector<uint64_t> ts(2 * n, 0);
  VkResult r = vkGetQueryPoolResults(dev_->handle(), queries_, 0, static_cast<uint32_t>(2 * n),
                                     ts.size() * sizeof(uint64_t), ts.data(), sizeof(uint64_t),
                                     VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  if (r != VK_SUCCESS) return;
  const uint32_t bits = dev_->caps().timestamp_bits;
  const uint64_t mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
  for (size_t i = 0; i < n; ++i)
    if (query_of_[i] >= 0)
      profile_ns_[i] += static_cast<double>((ts[2 * i + 1] - ts[2 * i]) & mask) * dev_->caps().timestamp_period_ns;
  ++profile_calls_;
  std::string path = profile_path_;
  const size_t at = path.find("%p");
  if (at != std::string::npos) {
    char id[32];
    std::snprintf(id, sizeof(id), "%p", static_cast<void*>(this));
    path.replace(at, 2, id);
  }
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return;
  std::fprintf(f, "dispatch,shader,name,calls,mean_us\n");
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = i < prog_.dispatch_names.size() ? prog_.dispatch_names[i] : std::string();
    std::fprintf(f, "%zu,%s,\"%s\",%llu,%.3f\n", i, pipelines_[prog_.dispatches[i].shader].name, name.c_str(),
                 static_cast<unsigned long long>(profile_calls_), profile_ns_[i] / 1e3 / profile_calls_);
  }
  std::fclose(f);
}

Error Method::create_pipelines() {
  VkDevice d = dev_->handle();
  pipelines_.resize(prog_.shaders.size());
  for (size_t i = 0; i < prog_.shaders.size(); ++i) {
    const ShaderBinary* sb = select_shader(prog_.shaders[i], dev_->caps().coopmat_f16, dev_->caps().coopmat2);
    Pipeline& p = pipelines_[i];
    p.name = sb->name;
    std::memcpy(p.local, sb->local_size, sizeof(p.local));
    std::memcpy(p.tile, sb->tile, sizeof(p.tile));
    p.folds = sb->folds;
    VkShaderModuleCreateInfo smi{};
    smi.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    smi.codeSize = sb->words * 4;
    smi.pCode = sb->code;
    VK_TRY(vkCreateShaderModule(d, &smi, nullptr, &p.module));
    std::vector<VkDescriptorSetLayoutBinding> binds(sb->bindings);
    for (uint32_t b = 0; b < sb->bindings; ++b)
      binds[b] = {b, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    VkDescriptorSetLayoutCreateInfo dli{};
    dli.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
    dli.bindingCount = sb->bindings;
    dli.pBindings = binds.data();
    VK_TRY(vkCreateDescriptorSetLayout(d, &dli, nullptr, &p.set_layout));
    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kMaxPushWords * 4};
    VkPipelineLayoutCreateInfo pli{};
    pli.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
    pli.setLayoutCount = 1;
    pli.pSetLayouts = &p.set_layout;
    pli.pushConstantRangeCount = 1;
    pli.pPushConstantRanges = &range;
    VK_TRY(vkCreatePipelineLayout(d, &pli, nullptr, &p.layout));
    VkComputePipelineCreateInfo cpi{};
    cpi.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    cpi.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, nullptr, 0, VK_SHADER_STAGE_COMPUTE_BIT,
                 p.module, "main", nullptr};
    cpi.layout = p.layout;
    cpi.flags = VK_PIPELINE_CREATE_DISPATCH_BASE_BIT;  // record() splits > 65535 groups per axis
    if (dev_->caps().pipeline_stats) cpi.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
    VK_TRY(vkCreateComputePipelines(d, VK_NULL_HANDLE, 1, &cpi, nullptr, &p.pipeline));
    if (dev_->caps().pipeline_stats) log_pipeline_stats(d, p.pipeline, p.name);
  }
  return Error::Ok;
}

Error Method::create_descriptors() {
  VkDevice d = dev_->handle();
  uint32_t n = static_cast<uint32_t>(prog_.dispatches.size());
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, n * kMaxBindings + 1};
  VkDescriptorPoolCreateInfo dpi{};
  dpi.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  dpi.maxSets = n + 1;
  dpi.poolSizeCount = 1;
  dpi.pPoolSizes = &ps;
  VK_TRY(vkCreateDescriptorPool(d, &dpi, nullptr, &pool_));
  sets_.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    const DispatchDesc& dd = prog_.dispatches[i];
    const Pipeline& p = pipelines_[dd.shader];
    if (dd.bindings.size() != find_shader(prog_.shaders[dd.shader])->bindings) {
      ET_LOG(Error, "VkComputeBackend: dispatch %u binds %zu buffers, shader %s takes %u", i, dd.bindings.size(),
             prog_.shaders[dd.shader].c_str(), find_shader(prog_.shaders[dd.shader])->bindings);
      return Error::InvalidProgram;
    }
    VkDescriptorSetAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    ai.descriptorPool = pool_;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &p.set_layout;
    VK_TRY(vkAllocateDescriptorSets(d, &ai, &sets_[i]));
    std::vector<VkDescriptorBufferInfo> infos(dd.bindings.size());
    std::vector<VkWriteDescriptorSet> writes(dd.bindings.size());
    for (size_t b = 0; b < dd.bindings.size(); ++b) {
      const TensorDesc& t = prog_.tensors[dd.bindings[b]];
      if (t.nbytes > dev_->caps().max_storage_range) {  // a binding past the limit: undefined, never run
        ET_LOG(Error, "VkComputeBackend: dispatch %u (%s) binds tensor %u of %llu bytes; %s binds at most "
               "%llu bytes per storage buffer (maxStorageBufferRange). Lower the model with a smaller batch or "
               "input size, or run it on a device with a larger limit", i, prog_.shaders[dd.shader].c_str(),
               dd.bindings[b], static_cast<unsigned long long>(t.nbytes), dev_->name().c_str(),
               static_cast<unsigned long long>(dev_->caps().max_storage_range));
        return Error::NotSupported;
      }
      infos[b] = {(t.kind == kConst ? consts_ : arena_)->get(), t.offset, t.nbytes};
      writes[b] = {};
      writes[b].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[b].dstSet = sets_[i];
      writes[b].dstBinding = static_cast<uint32_t>(b);
      writes[b].descriptorCount = 1;
      writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[b].pBufferInfo = &infos[b];
    }
    vkUpdateDescriptorSets(d, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  }
  return Error::Ok;
}

Error Method::upload_constants() {
  if (prog_.constants.empty()) return Error::Ok;
  std::unique_ptr<vkc::Buffer> staging;
  ET_CHECK_OK_OR_RETURN_ERROR(dev_->buffer(prog_.constants.size(), true, &staging));
  std::memcpy(staging->mapped(), prog_.constants.data(), prog_.constants.size());
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VK_TRY(vkBeginCommandBuffer(cmd_, &bi));
  VkBufferCopy region{0, 0, prog_.constants.size()};
  vkCmdCopyBuffer(cmd_, staging->get(), consts_->get(), 1, &region);
  VK_TRY(vkEndCommandBuffer(cmd_));
  Error err = submit_and_wait();
  prog_.constants.clear();
  prog_.constants.shrink_to_fit();  // the device holds them now
  return err;
}

Error Method::record(const std::vector<int64_t>& symbols) {
  VK_TRY(vkResetCommandBuffer(cmd_, 0));
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  VK_TRY(vkBeginCommandBuffer(cmd_, &bi));
  if (queries_) {
    vkCmdResetQueryPool(cmd_, queries_, 0, static_cast<uint32_t>(2 * prog_.dispatches.size()));
    std::fill(query_of_.begin(), query_of_.end(), -1);
  }
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
  for (size_t i = 0; i < prog_.inputs.size(); ++i) {
    if (prog_.inputs[i] < 0) continue;
    const TensorDesc& t = prog_.tensors[prog_.inputs[i]];
    VkBufferCopy region{staging_offset_[i], t.offset, tensor_bytes(prog_.inputs[i], symbols)};
    if (region.size) vkCmdCopyBuffer(cmd_, staging_->get(), arena_->get(), 1, &region);
  }
  vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  uint32_t words[kMaxPushWords] = {};
  // a barrier only before a dispatch that depends on one since the last barrier (barrier_plan.h); every
  // dispatch gets one while profiling, so each timestamp pair brackets its own dispatch alone
  const std::vector<uint8_t> need = plan_barriers(prog_);
  const bool every = queries_ || all_barriers_forced();
  bool owed = false;  // a planned barrier before a dispatch with no workgroups moves to the next recorded one
  for (size_t i = 0; i < prog_.dispatches.size(); ++i) {
    const DispatchDesc& dd = prog_.dispatches[i];
    owed = owed || need[i];
    const Pipeline& p = pipelines_[dd.shader];
    std::memset(words, 0, sizeof(words));  // words a dispatch does not give read as 0
    for (size_t w = 0; w < dd.push.size(); ++w) {
      const PushValue& v = dd.push[w];
      if (v.is_float) std::memcpy(&words[w], &v.f, 4);
      else words[w] = static_cast<uint32_t>(v.e.eval(symbols));
    }
    uint64_t groups[3];
    for (int a = 0; a < 3; ++a) {
      int64_t threads = dd.threads[a].eval(symbols);
      const uint64_t per_group = static_cast<uint64_t>(p.local[a]) * p.tile[a];  // outputs per workgroup
      groups[a] = threads <= 0 ? 0 : (static_cast<uint64_t>(threads) + per_group - 1) / per_group;
    }
    for (int a = 0; a < 3; ++a) {
      if (groups[a] * p.local[a] > UINT32_MAX) {  // shaders index with 32-bit uints
        ET_LOG(Error, "VkComputeBackend: dispatch %zu (%s) needs more than 2^32 invocations along axis %d: "
                      "split the tensor", i, p.name, a);
        return Error::NotSupported;
      }
    }
    // Only shaders that index by linear_id() fold x into y: a 2-D/3-D shader reads y as its own axis
    // (a channel, a row), so a fold there would write the wrong elements.
    if (p.folds && groups[0] > kMaxGroups && groups[1] == 1 && groups[2] == 1) {
      groups[1] = (groups[0] + kMaxGroups - 1) / kMaxGroups;
      groups[0] = kMaxGroups;
    }
    if (!groups[0] || !groups[1] || !groups[2]) continue;
    if (i > 0 && (owed || every))
      vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                           &mb, 0, nullptr, 0, nullptr);
    owed = false;
    vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &sets_[i], 0, nullptr);
    vkCmdPushConstants(cmd_, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(words), words);
    if (queries_) {
      query_of_[i] = static_cast<int32_t>(2 * i);
      vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, 2 * i);
    }
    // At most kMaxGroups per axis and call (the least maxComputeWorkGroupCount): an axis with more runs as
    // several calls whose base workgroup offsets gl_WorkGroupID and gl_GlobalInvocationID, so a 2-D/3-D
    // shader sees the whole grid unchanged (it does not read gl_NumWorkGroups; linear_id() does, and
    // its folded x axis fits one call).
    for (uint64_t z = 0; z < groups[2]; z += kMaxGroups)
      for (uint64_t y = 0; y < groups[1]; y += kMaxGroups)
        for (uint64_t x = 0; x < groups[0]; x += kMaxGroups)
          vkCmdDispatchBase(cmd_, static_cast<uint32_t>(x), static_cast<uint32_t>(y), static_cast<uint32_t>(z),
                            static_cast<uint32_t>(std::min<uint64_t>(kMaxGroups, groups[0] - x)),
                            static_cast<uint32_t>(std::min<uint64_t>(kMaxGroups, groups[1] - y)),
                            static_cast<uint32_t>(std::min<uint64_t>(kMaxGroups, groups[2] - z)));
    if (queries_) vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, 2 * i + 1);
  }
  mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
  vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                       nullptr, 0, nullptr);
  for (size_t j = 0; j < prog_.outputs.size(); ++j) {
    const TensorDesc& t = prog_.tensors[prog_.outputs[j]];
    VkBufferCopy region{t.offset, staging_offset_[prog_.inputs.size() + j], tensor_bytes(prog_.outputs[j], symbols)};
    if (region.size) vkCmdCopyBuffer(cmd_, arena_->get(), staging_->get(), 1, &region);
  }
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0,
                       nullptr);
  VK_TRY(vkEndCommandBuffer(cmd_));
  recorded_for_ = symbols;
  recorded_ = true;
  return Error::Ok;
}

Error Method::submit_and_wait() {
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd_;
  VK_TRY(vkQueueSubmit(dev_->queue(), 1, &si, fence_));
  VK_TRY(vkWaitForFences(dev_->handle(), 1, &fence_, VK_TRUE, UINT64_MAX));
  VK_TRY(vkResetFences(dev_->handle(), 1, &fence_));
  return Error::Ok;
}

Error Method::run(Span<EValue*> args) {
  const size_t n_in = prog_.inputs.size(), n_out = prog_.outputs.size();
  if (args.size() != n_in + n_out) {
    ET_LOG(Error, "VkComputeBackend: %zu arguments, the payload has %zu inputs and %zu outputs", args.size(), n_in,
           n_out);
    return Error::InvalidArgument;
  }
  std::vector<int64_t> symbols(prog_.symbols.size());
  for (size_t s = 0; s < symbols.size(); ++s) {
    const SymbolDesc& sd = prog_.symbols[s];
    const auto& t = args[sd.input]->toTensor();
    if (sd.dim >= static_cast<uint32_t>(t.dim()) || t.size(sd.dim) < 1 || t.size(sd.dim) > sd.max) {
      ET_LOG(Error, "VkComputeBackend: input %u dim %u must be in [1, %u] (the bound given at export)", sd.input,
             sd.dim, sd.max);
      return Error::InvalidArgument;
    }
    symbols[s] = t.size(sd.dim);
  }
  for (size_t i = 0; i < n_in; ++i) {
    if (prog_.inputs[i] < 0) continue;
    if (!args[i]->isTensor()) return Error::InvalidArgument;
    const auto& t = args[i]->toTensor();
    const TensorDesc& td = prog_.tensors[prog_.inputs[i]];
    const ScalarType want = host_scalar_type(prog_.input_hosts[i]);
    bool ok = t.scalar_type() == want && static_cast<size_t>(t.dim()) == td.dims.size();
    for (size_t d = 0; ok && d < td.dims.size(); ++d) ok = t.size(d) == td.dims[d].eval(symbols);
    if (!ok) {
      ET_LOG(Error, "VkComputeBackend: input %zu is not a %s tensor of the exported shape", i,
             host_dtype_name(prog_.input_hosts[i]));
      return Error::InvalidArgument;
    }
    if (tensor_bytes(prog_.inputs[i], symbols) > td.nbytes) {  // a payload whose sizes disagree with its bytes
      ET_LOG(Error, "VkComputeBackend: input %zu needs %llu bytes, the payload reserves %llu", i,
             static_cast<unsigned long long>(tensor_bytes(prog_.inputs[i], symbols)),
             static_cast<unsigned long long>(td.nbytes));
      return Error::InvalidProgram;
    }
    ET_CHECK_OK_OR_RETURN_ERROR(upload(t.const_data_ptr(), t.numel(), prog_.input_hosts[i], td.dtype,
                                       static_cast<uint8_t*>(staging_->mapped()) + staging_offset_[i], i));
  }
  if (!recorded_ || symbols != recorded_for_) {
    Error err = record(symbols);
    if (err != Error::Ok) return err;
  }
  Error err = submit_and_wait();
  if (err != Error::Ok) return err;
  if (queries_) write_profile();
  for (size_t j = 0; j < n_out; ++j) {
    EValue* ev = args[n_in + j];
    if (!ev->isTensor()) return Error::InvalidArgument;
    auto& t = ev->toTensor();
    const TensorDesc& td = prog_.tensors[prog_.outputs[j]];
    SizesType sizes[6];
    for (size_t d = 0; d < td.dims.size(); ++d) sizes[d] = static_cast<SizesType>(td.dims[d].eval(symbols));
    err = executorch::runtime::resize_tensor(t, {sizes, td.dims.size()});
    if (err != Error::Ok) {
      ET_LOG(Error, "VkComputeBackend: cannot resize output %zu", j);
      return err;
    }
    if (t.scalar_type() != host_scalar_type(prog_.output_hosts[j]) ||
        tensor_bytes(prog_.outputs[j], symbols) > td.nbytes) {
      ET_LOG(Error, "VkComputeBackend: output %zu is not %s or larger than the payload reserves", j,
             host_dtype_name(prog_.output_hosts[j]));
      return Error::InvalidProgram;
    }
    readback(static_cast<uint8_t*>(staging_->mapped()) + staging_offset_[n_in + j], t.numel(), td.dtype,
             prog_.output_hosts[j], t.mutable_data_ptr());
  }
  return Error::Ok;
}

}  // namespace vkdg
