#!/usr/bin/env bash
# After run_speed.sh on the device (its unpack in /tmp/vkspeed kept): every libs/*.so (the runtime with another
# coop2 block shape) on the staged fp16 GEMM cases: rows (max_rel_err) and per-dispatch times.
set -uo pipefail
C=$(cd "$(dirname "$0")" && pwd)
D=/tmp/vkspeed B=bundle.tar.xz REUSE=1
. "$C/device_env.sh" >/dev/null
for lib in "$C"/libs/*.so; do
  v=$(basename "$lib" .so)
  for stem in gemm4096_fp16 check_mm_2100x1000x2056_fp16 check_xxt_2100x1000_fp16 check_xxt_2100x300_fp16; do
    dims=$(python3 -c "import json; print(*next(c['shape'] for c in json.load(open('$D/cases.json')) if c['stem'] == '$stem'))")
    "$D/vkdg_runner" "$D/$stem.pte" $dims --runs 5 --lib "$lib" --ref "$D/$stem.ref.f32" 2>>"$O/variants_stderr.log" \
      | sed "s/^{/{\"engine\": \"vkdg $v\", \"model\": \"$stem\", /" >> "$O/variants.jsonl"
    VKDG_PROFILE=/tmp/prof.csv "$D/vkdg_runner" "$D/$stem.pte" $dims --runs 10 --lib "$lib" >/dev/null 2>>"$O/variants_stderr.log"
    tail -n +2 /tmp/prof.csv | sed "s/^/$v,$stem,/" >> "$O/variants_profile.csv"
  done
done
grep -h matmul "$O/variants_profile.csv"
