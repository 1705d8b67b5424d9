// VKDG_PIPELINE_STATS=1: log each compute pipeline's compiler statistics (VK_KHR_pipeline_executable_properties:
// on NVIDIA the register count and spill/local-memory figures), to see why a GEMM variant runs slow on a
// device whose compiler this project cannot otherwise inspect. Off by default; bench-only diagnosis.
#pragma once

#include <vulkan/vulkan.h>

namespace vkdg {

// Whether VKDG_PIPELINE_STATS=1 asks for the statistics.
bool pipeline_stats_requested();

// Logs (ET_LOG Info) every statistic of every executable of `pipeline`, each line prefixed with `name`.
void log_pipeline_stats(VkDevice device, VkPipeline pipeline, const char* name);

}  // namespace vkdg
