// barrier_plan.h: a dependency analysis of the recorded dispatches' arena bytes.
#include "barrier_plan.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace vkdg {

namespace {
struct Range {
  uint64_t lo, hi;
};

bool overlaps(const std::vector<Range>& set, Range r) {
  for (const Range& s : set)
    if (s.lo < r.hi && r.lo < s.hi) return true;
  return false;
}
}  // namespace

std::vector<uint8_t> plan_barriers(const Program& prog) {
  std::vector<uint8_t> need(prog.dispatches.size(), 0);
  std::vector<Range> reads, writes;  // arena bytes touched since the last barrier
  for (size_t i = 0; i < prog.dispatches.size(); ++i) {
    const std::vector<uint32_t>& b = prog.dispatches[i].bindings;
    auto range = [&](uint32_t t) {
      const TensorDesc& d = prog.tensors[t];
      return Range{d.offset, d.offset + std::max<uint64_t>(d.nbytes, 1)};
    };
    bool hazard = false;
    for (size_t k = 0; k < b.size(); ++k) {
      if (prog.tensors[b[k]].kind != kArena) continue;
      Range r = range(b[k]);
      if (overlaps(writes, r) || (k + 1 == b.size() && overlaps(reads, r))) hazard = true;
    }
    if (hazard) {
      need[i] = 1;
      reads.clear();
      writes.clear();
    }
    for (size_t k = 0; k < b.size(); ++k)
      if (prog.tensors[b[k]].kind == kArena) (k + 1 == b.size() ? writes : reads).push_back(range(b[k]));
  }
  return need;
}

bool all_barriers_forced() {
  const char* env = std::getenv("VKDG_ALL_BARRIERS");
  return env && std::strcmp(env, "1") == 0;
}

}  // namespace vkdg
