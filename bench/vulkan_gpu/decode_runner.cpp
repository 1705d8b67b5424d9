// Times the KV-cache decoder (vulkan_delegate.kv_decoder: methods `prefill` and `decode` sharing their
// cache buffers) through the ExecuTorch runtime with a Vulkan backend library, no torch needed:
//   vkdg_decode model.pte --prompt P --steps S --vocab V --weight-bytes B [--rounds R] [--peak-gbps G]
//                         [--lib path] [--ref-logits f32] [--ref-tokens i64] [--kernels dir]
// Each round: prefill the fixed prompt (token i = (7 i + 3) % V), then S greedy decode steps (each feeds
// back the argmax of the last logits; the cache mutates through the runtime). Every decode call is
// timed (input upload, logits readback and the cache write-back included). First round only: the
// prefill's last logits against --ref-logits (max|y - ref| / max|ref|) and the generated tokens against
// --ref-tokens (eager greedy decoding of the same quantized model: its first tokens, as many as it holds). Then a changed token at the same
// position must change the logits. Prints one JSON line: median ms per token, tokens/s, weight bytes
// per token and the bandwidth they imply (GB/s, and the fraction of --peak-gbps).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numeric>

#include <executorch/extension/module/module.h>
#include <executorch/runtime/core/portable_type/tensor_impl.h>

#include "runner_common.h"

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::aten::TensorImpl;
using executorch::extension::module::Module;
using executorch::runtime::EValue;

// One call's int64 inputs (tokens [1, n], input_pos [n]) as TensorImpls over owned storage.
struct StepInputs {
  std::vector<int64_t> tokens, pos;
  std::vector<TensorImpl::SizesType> tok_sizes, pos_sizes;
  std::vector<TensorImpl::DimOrderType> tok_order{0, 1}, pos_order{0};
  std::vector<TensorImpl::StridesType> tok_strides, pos_strides{1};
  TensorImpl tok_impl, pos_impl;
  StepInputs(std::vector<int64_t> t, int64_t start)
      : tokens(std::move(t)), pos(tokens.size()),
        tok_sizes{1, static_cast<TensorImpl::SizesType>(tokens.size())},
        pos_sizes{static_cast<TensorImpl::SizesType>(tokens.size())},
        tok_strides{static_cast<TensorImpl::StridesType>(tokens.size()), 1},
        tok_impl(ScalarType::Long, 2, tok_sizes.data(), tokens.data(), tok_order.data(), tok_strides.data()),
        pos_impl(ScalarType::Long, 1, pos_sizes.data(), pos.data(), pos_order.data(), pos_strides.data()) {
    std::iota(pos.begin(), pos.end(), start);
  }
  std::vector<EValue> evalues() { return {EValue(Tensor(&tok_impl)), EValue(Tensor(&pos_impl))}; }
};

// The last position's logits of one call (copied: shared arenas let the next call overwrite outputs).
static bool run_step(Module& m, const char* method, StepInputs& in, int vocab, std::vector<float>& logits) {
  auto out = m.execute(method, in.evalues());
  if (!out.ok()) {
    std::fprintf(stderr, "%s failed (error %d)\n", method, static_cast<int>(out.error()));
    return false;
  }
  const Tensor& y = out.get()[0].toTensor();
  if (y.numel() % vocab) {
    std::fprintf(stderr, "%s: %zd logits, not a multiple of vocab %d\n", method, static_cast<ssize_t>(y.numel()), vocab);
    return false;
  }
  const float* p = y.const_data_ptr<float>() + (y.numel() - vocab);
  logits.assign(p, p + vocab);
  return true;
}

