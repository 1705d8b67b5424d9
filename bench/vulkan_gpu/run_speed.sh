#!/usr/bin/env bash
# On the device machine, from the repository root, with the staged folder carried (prepare_speed.py):
#   bash out/vulkan-speed/run_speed.sh
# Unpacks bundle.tar.xz into /tmp/vkspeed; writes to $OUT: speed.jsonl (ours per case, then the CUDA
# baselines), profile.csv (our per-dispatch GPU times per case), env.txt (date, GPU, driver), stderr.log,
# coopmat.txt (the device's cooperative-matrix shapes).
set -uo pipefail
C=$(cd "$(dirname "$0")" && pwd)
D=/tmp/vkspeed B=bundle.tar.xz
# shellcheck source=device_env.sh
. "$C/device_env.sh"
LOG=$O/speed.jsonl ERR=$O/stderr.log PROF=$O/profile.csv
: > "$LOG"; echo "case,dispatch,shader,name,calls,mean_us" > "$PROF"
(cd "$D" && python3 speed_cuda.py gemm-ref "$D" 2>>"$ERR")
# the device's cooperative-matrix shapes and whether it has VK_NV_cooperative_matrix2 (device.cpp)
VKDG_LOG_COOPMAT=1 "$D/vkdg_runner" "$D/gemm4096_fp16.pte" 4096 4096 --runs 1 --lib "$D/libvulkan_delegate_runtime.so" \
  >/dev/null 2>"$O/coopmat.txt"
for stem in $(python3 -c "import json; print(*(c['stem'] for c in json.load(open('$D/cases.json'))))"); do
  dims=$(python3 -c "import json; print(*next(c['shape'] for c in json.load(open('$D/cases.json')) if c['stem'] == '$stem'))")
  inp=(); [ -f "$D/$stem.in.f32" ] && inp=(--input "$D/$stem.in.f32")
  runs=200; case $stem in gemm*) runs=20;; check*) runs=5;; *_b32_*) runs=40;; esac  # check*: a kernel's numerics (max_rel_err)
  "$D/vkdg_runner" "$D/$stem.pte" $dims --runs $runs --lib "$D/libvulkan_delegate_runtime.so" "${inp[@]}" \
    --ref "$D/$stem.ref.f32" 2>>"$ERR" | sed "s/^{/{\"engine\": \"vkdg\", \"model\": \"$stem\", /" | tee -a "$LOG"
  VKDG_PROFILE=/tmp/prof.csv "$D/vkdg_runner" "$D/$stem.pte" $dims --runs 10 --lib "$D/libvulkan_delegate_runtime.so" \
    "${inp[@]}" >/dev/null 2>>"$ERR"
  tail -n +2 /tmp/prof.csv | sed "s/^/$stem,/" >> "$PROF"
  case $stem in gemm*)  # the GEMM dispatch alone (timestamps), as TFLOP/s; fp16 also without coopmat2 (the A/B)
    for c2 in 1 0; do
      [ $c2 = 0 ] && { case $stem in *fp16) ;; *) continue;; esac
        VKDG_COOPMAT2=0 VKDG_PROFILE=/tmp/prof.csv "$D/vkdg_runner" "$D/$stem.pte" $dims --runs 10 \
          --lib "$D/libvulkan_delegate_runtime.so" "${inp[@]}" >/dev/null 2>>"$ERR"; }
      python3 -c "import csv, json, sys; n = int(sys.argv[2]); us = max(float(r['mean_us']) for r in csv.DictReader(open(sys.argv[1])))
shader = max(csv.DictReader(open(sys.argv[1])), key=lambda r: float(r['mean_us']))['shader']
print(json.dumps({'engine': 'vkdg kernel' + ('' if sys.argv[4] == '1' else ' VKDG_COOPMAT2=0'), 'model': sys.argv[3],
                  'shader': shader, 'kernel_us': us, 'tflops': 2 * n**3 / (us * 1e-6) / 1e12}))" \
        /tmp/prof.csv ${dims%% *} "$stem" $c2 | tee -a "$LOG"
    done;;
  esac
  case $stem in check*fp16)  # the kernel times on the generic fp16 tiles too
    VKDG_COOPMAT=0 VKDG_PROFILE=/tmp/prof.csv "$D/vkdg_runner" "$D/$stem.pte" $dims --runs 10 \
      --lib "$D/libvulkan_delegate_runtime.so" >/dev/null 2>>"$ERR"
    tail -n +2 /tmp/prof.csv | sed "s/^/$stem VKDG_COOPMAT=0,/" >> "$PROF";;
  esac
  case $stem in *_b32_*) ;; *fp16)  # the same .pte on the generic fp16 tiles (no cooperative matrices): the A/B
    VKDG_COOPMAT=0 "$D/vkdg_runner" "$D/$stem.pte" $dims --runs $runs --lib "$D/libvulkan_delegate_runtime.so" \
      "${inp[@]}" --ref "$D/$stem.ref.f32" 2>>"$ERR" \
      | sed "s/^{/{\"engine\": \"vkdg VKDG_COOPMAT=0\", \"model\": \"$stem\", /" | tee -a "$LOG";;
  esac
done
(cd "$D" && PYTHONUNBUFFERED=1 python3 speed_cuda.py time "$D" 2>>"$ERR") | tee -a "$LOG"
# the compiled-CUDA reference: torch.compile(mode="max-autotune") of COMPILED_CASES (default: the b1 models and the
# Llama block), each in its own process, its compile and timing capped at COMPILE_CAP_S seconds
COMPILE_CAP_S=${COMPILE_CAP_S:-60}
for stem in ${COMPILED_CASES:-resnet18_b1_fp32 mobilenet_v2_b1_fp32 llama_block128_fp32 llama_block128_fp16}; do
  (cd "$D" && PYTHONUNBUFFERED=1 timeout "$COMPILE_CAP_S" python3 speed_cuda.py compiled "$D" "$stem" 2>>"$ERR") \
    | tee -a "$LOG" | grep -q . \
    || echo "{\"engine\": \"torch.compile max-autotune\", \"model\": \"$stem\", \"error\": \"no result within the ${COMPILE_CAP_S} s cap (or failed: stderr.log)\"}" | tee -a "$LOG"
done
