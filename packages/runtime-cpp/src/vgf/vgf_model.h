// The VGF payload decoded into plain structs (ML SDK VGF library decoders, every index the file
// gives bounds-checked before use). Pointers (SPIR-V code, constant data) point into the payload,
// which must outlive the model until the pipeline is built.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <executorch/runtime/core/error.h>

namespace runtime_cpp {
namespace vgf {

using executorch::runtime::Error;

struct TensorDesc {
  int32_t vk_format = 0;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // empty: packed
  size_t element_size = 0;
  size_t nbytes = 0;
};

struct Binding {
  uint32_t set = 0;
  uint32_t binding = 0;
  uint32_t mrt = 0;  // index into Model::resources
};

struct Constant {
  uint32_t id = 0;  // the graph constant id the SPIR-V refers to
  uint32_t mrt = 0;
  const uint8_t* data = nullptr;
  size_t size = 0;
};

struct Segment {
  const uint32_t* spirv = nullptr;
  size_t spirv_words = 0;
  std::string entry_point;
  std::vector<Binding> bindings;  // every descriptor binding of the segment
  std::vector<Constant> constants;
};

struct Model {
  std::vector<TensorDesc> resources;  // the model resource table
  std::vector<Segment> segments;      // graph segments, in execution order
  std::vector<Binding> inputs;        // model sequence inputs, in delegate argument order
  std::vector<Binding> outputs;
};

// Byte size of one element of a VkFormat the model converter emits for tensors (0: unknown).
size_t format_element_size(int32_t vk_format);

// Decodes `data` (the delegate payload) into `out`; a malformed or unsupported payload is an
// Error::InvalidProgram (or NotSupported) with a log line naming the problem.
Error parse_model(const uint8_t* data, size_t size, Model* out);

}  // namespace vgf
}  // namespace runtime_cpp
