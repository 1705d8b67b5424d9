#!/usr/bin/env bash
# Builds vkdg_runner (or, with a second argument, another runner: decode_runner.cpp) against the executorch
# wheel of this workspace (headers + libexecutorch.so).
set -euo pipefail
ET=$(uv run --frozen --no-sync python -c "import executorch; print(list(executorch.__path__)[0])")
OUT=${1:-build/vkdg_runner}
SRC=${2:-runner.cpp}
mkdir -p "$(dirname "$OUT")"
nice -n 10 g++ -std=c++17 -O2 -DC10_USING_CUSTOM_GENERATED_MACROS -I"$ET/include" \
  -I"$ET/include/executorch/runtime/core/portable_type/c10" \
  "$(dirname "$0")/$SRC" -o "$OUT" -L"$ET/lib" -lexecutorch -ldl -Wl,-rpath,'$ORIGIN'
echo "$OUT"
