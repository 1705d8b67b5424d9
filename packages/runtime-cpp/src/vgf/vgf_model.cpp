// VGF payload decoding: see vgf_model.h.
#include "vgf/vgf_model.h"

#include <cstring>
#include <limits>
#include <map>
#include <memory>

#include <executorch/runtime/platform/log.h>
#include <vgf/decoder.hpp>

namespace runtime_cpp {
namespace vgf {
namespace {

namespace vl = mlsdk::vgflib;
constexpr const char* kId = "VgfBackend";

struct Sections {
  std::unique_ptr<vl::ModuleTableDecoder> modules;
  std::unique_ptr<vl::ModelResourceTableDecoder> mrt;
  std::unique_ptr<vl::ModelSequenceTableDecoder> sequence;
  std::unique_ptr<vl::ConstantDecoder> constants;
};

bool section_fits(size_t size, uint64_t offset, uint64_t length) {
  return offset <= size && length <= size - offset;
}

Error decode_sections(const uint8_t* data, size_t size, Sections* s) {
  if (size < vl::HeaderSize()) {
    ET_LOG(Error, "%s: payload of %zu bytes is shorter than a VGF header (%zu): truncated payload",
           kId, size, vl::HeaderSize());
    return Error::InvalidProgram;
  }
  // "VGF1", or the older 0xF0E1D2C3 little-endian, at offset 0 (the VGF header's magic).
  static const uint8_t kMagic[4] = {'V', 'G', 'F', '1'};
  static const uint8_t kOldMagic[4] = {0xC3, 0xD2, 0xE1, 0xF0};
  if (std::memcmp(data, kMagic, 4) != 0 && std::memcmp(data, kOldMagic, 4) != 0) {
    ET_LOG(Error, "%s: payload is not a VGF file (wrong magic 0x%02x%02x%02x%02x); the delegate "
                  "must hold model-converter output", kId, data[0], data[1], data[2], data[3]);
    return Error::InvalidProgram;
  }
  auto header = vl::CreateHeaderDecoder(data, vl::HeaderSize(), size);
  if (!header || !header->IsValid()) {
    ET_LOG(Error, "%s: the VGF header is invalid: its sections lie past the end of the %zu-byte "
                  "payload (truncated payload?)", kId, size);
    return Error::InvalidProgram;
  }
  if (!header->CheckVersion()) {
    ET_LOG(Error, "%s: VGF version %u.%u.%u is not supported by the VGF library this backend was "
                  "built with: use matching ML SDK wheel versions", kId, header->GetMajor(),
           header->GetMinor(), header->GetPatch());
    return Error::NotSupported;
  }
  struct {
    const char* what;
    uint64_t offset, length;
  } const parts[] = {
      {"module table", header->GetModuleTableOffset(), header->GetModuleTableSize()},
      {"model resource table", header->GetModelResourceTableOffset(),
       header->GetModelResourceTableSize()},
      {"model sequence table", header->GetModelSequenceTableOffset(),
       header->GetModelSequenceTableSize()},
      {"constants", header->GetConstantsOffset(), header->GetConstantsSize()},
  };
  for (const auto& p : parts) {
    if (!section_fits(size, p.offset, p.length)) {
      ET_LOG(Error, "%s: VGF %s [%llu, +%llu) lies past the end of the %zu-byte payload "
                    "(truncated payload)", kId, p.what, static_cast<unsigned long long>(p.offset),
             static_cast<unsigned long long>(p.length), size);
      return Error::InvalidProgram;
    }
  }
  s->modules = vl::CreateModuleTableDecoder(data + parts[0].offset, parts[0].length);
  s->mrt = vl::CreateModelResourceTableDecoder(data + parts[1].offset, parts[1].length);
  s->sequence = vl::CreateModelSequenceTableDecoder(data + parts[2].offset, parts[2].length);
  s->constants = vl::CreateConstantDecoder(data + parts[3].offset, parts[3].length);
  const bool ok[] = {s->modules != nullptr, s->mrt != nullptr, s->sequence != nullptr,
                     s->constants != nullptr};
  for (size_t i = 0; i < 4; ++i) {
    if (!ok[i]) {
      ET_LOG(Error, "%s: corrupt VGF: the %s section does not decode", kId, parts[i].what);
      return Error::InvalidProgram;
    }
  }
  return Error::Ok;
}

Error read_resource(const vl::ModelResourceTableDecoder& mrt, uint32_t i, TensorDesc* out) {
  out->vk_format = mrt.getVkFormat(i);
  out->element_size = format_element_size(out->vk_format);
  if (out->element_size == 0) {
    ET_LOG(Error, "%s: VGF resource %u has VkFormat %d, which this backend does not handle", kId,
           i, out->vk_format);
    return Error::NotSupported;
  }
  const auto shape = mrt.getTensorShape(i);
  const auto strides = mrt.getTensorStride(i);
  out->shape.assign(shape.begin(), shape.end());
  out->strides.assign(strides.begin(), strides.end());
  size_t n = 1;
  for (const int64_t d : out->shape) {
    if (d < 0 || (d > 0 && n > std::numeric_limits<uint32_t>::max() / static_cast<size_t>(d))) {
      ET_LOG(Error, "%s: VGF resource %u has a dynamic or oversized dimension (%lld)", kId, i,
             static_cast<long long>(d));
      return Error::NotSupported;
    }
    n *= static_cast<size_t>(d);
  }
  out->nbytes = n * out->element_size;
  return Error::Ok;
}

Error read_slots(const vl::ModelSequenceTableDecoder& seq, vl::BindingSlotArrayHandle handle,
                 uint32_t set, size_t mrt_count, const char* what, std::vector<Binding>* out) {
  const size_t n = seq.getBindingsSize(handle);
  for (uint32_t i = 0; i < n; ++i) {
    Binding b{set, seq.getBindingSlotBinding(handle, i), seq.getBindingSlotMrtIndex(handle, i)};
    if (b.mrt >= mrt_count) {
      ET_LOG(Error, "%s: corrupt VGF: %s slot %u names resource %u of %zu", kId, what, i, b.mrt,
             mrt_count);
      return Error::InvalidProgram;
    }
    out->push_back(b);
  }
  return Error::Ok;
}

Error read_segment(const Sections& s, uint32_t index, Segment* out) {
  const auto& seq = *s.sequence;
  if (seq.getSegmentType(index) != vl::ModuleType::GRAPH) {
    ET_LOG(Error, "%s: VGF segment %u is a compute shader segment; only data-graph segments are "
                  "supported (report the model that produced it)", kId, index);
    return Error::NotSupported;
  }
  const uint32_t module = seq.getSegmentModuleIndex(index);
  if (module >= s.modules->size() || !s.modules->hasSPIRVCode(module)) {
    ET_LOG(Error, "%s: corrupt VGF: segment %u names module %u, which holds no SPIR-V (%zu "
                  "modules)", kId, index, module, s.modules->size());
    return Error::InvalidProgram;
  }
  const auto code = s.modules->getSPIRVModuleCode(module);
  if (code.empty()) {
    ET_LOG(Error, "%s: corrupt VGF: module %u has empty SPIR-V", kId, module);
    return Error::InvalidProgram;
  }
  out->spirv = code.data();
  out->spirv_words = code.size();
  out->entry_point = std::string(s.modules->getModuleEntryPoint(module));
  const size_t mrt_count = s.mrt->size();
  for (uint32_t d = 0; d < seq.getSegmentDescriptorSetInfosSize(index); ++d) {
    const Error err = read_slots(seq, seq.getDescriptorBindingSlotsHandle(index, d),
                                 seq.getSegmentDescriptorSetIndex(index, d), mrt_count,
                                 "descriptor", &out->bindings);
    if (err != Error::Ok) return err;
  }
  const auto handle = seq.getSegmentConstantBindingsHandle(index);
  const size_t n_constants = s.constants->size();
  for (uint32_t i = 0; i < seq.getGraphConstantBindingsSize(handle); ++i) {
    const auto binding = seq.getGraphConstantBinding(handle, i);
    if (binding.constantIndex >= n_constants) {
      ET_LOG(Error, "%s: corrupt VGF: segment %u binds constant %u of %zu", kId, index,
             binding.constantIndex, n_constants);
      return Error::InvalidProgram;
    }
    Constant c;
    c.id = binding.graphConstantId;
    c.mrt = s.constants->getConstantMrtIndex(binding.constantIndex);
    if (c.mrt >= mrt_count) {
      ET_LOG(Error, "%s: corrupt VGF: constant %u names resource %u of %zu", kId,
             binding.constantIndex, c.mrt, mrt_count);
      return Error::InvalidProgram;
    }
    if (s.constants->isSparseConstant(binding.constantIndex)) {
      ET_LOG(Error, "%s: VGF constant %u is sparse, which this backend does not handle", kId,
             binding.constantIndex);
      return Error::NotSupported;
    }
    const auto bytes = s.constants->getConstant(binding.constantIndex);
    c.data = bytes.data();
    c.size = bytes.size();
    out->constants.push_back(c);
  }
  return Error::Ok;
}

}  // namespace

size_t format_element_size(int32_t vk_format) {
  switch (vk_format) {
    case 13:          // VK_FORMAT_R8_UINT
    case 14:          // VK_FORMAT_R8_SINT
    case 1000460000:  // VK_FORMAT_R8_BOOL_ARM
    case 1000460002:  // VK_FORMAT_R8_SFLOAT_FPENCODING_FLOAT8E4M3_ARM
    case 1000460003:  // VK_FORMAT_R8_SFLOAT_FPENCODING_FLOAT8E5M2_ARM
      return 1;
    case 74:          // VK_FORMAT_R16_UINT
    case 75:          // VK_FORMAT_R16_SINT
    case 76:          // VK_FORMAT_R16_SFLOAT
    case 1000460001:  // VK_FORMAT_R16_SFLOAT_FPENCODING_BFLOAT16_ARM
      return 2;
    case 98:   // VK_FORMAT_R32_UINT
    case 99:   // VK_FORMAT_R32_SINT
    case 100:  // VK_FORMAT_R32_SFLOAT
      return 4;
    case 110:  // VK_FORMAT_R64_UINT
    case 111:  // VK_FORMAT_R64_SINT
      return 8;
    default:
      return 0;
  }
}

Error parse_model(const uint8_t* data, size_t size, Model* out) {
  if (data == nullptr) {
    ET_LOG(Error, "%s: no payload", kId);
    return Error::InvalidProgram;
  }
  Sections s;
  Error err = decode_sections(data, size, &s);
  if (err != Error::Ok) return err;
  // Only resources the sequence uses are described (constants included); others stay empty.
  out->resources.assign(s.mrt->size(), TensorDesc{});
  const auto& seq = *s.sequence;
  const size_t n_segments = seq.modelSequenceTableSize();
  if (n_segments == 0) {
    ET_LOG(Error, "%s: the VGF has no graph (its model sequence is empty): nothing to run", kId);
    return Error::InvalidProgram;
  }
  for (uint32_t i = 0; i < n_segments; ++i) {
    Segment seg;
    err = read_segment(s, i, &seg);
    if (err != Error::Ok) return err;
    out->segments.push_back(std::move(seg));
  }
  const size_t mrt_count = s.mrt->size();
  err = read_slots(seq, seq.getModelSequenceInputBindingSlotsHandle(), 0, mrt_count, "input",
                   &out->inputs);
  if (err != Error::Ok) return err;
  err = read_slots(seq, seq.getModelSequenceOutputBindingSlotsHandle(), 0, mrt_count, "output",
                   &out->outputs);
  if (err != Error::Ok) return err;
  // Which descriptor set each model I/O lives in: the first segment binding of that resource.
  std::map<uint32_t, const Binding*> by_mrt;
  for (const auto& seg : out->segments) {
    for (const auto& b : seg.bindings) by_mrt.emplace(b.mrt, &b);
  }
  for (auto* list : {&out->inputs, &out->outputs}) {
    for (auto& io : *list) {
      const auto it = by_mrt.find(io.mrt);
      if (it == by_mrt.end()) {
        ET_LOG(Error, "%s: corrupt VGF: model I/O resource %u is bound by no segment", kId,
               io.mrt);
        return Error::InvalidProgram;
      }
      io.set = it->second->set;
    }
  }
  std::vector<bool> described(mrt_count, false);
  auto describe = [&](uint32_t mrt) -> Error {
    if (described[mrt]) return Error::Ok;
    described[mrt] = true;
    return read_resource(*s.mrt, mrt, &out->resources[mrt]);
  };
  for (const auto& seg : out->segments) {
    for (const auto& b : seg.bindings) {
      if ((err = describe(b.mrt)) != Error::Ok) return err;
    }
    for (const auto& c : seg.constants) {
      if ((err = describe(c.mrt)) != Error::Ok) return err;
      if (c.size != out->resources[c.mrt].nbytes) {
        ET_LOG(Error, "%s: corrupt VGF: constant %u holds %zu bytes, its tensor needs %zu", kId,
               c.id, c.size, out->resources[c.mrt].nbytes);
        return Error::InvalidProgram;
      }
    }
  }
  return Error::Ok;
}

}  // namespace vgf
}  // namespace runtime_cpp
