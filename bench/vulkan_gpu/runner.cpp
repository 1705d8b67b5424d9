// Times a .pte through the ExecuTorch runtime (libexecutorch.so) with the Vulkan compute delegate
// (libvulkan_delegate_runtime.so, loaded with dlopen, registered by its runtime_cpp_register_vulkan_delegate()),
// or with ET-VK (--lib libetvk.so, which registers itself when loaded): no torch needed.
//   vkdg_runner model.pte N C H W [--runs 200] [--lib path] [--input x.bin] [--ref y.bin] [--kernels dir]
// Input dims: any rank, given as numbers. --input: raw float32 input (else a fixed pattern); --ref: raw
// float32 expected output, reported as max|y-ref|/max|ref| ("max_rel_err").
// The wheel's CPU kernel libraries (libexecutorch_kernels_*.so, from --kernels or else the runner's own
// folder) are loaded first, so a partly delegated program runs its CPU nodes ("Missing operator" without).
// After timing, the input is changed (x -> 0.5 x + 0.25) and the output must change too
// ("changed_input_changes_output"): a runtime that returned a stale result fails the row (exit 3).
// With VKDG_PROFILE=<csv> set, the delegate writes its per-dispatch GPU times there (vulkan_delegate.profile).
// Prints one JSON line: median/min/mean milliseconds per call, input upload and output readback included.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include <executorch/extension/module/module.h>
#include <executorch/runtime/core/portable_type/tensor_impl.h>

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::aten::TensorImpl;
using executorch::extension::module::Module;
using executorch::runtime::EValue;

#include "runner_common.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s model.pte dims... [--runs N] [--lib path]\n", argv[0]);
    return 2;
  }
  std::vector<TensorImpl::SizesType> sizes;
  int runs = 200, warmup = 20;
  std::string lib = "libvulkan_delegate_runtime.so", input_path, ref_path, kernels = own_dir();
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (a == "--lib" && i + 1 < argc) lib = argv[++i];
    else if (a == "--input" && i + 1 < argc) input_path = argv[++i];
    else if (a == "--ref" && i + 1 < argc) ref_path = argv[++i];
    else if (a == "--kernels" && i + 1 < argc) kernels = argv[++i];
    else sizes.push_back(std::atoi(argv[i]));
  }
  const int cpu_libs = load_cpu_kernels(kernels);
  if (!load_backend(lib)) return 1;
  Module module(argv[1]);
  if (module.load_method("forward") != executorch::runtime::Error::Ok) {
    std::fprintf(stderr, "load_method(forward) failed\n");
    return 1;
  }
  size_t n = 1;
  for (auto s : sizes) n *= s;
  std::vector<float> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.0f - 1.0f;
  if (!input_path.empty()) {
    data = read_floats(input_path);
    if (data.size() != n) {
      std::fprintf(stderr, "%s: expected %zu float32 values, read %zu\n", input_path.c_str(), n, data.size());
      return 1;
    }
  }
  std::vector<float> ref;
  if (!ref_path.empty() && (ref = read_floats(ref_path)).empty()) {
    std::fprintf(stderr, "cannot read float32 reference %s\n", ref_path.c_str());
    return 1;
  }
  double max_err = -1;  // stays -1 without --ref
  std::vector<TensorImpl::DimOrderType> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<TensorImpl::StridesType> strides(sizes.size());
  for (int d = static_cast<int>(sizes.size()) - 1, acc = 1; d >= 0; --d) {
    strides[d] = acc;
    acc *= sizes[d];
  }
  TensorImpl impl(ScalarType::Float, static_cast<ssize_t>(sizes.size()), sizes.data(), data.data(), order.data(),
                  strides.data());
  std::vector<EValue> inputs = {EValue(Tensor(&impl))};
  std::vector<double> ms;
  std::vector<float> first;
  double checksum = 0;
  for (int i = 0; i < warmup + runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto out = module.execute("forward", inputs);
    auto t1 = std::chrono::steady_clock::now();
    if (!out.ok()) {
      std::fprintf(stderr, "execute failed (error %d)\n", static_cast<int>(out.error()));
      return 1;
    }
    if (i == 0) {
      const Tensor& y = out.get()[0].toTensor();
      const float* yp = y.const_data_ptr<float>();
      for (ssize_t j = 0; j < y.numel(); ++j) checksum += yp[j];
      first.assign(yp, yp + y.numel());
      if (!ref.empty()) {
        if (static_cast<size_t>(y.numel()) != ref.size()) {
          std::fprintf(stderr, "output has %zd values, reference %zu\n", static_cast<ssize_t>(y.numel()), ref.size());
          return 1;
        }
        double err = 0, scale = 0;
        for (size_t j = 0; j < ref.size(); ++j) {
          err = std::max(err, static_cast<double>(std::fabs(yp[j] - ref[j])));
          scale = std::max(scale, static_cast<double>(std::fabs(ref[j])));
        }
        max_err = scale > 0 ? err / scale : err;
      }
    }
    if (i >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  for (auto& v : data) v = 0.5f * v + 0.25f;  // same buffer the TensorImpl points at
  auto changed = module.execute("forward", inputs);
  if (!changed.ok()) {
    std::fprintf(stderr, "execute with the changed input failed (error %d)\n", static_cast<int>(changed.error()));
    return 1;
  }
  const Tensor& y2 = changed.get()[0].toTensor();
  bool differs = static_cast<size_t>(y2.numel()) != first.size();
  for (ssize_t j = 0; !differs && j < y2.numel(); ++j) differs = y2.const_data_ptr<float>()[j] != first[j];
  std::sort(ms.begin(), ms.end());
  double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / ms.size();
  std::printf("{\"pte\": \"%s\", \"runs\": %d, \"median_ms\": %.4f, \"min_ms\": %.4f, \"mean_ms\": %.4f, "
              "\"checksum\": %.6f, \"max_rel_err\": %.3g, \"changed_input_changes_output\": %s, \"cpu_kernel_libs\": %d}\n",
              argv[1], runs, ms[ms.size() / 2], ms.front(), mean, checksum, max_err, differs ? "true" : "false",
              cpu_libs);
  return differs ? 0 : 3;
}
