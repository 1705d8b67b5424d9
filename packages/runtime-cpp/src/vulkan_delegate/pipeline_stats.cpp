// pipeline_stats.h: the compiler statistics of a pipeline, through VK_KHR_pipeline_executable_properties.
#include "pipeline_stats.h"

#include <executorch/runtime/platform/log.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace vkdg {

bool pipeline_stats_requested() {
  const char* env = std::getenv("VKDG_PIPELINE_STATS");
  return env && std::strcmp(env, "1") == 0;
}

void log_pipeline_stats(VkDevice device, VkPipeline pipeline, const char* name) {
  auto props = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      vkGetDeviceProcAddr(device, "vkGetPipelineExecutablePropertiesKHR"));
  auto stats = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vkGetDeviceProcAddr(device, "vkGetPipelineExecutableStatisticsKHR"));
  if (!props || !stats) return;
  VkPipelineInfoKHR info{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, nullptr, pipeline};
  uint32_t executables = 0;
  if (props(device, &info, &executables, nullptr) != VK_SUCCESS) return;
  for (uint32_t e = 0; e < executables; ++e) {
    VkPipelineExecutableInfoKHR exe{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, nullptr, pipeline, e};
    uint32_t count = 0;
    if (stats(device, &exe, &count, nullptr) != VK_SUCCESS) continue;
    std::vector<VkPipelineExecutableStatisticKHR> out(count);
    for (auto& s : out) s.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
    if (stats(device, &exe, &count, out.data()) != VK_SUCCESS) continue;
    for (const auto& s : out) {
      switch (s.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
          ET_LOG(Info, "VkComputeBackend stats %s: %s = %u", name, s.name, s.value.b32);
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
          ET_LOG(Info, "VkComputeBackend stats %s: %s = %lld", name, s.name, static_cast<long long>(s.value.i64));
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
          ET_LOG(Info, "VkComputeBackend stats %s: %s = %llu", name, s.name,
                 static_cast<unsigned long long>(s.value.u64));
          break;
        default:
          ET_LOG(Info, "VkComputeBackend stats %s: %s = %g", name, s.name, s.value.f64);
      }
    }
  }
}

}  // namespace vkdg
