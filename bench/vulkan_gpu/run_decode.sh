#!/usr/bin/env bash
# On the device machine, from the repository root, with the staged folder carried (prepare_decode.py):
#   bash out/vulkan-decode/run_decode.sh
# Unpacks bundle.tar.xz into /tmp/vkdecode; writes to $OUT: decode.jsonl (the eager fp32 reference's tokens,
# decode_cuda.py ref; ours: vkdg_decode checked against it, then the same with per-dispatch GPU times;
# eager CUDA and CUDA graph: decode_cuda.py time), profile.csv (our per-dispatch
# GPU times of one decode-timed run), env.txt (date, GPU, driver), stderr.log.
# PEAK_GBPS: the memory bandwidth the fraction is of (default 3350, the H100 SXM's HBM3 datasheet figure).
set -uo pipefail
C=$(cd "$(dirname "$0")" && pwd)
D=/tmp/vkdecode B=bundle.tar.xz
# shellcheck source=device_env.sh
. "$C/device_env.sh"
LOG=$O/decode.jsonl ERR=$O/stderr.log
: > "$LOG"
PEAK=${PEAK_GBPS:-3350}
args=$(python3 -c "import json; m = json.load(open('$D/decode.json'))
print('--prompt', m['prompt'], '--steps', m['steps'], '--vocab', m['config']['vocab'], '--weight-bytes', m['weight_bytes_per_token'])")
cp "$D/decode.json" "$O/"
run() {  # $1: engine label; rest: extra runner options
  local label=$1; shift
  "$D/vkdg_decode" "$D/decoder.pte" $args --peak-gbps "$PEAK" --lib "$D/libvulkan_delegate_runtime.so" \
    --ref-logits "$D/ref_logits.f32" --ref-tokens "$D/ref_tokens.i64" "$@" 2>>"$ERR" \
    | sed "s/^{/{\"engine\": \"$label\", /" | tee -a "$LOG"
}
(cd "$D" && PYTHONUNBUFFERED=1 python3 decode_cuda.py "$D" ref 2>>"$ERR") | tee -a "$LOG"
run vkdg --rounds 3
VKDG_PROFILE=$O/profile.csv run "vkdg profiled" --rounds 1
(cd "$D" && PYTHONUNBUFFERED=1 python3 decode_cuda.py "$D" time --peak-gbps "$PEAK" 2>>"$ERR") | tee -a "$LOG"
