#!/usr/bin/env bash
# On the device machine, from the repository root, with the staged folder carried (prepare_gemv.py):
#   bash out/vulkan-gemv/run_gemv.sh
# For each GEMV case and kernel variant (GEMV_VARIANTS: label=ENV pairs; default the runtime's own choice,
# labelled sg, and VKDG_GEMV_SG=0, the chunk kernel linear_q_gemv everywhere), appends to $OUT/gemv.jsonl: vkdg_runner's line (median ms per
# call incl. upload/readback, max_rel_err against the eager reference, changed input changes output) and
# the GEMV dispatch's GPU time (VKDG_PROFILE, 50 calls) as GB/s of weight bytes; profile_gemv.csv.
# The same GEMV 50 times in a row: weights under the H100's 50 MB L2 stay there (L2, not DRAM, numbers).
set -uo pipefail
C=$(cd "$(dirname "$0")" && pwd)
D=/tmp/vkgemv B=gemv_bundle.tar.xz
# shellcheck source=device_env.sh
. "$C/device_env.sh"
LOG=$O/gemv.jsonl ERR=$O/stderr.log PROF=$O/profile_gemv.csv
echo "case,variant,dispatch,shader,name,calls,mean_us" > "$PROF"
for spec in ${GEMV_VARIANTS:-sg=VKDG_GEMV_SG=1 chunks=VKDG_GEMV_SG=0}; do
  label=${spec%%=*} envs=${spec#*=}
  for row in $(python3 -c "import json; print(*(f\"{c['stem']}:{c['k']}:{c['weight_bytes']}\" for c in json.load(open('$D/gemv_cases.json'))))"); do
    IFS=: read -r stem k bytes <<< "$row"
    env $envs "$D/vkdg_runner" "$D/$stem.pte" 1 "$k" --runs 200 --lib "$D/libvulkan_delegate_runtime.so" \
      --input "$D/$stem.in.f32" --ref "$D/$stem.ref.f32" 2>>"$ERR" \
      | sed "s/^{/{\"engine\": \"vkdg $label\", \"model\": \"$stem\", /" | tee -a "$LOG"
    env $envs VKDG_PROFILE=/tmp/prof.csv "$D/vkdg_runner" "$D/$stem.pte" 1 "$k" --runs 50 \
      --lib "$D/libvulkan_delegate_runtime.so" --input "$D/$stem.in.f32" >/dev/null 2>>"$ERR"
    tail -n +2 /tmp/prof.csv | sed "s/^/$stem,$label,/" >> "$PROF"
    python3 -c "import csv, json, sys; rows = [r for r in csv.DictReader(open('/tmp/prof.csv')) if r['shader'].startswith('linear_q_gemv')]
us = float(rows[0]['mean_us']); b = int(sys.argv[1])
print(json.dumps({'engine': 'vkdg kernel ' + sys.argv[3], 'model': sys.argv[2], 'shader': rows[0]['shader'], 'kernel_us': us,
                  'weight_bytes': b, 'gbps': round(b / us / 1e3, 1)}))" "$bytes" "$stem" "$label" | tee -a "$LOG"
  done
done
