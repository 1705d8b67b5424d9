#!/usr/bin/env bash
# On the device machine, from the repository root, with the staged folder carried (prepare.py writes it):
#   ROUNDS=3 bash out/vulkan-gpu/run_gpu.sh   (OUT/ of prepare.py, carried)
# Unpacks bundle.tar.xz into /tmp/vkgpu and prints JSON lines per round: our delegate (vkdg_runner) per
# .pte, ncnn-Vulkan per model and precision, eager CUDA per model and precision. Also copies them to
# $OUT/gpu.jsonl (their stderr to $OUT/stderr.log, date/GPU/driver to $OUT/env.txt) when OUT is set.
set -uo pipefail
C=$(cd "$(dirname "$0")" && pwd)
D=/tmp/vkgpu B=bundle.tar.xz
# shellcheck source=device_env.sh
. "$C/device_env.sh"
export PYTHONPATH="$D/site"  # the cp312 ncnn wheel, unpacked
LOG=$O/gpu.jsonl ERR=$O/stderr.log
: > "$LOG"
python3 -c "import ncnn; n = ncnn.get_gpu_count(); print('ncnn', ncnn.__version__, 'gpus', n,
  *(ncnn.get_gpu_info(i).device_name() for i in range(n)))" 2>&1 | grep -v '^\[' | tee -a "$O/env.txt"
emit() { sed "s/^{/{\"round\": $1, /" | tee -a "$LOG"; }
for round in $(seq 1 "${ROUNDS:-3}"); do
  for pte in "$D"/*.pte; do
    stem=$(basename "$pte" .pte)
    io=${stem%_fp*}
    dims=$(python3 -c "import json,sys; print(*next(m['shape'] for m in json.load(open(sys.argv[1]))
      if m['stem'] == sys.argv[2]))" "$D/ncnn/models.json" "$io")
    "$D/vkdg_runner" "$pte" $dims --runs 200 --lib "$D/libvulkan_delegate_runtime.so" \
      --input "$D/ncnn/$io.in.f32" --ref "$D/ncnn/$io.ref.f32" 2>>"$ERR" \
      | sed "s/^{/{\"engine\": \"vkdg\", \"model\": \"$stem\", /" | emit "$round"
  done
  (cd "$D" && python3 ncnn_peer.py time "$D/ncnn" --runs 200 2>>"$ERR") | emit "$round"
  (cd "$D" && PYTHONUNBUFFERED=1 python3 eager_cuda.py "$D/ncnn" 2>>"$ERR") | emit "$round"
done
