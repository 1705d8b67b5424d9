#!/usr/bin/env bash
# On the device machine, from the repository root, with the staged folder carried (prepare_decode.py):
#   bash out/vulkan-decode/run_decode.sh
# For each staged bundle (bundle.tar.xz: the `wide3` config; bundle_<config>.tar.xz: another), unpacked into
# /tmp/vkdecode_<config>, appends to $OUT/decode.jsonl, each line tagged with the config's name: the eager
# fp32 reference's tokens (decode_cuda.py ref); ours, vkdg_decode checked against it, then the same with
# per-dispatch GPU times; eager CUDA and CUDA graph (decode_cuda.py time). Also profile_<config>.csv (our
# per-dispatch GPU times of one run), decode_<config>.json (config, weight bytes per token), env.txt (date,
# GPU, driver), stderr.log.
# A runtime library staged beside this script as variant_<label>.so (an A/B of a shader, built from
# another tree) runs ours again with it, timed and profiled (profile_<config>_<label>.csv).
# ENV_VARIANTS="label=VAR=value ..." runs ours again under each environment (an A/B of the runtime's own
# variant choice, e.g. chunks=VKDG_GEMV_SG=0), timed and profiled likewise. A runtime library staged beside this
# script as libvulkan_delegate_runtime.so (rebuilt after staging; the .pte does not depend on it) wins.
# PEAK_GBPS: the memory bandwidth the fraction is of (default 3350, the H100 SXM's HBM3 datasheet figure).
set -uo pipefail
C=$(cd "$(dirname "$0")" && pwd)
PEAK=${PEAK_GBPS:-3350}
for B in $(cd "$C" && ls bundle*.tar.xz); do
  name=${B#bundle}; name=${name#_}; name=${name%.tar.xz}; name=${name:-wide3}
  D=/tmp/vkdecode_$name
  # shellcheck source=device_env.sh
  . "$C/device_env.sh"
  LOG=$O/decode.jsonl ERR=$O/stderr.log
  tag() { sed "s/^{/{\"config\": \"$name\", /"; }
  args=$(python3 -c "import json; m = json.load(open('$D/decode.json'))
print('--prompt', m['prompt'], '--steps', m['steps'], '--vocab', m['config']['vocab'], '--weight-bytes', m['weight_bytes_per_token'])")
  cp "$D/decode.json" "$O/decode_$name.json"
  run() {  # $1: engine label; rest: extra runner options (a later --lib replaces the bundle's)
    local label=$1; shift
    "$D/vkdg_decode" "$D/decoder.pte" $args --peak-gbps "$PEAK" --lib "$D/libvulkan_delegate_runtime.so" \
      --ref-logits "$D/ref_logits.f32" --ref-tokens "$D/ref_tokens.i64" "$@" 2>>"$ERR" \
      | sed "s/^{/{\"engine\": \"$label\", /" | tag | tee -a "$LOG"
  }
  (cd "$D" && PYTHONUNBUFFERED=1 python3 decode_cuda.py "$D" ref 2>>"$ERR") | tag | tee -a "$LOG"
  run vkdg --rounds 3
  VKDG_PROFILE=$O/profile_$name.csv run "vkdg profiled" --rounds 1
  for lib in "$C"/variant_*.so; do
    [ -f "$lib" ] || continue
    v=$(basename "$lib" .so); v=${v#variant_}
    run "vkdg $v" --rounds 3 --lib "$lib"
    VKDG_PROFILE=$O/profile_${name}_$v.csv run "vkdg $v profiled" --rounds 1 --lib "$lib"
  done
  for spec in ${ENV_VARIANTS:-}; do
    v=${spec%%=*}
    (export "${spec#*=}"; run "vkdg $v" --rounds 3
     VKDG_PROFILE=$O/profile_${name}_$v.csv run "vkdg $v profiled" --rounds 1)
  done
  (cd "$D" && PYTHONUNBUFFERED=1 python3 decode_cuda.py "$D" time --peak-gbps "$PEAK" 2>>"$ERR") | tag | tee -a "$LOG"
  rm -rf "$D"
done
