#include "payload.h"

#include <cstring>

#include <executorch/runtime/platform/log.h>

namespace vkdg {
namespace {

using executorch::runtime::Error;

// Versions read (vulkan_delegate/payload.py documents each): 2 packs 4-bit linear_q weights two per
// byte and gives the bits as a push word; a version 1 payload lacks that word, read as 0 (= 8-bit).
// 3 adds int32 tensors and a host dtype per input and output (older ones: bool bytes or float32).
constexpr uint32_t kMinVersion = 1, kVersion = 3;
constexpr size_t kMaxCount = 1u << 24;  // bounds every count before anything is allocated

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool ok() const { return ok_; }
  template <typename T>
  T get() {
    T v{};
    if (!ok_ || n_ - pos_ < sizeof(T)) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint32_t count() {
    uint32_t c = get<uint32_t>();
    if (c > kMaxCount || c > n_ - pos_) ok_ = false;  // every item takes at least one byte
    return ok_ ? c : 0;
  }
  bool bytes(size_t len, const uint8_t** out) {
    if (!ok_ || n_ - pos_ < len) return ok_ = false;
    *out = p_ + pos_;
    pos_ += len;
    return true;
  }
  Expr expr(uint32_t n_symbols) {
    Expr e;
    uint32_t nt = count();
    e.terms.resize(nt);
    for (auto& t : e.terms) {
      t.coef = get<int64_t>();
      uint32_t nf = count();
      t.symbols.resize(nf);
      for (auto& s : t.symbols) {
        s = get<uint32_t>();
        if (s >= n_symbols) ok_ = false;
      }
    }
    return e;
  }

 private:
  const uint8_t* p_;
  size_t n_, pos_ = 0;
  bool ok_ = true;
};

Error fail(const char* what) {
  ET_LOG(Error, "VkComputeBackend: corrupt payload (%s)", what);
  return Error::InvalidProgram;
}

}  // namespace

int64_t Expr::eval(const std::vector<int64_t>& values) const {
  int64_t sum = 0;
  for (const auto& t : terms) {
    int64_t v = t.coef;
    for (uint32_t s : t.symbols) v *= values[s];
    sum += v;
  }
  return sum;
}

bool host_device_pair_ok(uint32_t host, uint32_t device) {
  switch (host) {
    case kHostF32: return device == kF32;
    case kHostF16: return device == kF16;
    case kHostBool: return device == kU8 || device == kI32;
    case kHostI32:
    case kHostI64: return device == kI32;
    default: return false;
  }
}

Error parse_program(const void* data, size_t size, Program* out) {
  Reader r(static_cast<const uint8_t*>(data), size);
  const uint8_t* magic = nullptr;
  if (!r.bytes(4, &magic) || std::memcmp(magic, "VKDG", 4) != 0) return fail("magic is not VKDG");
  const uint32_t version = r.get<uint32_t>();
  if (version < kMinVersion || version > kVersion) {
    ET_LOG(Error, "VkComputeBackend: payload version %u, this runtime reads versions %u..%u: re-export "
                  "with this vulkan_delegate, or rebuild runtime-cpp from the same checkout", version,
           kMinVersion, kVersion);
    return Error::InvalidProgram;
  }
  Program& p = *out;
  p.flags = r.get<uint32_t>();
  p.symbols.resize(r.count());
  for (auto& s : p.symbols) {
    s.input = r.get<uint32_t>();
    s.dim = r.get<uint32_t>();
    s.max = r.get<uint32_t>();
  }
  const uint32_t ns = static_cast<uint32_t>(p.symbols.size());
  p.shaders.resize(r.count());
  for (auto& name : p.shaders) {
    uint32_t len = r.count();
    const uint8_t* b = nullptr;
    if (!r.bytes(len, &b)) return fail("shader name");
    name.assign(reinterpret_cast<const char*>(b), len);
    for (char c : name)  // printable ASCII only: names end up in log lines (Python decodes them as UTF-8)
      if (c < 0x21 || c > 0x7e) return fail("shader name is not printable ASCII");
  }
  p.tensors.resize(r.count());
  for (auto& t : p.tensors) {
    t.dtype = r.get<uint32_t>();
    t.kind = r.get<uint32_t>();
    t.offset = r.get<uint64_t>();
    t.nbytes = r.get<uint64_t>();
    t.dims.resize(r.count());
    for (auto& d : t.dims) d = r.expr(ns);
    if (t.dtype > kI32 || t.kind > kConst || t.dims.size() > 6) return fail("tensor descriptor");
  }
  p.dispatches.resize(r.count());
  for (auto& d : p.dispatches) {
    d.shader = r.get<uint32_t>();
    d.bindings.resize(r.count());
    for (auto& b : d.bindings) b = r.get<uint32_t>();
    d.push.resize(r.count());
    for (auto& v : d.push) {
      v.is_float = r.get<uint32_t>() == 1;
      if (v.is_float) v.f = r.get<float>();
      else v.e = r.expr(ns);
    }
    for (auto& e : d.threads) e = r.expr(ns);
    if (!r.ok()) return fail("dispatch");
    if (d.shader >= p.shaders.size() || d.bindings.size() > kMaxBindings || d.push.size() > kMaxPushWords)
      return fail("dispatch shader, binding or push-constant count");
    for (uint32_t b : d.bindings)
      if (b >= p.tensors.size()) return fail("dispatch binds an unknown tensor");
  }
  p.inputs.resize(r.count());
  p.input_hosts.assign(p.inputs.size(), kHostF32);
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    int32_t& i = p.inputs[k];
    i = r.get<int32_t>();
    if (i >= static_cast<int32_t>(p.tensors.size())) return fail("input tensor id");
    if (version >= 3) p.input_hosts[k] = r.get<uint32_t>();
    else if (i >= 0 && p.tensors[i].dtype == kU8) p.input_hosts[k] = kHostBool;
  }
  p.outputs.resize(r.count());
  p.output_hosts.assign(p.outputs.size(), kHostF32);
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    p.outputs[k] = r.get<uint32_t>();
    if (p.outputs[k] >= p.tensors.size()) return fail("output tensor id");
    if (version >= 3) p.output_hosts[k] = r.get<uint32_t>();
  }
  p.arena_bytes = r.get<uint64_t>();
  uint64_t nconst = r.get<uint64_t>();
  const uint8_t* cb = nullptr;
  if (!r.ok() || nconst > size || !r.bytes(static_cast<size_t>(nconst), &cb)) return fail("constants");
  p.constants.assign(cb, cb + nconst);
  for (const auto& s : p.symbols)
    if (s.input >= p.inputs.size() || p.inputs[s.input] < 0) return fail("symbol input");
  for (const auto& t : p.tensors) {
    uint64_t limit = t.kind == kArena ? p.arena_bytes : nconst;
    if (t.offset > limit || t.nbytes > limit - t.offset) return fail("tensor outside its buffer");
  }
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    int32_t i = p.inputs[k];
    if (i >= 0 && (p.tensors[i].kind != kArena || !host_device_pair_ok(p.input_hosts[k], p.tensors[i].dtype)))
      return fail("input not an arena tensor of a dtype its host dtype converts to");
  }
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const TensorDesc& t = p.tensors[p.outputs[k]];
    if (t.kind != kArena || !host_device_pair_ok(p.output_hosts[k], t.dtype) || t.dtype == kU8)
      return fail("output not an arena tensor of a dtype its host dtype converts from");
  }
  if (!r.ok()) return fail("truncated");
  // Optional: "NAME", then one name per dispatch. Absent in older payloads; unknown trailing bytes are
  // ignored as before.
  const uint8_t* tag = nullptr;
  if (r.bytes(4, &tag) && std::memcmp(tag, "NAME", 4) == 0) {
    uint32_t n = r.count();
    if (!r.ok() || n != p.dispatches.size()) return fail("dispatch names");
    p.dispatch_names.resize(n);
    for (auto& name : p.dispatch_names) {
      uint32_t len = r.count();
      const uint8_t* b = nullptr;
      if (!r.ok() || !r.bytes(len, &b)) return fail("dispatch names");
      name.assign(reinterpret_cast<const char*>(b), len);
    }
  }
  return Error::Ok;
}

}  // namespace vkdg
