// One loaded delegate partition: pipelines, descriptor sets and buffers made at init; one command
// buffer recorded for the current input sizes and re-submitted per call (re-recorded only when a
// dynamic size changes).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/span.h>

#include "device.h"
#include "payload.h"

namespace vkdg {

// The Program of runtime-cpp's ProgramBackend (common/program_backend.h).
class Method {
 public:
  ~Method();
  // Parses the payload and creates everything a call needs; Error (with a log line) on any failure.
  static executorch::runtime::Error load(const uint8_t* payload, size_t size, std::unique_ptr<Method>* out);
  executorch::runtime::Error run(executorch::runtime::Span<executorch::runtime::EValue*> args);
  uint64_t device_bytes() const { return arena_->size() + consts_->size() + staging_->size(); }

 private:
  Method() = default;
  executorch::runtime::Error init(const uint8_t* payload, size_t size);
  struct Pipeline {
    VkShaderModule module = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkPipeline pipeline = VK_NULL_HANDLE;
    uint32_t local[3] = {1, 1, 1};
    uint32_t tile[3] = {1, 1, 1};
    bool folds = false;  // ShaderBinary::folds
    const char* name = "";  // the shader it runs: select_shader's choice for the device
  };
  executorch::runtime::Error create_pipelines();
  executorch::runtime::Error create_descriptors();
  executorch::runtime::Error upload_constants();
  executorch::runtime::Error record(const std::vector<int64_t>& symbols);
  executorch::runtime::Error submit_and_wait();
  executorch::runtime::Error create_profile();
  void write_profile();
  uint64_t tensor_bytes(uint32_t id, const std::vector<int64_t>& symbols) const;

  Program prog_;
  std::unique_ptr<Device> dev_;
  std::unique_ptr<vkc::Buffer> arena_, consts_, staging_;
  std::vector<uint64_t> staging_offset_;  // per input, then per output
  std::vector<Pipeline> pipelines_;       // per payload shader name
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorSet> sets_;     // per dispatch, written once
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::vector<int64_t> recorded_for_;
  bool recorded_ = false;
  // Per-dispatch GPU time (VKDG_PROFILE=<csv path>): a timestamp before and after each dispatch; sums
  // over calls, rewritten to the CSV after each call (see write_profile).
  std::string profile_path_;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  std::vector<int32_t> query_of_;  // per dispatch: its first query, -1 when not recorded
  std::vector<double> profile_ns_;
  uint64_t profile_calls_ = 0;
};

}  // namespace vkdg
