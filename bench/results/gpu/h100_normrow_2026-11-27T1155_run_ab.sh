#!/usr/bin/env bash
# vk-small device run: run_speed.sh on the staged cases (ours, profile, eager CUDA, CUDA graph), then
# ours again under VKDG_SUBGROUP=0 (the plain shared-memory twins) with its profile.
set -uo pipefail
C=$(cd "$(dirname "$0")" && pwd)
export SPEED_CASES=mobilenet_v2_b1_fp32,llama_block128_fp32,llama_block128_fp16,rmsnorm4096_r1_fp32,rmsnorm4096_r1_lanes64_fp32,rmsnorm4096_r128_fp32,rmsnorm4096_r128_lanes64_fp32
timeout 200 bash "$C/run_speed.sh"
D=/tmp/vkspeed O=${OUT:-/tmp}
echo "case,dispatch,shader,name,calls,mean_us" > "$O/profile_sg0.csv"
for stem in $(python3 -c "import json; print(*(c['stem'] for c in json.load(open('$D/cases.json'))))"); do
  dims=$(python3 -c "import json; print(*next(c['shape'] for c in json.load(open('$D/cases.json')) if c['stem'] == '$stem'))")
  inp=(); [ -f "$D/$stem.in.f32" ] && inp=(--input "$D/$stem.in.f32")
  VKDG_SUBGROUP=0 "$D/vkdg_runner" "$D/$stem.pte" $dims --runs 200 --lib "$D/libvulkan_delegate_runtime.so" "${inp[@]}" \
    --ref "$D/$stem.ref.f32" 2>>"$O/stderr.log" | sed "s/^{/{\"engine\": \"vkdg VKDG_SUBGROUP=0\", \"model\": \"$stem\", /" | tee -a "$O/speed.jsonl"
  VKDG_SUBGROUP=0 VKDG_PROFILE=/tmp/prof.csv "$D/vkdg_runner" "$D/$stem.pte" $dims --runs 10 --lib "$D/libvulkan_delegate_runtime.so" \
    "${inp[@]}" >/dev/null 2>>"$O/stderr.log"
  tail -n +2 /tmp/prof.csv | sed "s/^/$stem,/" >> "$O/profile_sg0.csv"
done
grep -h "norm_row\|reduce_row" "$O/profile.csv" "$O/profile_sg0.csv" | head -40
