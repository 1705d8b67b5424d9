// The load-time checks of a payload's op codes and fused programs (moved out of method.cpp unchanged).
#include "payload_check.h"

#include <cstring>

#include <executorch/runtime/platform/log.h>

#include "opcodes.h"

namespace vkdg {

using executorch::runtime::Error;

namespace {

uint32_t op_count(const char* shader) {
  for (const OpCodeTable& table : kOpCodeTables)
    if (std::strcmp(table.shader, shader) == 0) return table.count;
  return 0;
}

bool static_word(const PushValue& v, int64_t* out) {
  if (v.is_float) return false;
  if (v.e.terms.empty()) *out = 0;
  else if (v.e.terms.size() == 1 && v.e.terms[0].symbols.empty()) *out = v.e.terms[0].coef;
  else return false;
  return true;
}

// A fused elementwise dispatch (ewise_expr, vulkan_delegate/fuse.py) carries a postfix program in its push
// words: every op code must be inside the unary/binary tables and the program must fit the shader's stack
// (4) and leave exactly one value, so a corrupt or foreign payload is refused at load, never run as NaN or
// as a read past the shader's stack.
constexpr char kFused[] = "ewise_expr_";  // kFusedProgram, kFusedMaxWords, kFusedStack: opcodes.h

Error check_fused_program(size_t index, const DispatchDesc& d) {
  auto refuse = [&](const char* why, size_t at) {
    ET_LOG(Error, "VkComputeBackend: dispatch %zu (ewise_expr) has %s at push word %zu (lower the model again "
           "with the vulkan_delegate that matches this runtime)", index, why, at);
    return Error::InvalidProgram;
  };
  int64_t len = -1;
  if (d.push.size() < kFusedProgram || !static_word(d.push[1], &len) || len < 1 ||
      len > static_cast<int64_t>(kFusedMaxWords) || kFusedProgram + len > d.push.size())
    return refuse("a program length outside 1..22 or past its push words", 1);
  const size_t end = kFusedProgram + static_cast<size_t>(len);
  size_t depth = 0;
  for (size_t at = kFusedProgram; at < end;) {
    int64_t w = 0;
    if (!static_word(d.push[at], &w) || w < 0) return refuse("a program word that is not a static code", at);
    const uint32_t kind = w & 3, nf = (w >> 4) & 3, op = static_cast<uint32_t>(w >> 8);
    if (nf > 2 || at + 1 + nf > end) return refuse("float operands past the program", at);
    for (size_t k = 1; k <= nf; ++k)
      if (!d.push[at + k].is_float) return refuse("an operand that is not a float", at + k);
    if (kind == 0 || kind == 3) {  // load an input, or an immediate
      if (kind == 3 && nf != 1) return refuse("an immediate without its value", at);
      if (++depth > kFusedStack) return refuse("a program deeper than the shader's stack", at);
    } else if (kind == 1) {
      if (depth < 1 || op >= op_count("unary")) return refuse("a unary op code outside its table or no operand", at);
    } else {
      if (depth < 2 || op >= op_count("binary")) return refuse("a binary op code outside its table or no operands", at);
      --depth;
    }
    at += 1 + nf;
  }
  if (depth != 1) return refuse("a program that does not leave exactly one value", end);
  return Error::Ok;
}

}  // namespace

// Every dispatch of a shader that picks its function by an op code (opcodes.h) gives a static code
// inside that shader's table: a payload from another op table is refused here, never run as some
// other op.
Error check_op_codes(const Program& prog) {
  for (size_t i = 0; i < prog.dispatches.size(); ++i) {
    const DispatchDesc& d = prog.dispatches[i];
    const std::string& name = prog.shaders[d.shader];
    for (const OpCodeTable& table : kOpCodeTables) {
      size_t len = std::strlen(table.shader);
      if (name.compare(0, len, table.shader) != 0 || name.size() <= len || name[len] != '_') continue;
      int64_t code = -1;
      if (d.push.size() > table.push_word && !d.push[table.push_word].is_float) {
        const Expr& e = d.push[table.push_word].e;
        if (e.terms.empty()) code = 0;
        else if (e.terms.size() == 1 && e.terms[0].symbols.empty()) code = e.terms[0].coef;
      }
      if (code < 0 || code >= static_cast<int64_t>(table.count)) {
        ET_LOG(Error, "VkComputeBackend: dispatch %zu of %s has op code %lld; this runtime knows %u %s ops "
               "(lower the model again with the vulkan_delegate that matches this runtime)",
               i, name.c_str(), static_cast<long long>(code), table.count, table.shader);
        return Error::InvalidProgram;
      }
    }
    if (name.rfind(kFused, 0) == 0) ET_CHECK_OK_OR_RETURN_ERROR(check_fused_program(i, d));
  }
  return Error::Ok;
}

}  // namespace vkdg
