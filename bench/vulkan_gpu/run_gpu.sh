#!/usr/bin/env bash
# On the device machine, from the repository root, with out/vulkan-gpu carried:
#   bash out/vulkan-gpu/run_gpu.sh   -> JSON lines: our delegate per .pte, then eager CUDA per model
set -uo pipefail
D=$(cd "$(dirname "$0")" && pwd)
for f in "$D"/debs/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
export LD_LIBRARY_PATH="$D:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for pte in "$D"/*.pte; do
  case "$pte" in
    *mobilenet_v2_224*) dims="1 3 224 224" ;;
    *llama_block_8_*) dims="1 8 256" ;;
    *llama_block_128_*) dims="1 128 256" ;;
  esac
  "$D/vkdg_runner" "$pte" $dims --runs 200 --lib "$D/libvulkan_delegate_runtime.so" 2>&1 | grep -v "^\[" || true
done
cd "$D" && PYTHONUNBUFFERED=1 python3 eager_cuda.py
