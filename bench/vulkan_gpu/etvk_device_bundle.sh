#!/usr/bin/env bash
# Bench only: packs what build_etvk.sh needs to build ET-VK on the device machine (16 cores there, against 2
# shared ones here: the ~1150 shader variants and ~130 C++ files take minutes there, an hour here):
#   bash bench/vulkan_gpu/etvk_device_bundle.sh [OUT]          # OUT default: out/etvk-device (git-ignored)
# OUT/etvk_build.tar.gz holds the ET-VK source build_etvk.sh assembled ($BUILD/src, run it here first, it
# may stop at any later step), the wheel's headers, libexecutorch.so and flatc, its flatbuffers headers,
# Debian's glslc with libshaderc, and build_etvk.sh. On the device, with OUT carried:
#   mkdir -p /tmp/etvk && tar -xzf OUT/etvk_build.tar.gz -C /tmp/etvk && bash /tmp/etvk/build.sh $OUT/libetvk.so
# then copy the returned libetvk.so to /work/etvk-build/libetvk.so for prepare_zoo.py.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-/work/etvk-build}
OUT=${1:-out/etvk-device}
ETW=$(cd "$HERE/../.." && uv run --frozen --no-sync python -c "import executorch; print(list(executorch.__path__)[0])")
T=$(mktemp -d)
mkdir -p "$T/src/backends" "$T/et/executorch/lib" "$T/et/executorch/data/bin" "$T/et/include" "$T/bin" "$OUT"
cp -r "$BUILD/src/backends/vulkan" "$T/src/backends/" && rm -rf "$T/src/backends/vulkan/test"
cp "$BUILD/src/.commit" "$T/src/"
cp -r "$ETW/include" "$T/et/executorch/" && cp "$ETW/lib/libexecutorch.so" "$T/et/executorch/lib/"
cp "$ETW/data/bin/flatc" "$T/et/executorch/data/bin/" && cp -r "$(dirname "$ETW")/include/flatbuffers" "$T/et/include/"
cp "$(command -v glslc)" /lib/x86_64-linux-gnu/libshaderc.so.1 "$T/bin/"
cp "$HERE/build_etvk.sh" "$T/"
cat > "$T/build.sh" <<'EOF'
#!/usr/bin/env bash
# device side: build libetvk.so into $1 from this unpacked bundle, all cores
D=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$D/bin:${LD_LIBRARY_PATH:-}" ETW=$D/et/executorch ET_SRC=$D/src GLSLC=$D/bin/glslc BUILD=$D/build
export JOBS=${JOBS:-$(nproc)}
bash "$D/build_etvk.sh" "$1"; rc=$?
cp "$D/build/failed_shaders.txt" "$(dirname "$1")/" 2>/dev/null
exit $rc
EOF
tar -czf "$OUT/etvk_build.tar.gz" -C "$T" .
rm -rf "$T"
ls -la "$OUT/etvk_build.tar.gz"
