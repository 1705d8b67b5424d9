#include "common/tensor_io.h"

#include <executorch/runtime/platform/log.h>

namespace runtime_cpp {

Error tensor_arg(const char* backend, Span<EValue*> args, size_t index, TensorArg* out) {
  if (index >= args.size() || args[index] == nullptr) {
    ET_LOG(Error, "%s: argument %zu is missing (the method passed %zu)", backend, index, args.size());
    return Error::InvalidArgument;
  }
  if (!args[index]->isTensor()) {
    ET_LOG(Error, "%s: argument %zu is not a tensor (tag %d); delegates take tensors only", backend,
           index, static_cast<int>(args[index]->tag));
    return Error::InvalidArgument;
  }
  auto t = args[index]->toTensor();
  out->data = t.mutable_data_ptr();
  out->nbytes = t.nbytes();
  out->numel = static_cast<size_t>(t.numel());
  out->dtype = t.scalar_type();
  out->dim = static_cast<int>(t.dim());
  out->sizes = t.sizes().data();
  return Error::Ok;
}

const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: return "uint8";
    case ScalarType::Char: return "int8";
    case ScalarType::Short: return "int16";
    case ScalarType::Int: return "int32";
    case ScalarType::Long: return "int64";
    case ScalarType::Half: return "float16";
    case ScalarType::Float: return "float32";
    case ScalarType::Double: return "float64";
    case ScalarType::Bool: return "bool";
    case ScalarType::BFloat16: return "bfloat16";
    default: return "other";
  }
}

}  // namespace runtime_cpp