static int64_t argmax(const std::vector<float>& v) {
  return std::max_element(v.begin(), v.end()) - v.begin();
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s model.pte --prompt P --steps S --vocab V --weight-bytes B ...\n", argv[0]);
    return 2;
  }
  int prompt = 8, steps = 32, vocab = 0, rounds = 3;
  double weight_bytes = 0, peak_gbps = 3350;
  std::string lib = "libvulkan_delegate_runtime.so", ref_logits_path, ref_tokens_path, kernels = own_dir();
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--prompt") prompt = std::atoi(v.c_str());
    else if (a == "--steps") steps = std::atoi(v.c_str());
    else if (a == "--vocab") vocab = std::atoi(v.c_str());
    else if (a == "--rounds") rounds = std::atoi(v.c_str());
    else if (a == "--weight-bytes") weight_bytes = std::atof(v.c_str());
    else if (a == "--peak-gbps") peak_gbps = std::atof(v.c_str());
    else if (a == "--lib") lib = v;
    else if (a == "--ref-logits") ref_logits_path = v;
    else if (a == "--ref-tokens") ref_tokens_path = v;
    else if (a == "--kernels") kernels = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (vocab <= 0 || steps <= 0 || prompt <= 0) {
    std::fprintf(stderr, "--vocab, --steps and --prompt must be positive\n");
    return 2;
  }
  load_cpu_kernels(kernels);
  if (!load_backend(lib)) return 1;
  // one set of planned buffers for both methods: the cache decode reads is the one prefill wrote
  Module module(argv[1], Module::LoadMode::File, nullptr, nullptr, nullptr, /*share_memory_arenas=*/true);
  for (const char* m : {"prefill", "decode"})
    if (module.load_method(m) != executorch::runtime::Error::Ok) {
      std::fprintf(stderr, "load_method(%s) failed\n", m);
      return 1;
    }
  std::vector<int64_t> prompt_tokens(prompt);
  for (int i = 0; i < prompt; ++i) prompt_tokens[i] = (7 * i + 3) % vocab;
  std::vector<double> ms;
  std::vector<int64_t> generated;
  std::vector<float> logits, first_prefill;
  for (int round = 0; round < rounds; ++round) {
    StepInputs pre(prompt_tokens, 0);
    if (!run_step(module, "prefill", pre, vocab, logits)) return 1;
    if (round == 0) first_prefill = logits;
    for (int s = 0; s < steps; ++s) {
      StepInputs step({argmax(logits)}, prompt + s);
      if (round == 0) generated.push_back(step.tokens[0]);
      auto t0 = std::chrono::steady_clock::now();
      if (!run_step(module, "decode", step, vocab, logits)) return 1;
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  double max_err = -1;
  if (!ref_logits_path.empty()) {
    std::vector<float> ref = read_floats(ref_logits_path);
    if (ref.size() != first_prefill.size()) {
      std::fprintf(stderr, "%s: %zu values, expected %d\n", ref_logits_path.c_str(), ref.size(), vocab);
      return 1;
    }
    double err = 0, scale = 0;
    for (size_t j = 0; j < ref.size(); ++j) {
      double d = std::fabs(static_cast<double>(first_prefill[j]) - ref[j]);
      err = std::isnan(d) ? INFINITY : std::max(err, d);
      scale = std::max(scale, static_cast<double>(std::fabs(ref[j])));
    }
    max_err = scale > 0 ? err / scale : err;
  }
  int matching = -1, compared = 0;  // leading generated tokens equal to the reference's (-1: no reference)
  if (!ref_tokens_path.empty()) {  // the reference's first tokens (as many as the file holds, up to steps)
    std::ifstream f(ref_tokens_path, std::ios::binary | std::ios::ate);
    const std::streamsize bytes = f ? static_cast<std::streamsize>(f.tellg()) : 0;
    std::vector<int64_t> ref(std::min<size_t>(static_cast<size_t>(bytes) / sizeof(int64_t), generated.size()));
    f.seekg(0);
    f.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size() * sizeof(int64_t)));
    if (!f || ref.empty()) {
      std::fprintf(stderr, "cannot read int64 tokens from %s\n", ref_tokens_path.c_str());
      return 1;
    }
    compared = static_cast<int>(ref.size());
    for (matching = 0; matching < compared && ref[matching] == generated[matching]; ++matching) {}
  }
  // a changed token at the same position (same cache prefix: decode overwrites its own row) must change the logits
  std::vector<float> a, b;
  StepInputs pre(prompt_tokens, 0), t1({3}, prompt), t2({4 % vocab}, prompt);
  if (!run_step(module, "prefill", pre, vocab, a) || !run_step(module, "decode", t1, vocab, a) ||
      !run_step(module, "decode", t2, vocab, b))
    return 1;
  const bool differs = a != b;
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2], gbps = weight_bytes / (median * 1e-3) / 1e9;
  std::printf("{\"pte\": \"%s\", \"prompt\": %d, \"steps\": %d, \"rounds\": %d, \"median_ms_per_token\": %.4f, "
              "\"min_ms\": %.4f, \"tokens_per_s\": %.1f, \"weight_bytes_per_token\": %.0f, \"weight_gbps\": %.1f, "
              "\"peak_gbps\": %.0f, \"bandwidth_fraction\": %.4f, \"prefill_max_rel_err\": %.3g, "
              "\"tokens_matching_eager\": %d, \"tokens_compared\": %d, \"changed_token_changes_logits\": %s}\n",
              argv[1], prompt, steps, rounds, median, ms.front(), 1000.0 / median, weight_bytes, gbps, peak_gbps,
              gbps / peak_gbps, max_err, matching, compared, differs ? "true" : "false");
  return differs ? 0 : 3;
}
