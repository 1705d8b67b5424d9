#!/usr/bin/env bash
# On the device machine, from the repository root, with the staged folder carried (prepare_zoo.py):
#   bash out/vulkan-zoo/run_zoo.sh [PARTS]      PARTS: any of "vulkan cuda compile" (default "vulkan cuda")
# Unpacks bundle.tar.gz into /tmp/vkzoo; writes to $OUT: zoo.jsonl (one JSON line per engine and case:
# vkdg = ours, etvk = ExecuTorch's own Vulkan backend built from source, eager-cuda, cuda-graph,
# torch-compile), cases.json (what each side's lowering delegated, or why it failed), env.txt (date, GPU,
# driver), stderr.log. torch.compile(max-autotune) takes minutes: run "compile" as its own command
# (COMPILE_BUDGET_S, default 240: cases after that many seconds of compiling are written as skipped).
# RUNS: timed calls per Vulkan row (default 200; batch-32 rows a quarter). ROW_TIMEOUT_S: seconds per
# Vulkan row (default 120). PROFILE=1: then one more run of ours per case with VKDG_PROFILE (per-dispatch
# GPU times of 20 calls, all cases in $OUT/profile.csv).
set -uo pipefail
C=$(cd "$(dirname "$0")" && pwd)
D=/tmp/vkzoo B=bundle.tar.gz
PARTS=${1:-vulkan cuda}
# a later command on the same machine ("compile") reuses the unpacked bundle
REUSE=1
# shellcheck source=device_env.sh
. "$C/device_env.sh"
LOG=$O/zoo.jsonl ERR=$O/stderr.log
touch "$LOG"
cp "$D/cases.json" "$O/"
{ echo "parts: $PARTS"; cat "$D/libetvk.missing" 2>/dev/null; } | tee -a "$O/env.txt"
if [[ " $PARTS " == *" vulkan "* ]]; then
  python3 -c "import json; [print(c['stem'], *c['shape']) for c in json.load(open('$D/cases.json'))]" |
  while read -r stem dims; do
    runs=${RUNS:-200}; case $stem in *_b32_*) runs=$(( runs / 4 ));; esac
    for side in vkdg etvk; do
      lib=$D/libvulkan_delegate_runtime.so; [ $side = etvk ] && lib=$D/libetvk.so
      [ -f "$D/$stem.$side.pte" ] || continue
      if [ ! -f "$lib" ]; then echo "{\"engine\": \"$side\", \"model\": \"$stem\", \"error\": \"no $lib\"}" >> "$LOG"; continue; fi
      echo "== $side $stem" >> "$ERR"
      row=$(timeout "${ROW_TIMEOUT_S:-120}" "$D/vkdg_runner" "$D/$stem.$side.pte" $dims --runs $runs --lib "$lib" \
        --ref "$D/$stem.ref.f32" 2>>"$ERR")
      rc=$?
      if [ -n "$row" ]; then echo "$row" | sed "s/^{/{\"engine\": \"$side\", \"model\": \"$stem\", \"rc\": $rc, /"
      else echo "{\"engine\": \"$side\", \"model\": \"$stem\", \"error\": \"runner exit $rc: $(tail -n 3 "$ERR" | tr -d '"\\' | tr '\n' ' ' | cut -c1-300)\"}"
      fi | tee -a "$LOG"
    done
    if [ "${PROFILE:-0}" = 1 ] && [ -f "$D/$stem.vkdg.pte" ]; then
      # one profile.csv for all cases (model column first): the run tool returns only 8 files per call
      VKDG_PROFILE="$D/profile.tmp.csv" timeout "${ROW_TIMEOUT_S:-120}" "$D/vkdg_runner" "$D/$stem.vkdg.pte" $dims \
        --runs 20 --lib "$D/libvulkan_delegate_runtime.so" > /dev/null 2>>"$ERR"
      [ -f "$O/profile.csv" ] || echo "model,dispatch,shader,name,calls,mean_us" > "$O/profile.csv"
      tail -n +2 "$D/profile.tmp.csv" 2>/dev/null | sed "s/^/$stem,/" >> "$O/profile.csv"
      rm -f "$D/profile.tmp.csv"
    fi
  done
fi
[[ " $PARTS " == *" cuda "* ]] && (cd "$D" && PYTHONUNBUFFERED=1 python3 zoo_cuda.py "$D" eager 2>>"$ERR") | tee -a "$LOG"
[[ " $PARTS " == *" compile "* ]] && (cd "$D" && PYTHONUNBUFFERED=1 python3 zoo_cuda.py "$D" compile 2>>"$ERR") | tee -a "$LOG"
exit 0
