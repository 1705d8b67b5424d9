#!/usr/bin/env bash
# Bench only: builds ExecuTorch's own Vulkan backend (ET-VK, the competitor) from source into one shared
# library, libetvk.so, against the pip executorch wheel of this workspace (its headers and libexecutorch.so),
# so vkdg_runner can dlopen it (`--lib libetvk.so`: ET-VK registers "VulkanBackend" by a static initializer).
# Never a product dependency: nothing under packages/ uses it.
#
#   bash bench/vulkan_gpu/build_etvk.sh [OUT_SO]          # default OUT_SO: $BUILD/libetvk.so
#
# ET_SRC: an executorch checkout with the submodules backends/vulkan/third-party/{Vulkan-Headers,volk,
#   VulkanMemoryAllocator} (`git submodule update --init <those three>`). Unset: it is assembled under
#   $BUILD/src from the local mirrors that the `fetch` tool leaves in /work/.mirror (ET_COMMIT, default main
#   cff6f4dd32 of 2026-08-22: the wheel 1.5.1 was built from 3b60683, which no mirror has; the two have the
#   same serialization/schema.fbs and vulkan_preprocess.py).
# BUILD: build folder, outside the repository (default /work/etvk-build), kept between runs: the shader
#   cache and the object files make a rebuild incremental. JOBS: parallel compiles (default 2).
# ETW, GLSLC: the wheel's executorch folder and the glslc to use (defaults: this workspace's wheel, glslc
#   on PATH); set them to build elsewhere, e.g. on the device machine from etvk_device_bundle.sh's bundle.
#
# Shaders are compiled by Debian's glslc (shaderc 2023.2). The few it rejects (GL_EXT_integer_dot_product,
# cooperative matrices: quantized-linear variants) are left out and listed in $BUILD/failed_shaders.txt; an
# ET-VK op that needs one fails at run time with ET-VK's own "could not find ShaderInfo" error.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-/work/etvk-build}
JOBS=${JOBS:-2}
OUT_SO=${1:-$BUILD/libetvk.so}
ET_COMMIT=${ET_COMMIT:-cff6f4dd32}
PY=${PYTHON:-python3}
GLSLC=${GLSLC:-glslc}
# the wheel's executorch folder (include/, lib/, data/bin/flatc; flatbuffers headers in ../include)
ETW=${ETW:-$(cd "$HERE/../.." && uv run --frozen --no-sync python -c "import executorch; print(list(executorch.__path__)[0])")}
mkdir -p "$BUILD"

if [ -z "${ET_SRC:-}" ]; then
  ET_SRC=$BUILD/src
  if [ ! -f "$ET_SRC/.commit" ] || [ "$(cat "$ET_SRC/.commit")" != "$ET_COMMIT" ]; then
    M=/work/.mirror
    rm -rf "$ET_SRC" && mkdir -p "$ET_SRC"
    # (the mirror lacks some unrelated large blobs, which git archive reports; backends/vulkan is whole)
    git -C "$M/pytorch+executorch/repo" archive "$ET_COMMIT" backends/vulkan 2>/dev/null | tar -x -C "$ET_SRC" || true
    [ -f "$ET_SRC/backends/vulkan/runtime/VulkanBackend.cpp" ] || { echo "no ET-VK source at $ET_COMMIT" >&2; exit 1; }
    tp=$ET_SRC/backends/vulkan/third-party
    for sub in Vulkan-Headers:KhronosGroup+Vulkan-Headers volk:zeux+volk \
               VulkanMemoryAllocator:GPUOpen-LibrariesAndSDKs+VulkanMemoryAllocator; do
      name=${sub%%:*}
      pin=$(git -C "$M/pytorch+executorch/repo" ls-tree "$ET_COMMIT" "backends/vulkan/third-party/$name" | awk '{print $3}')
      rm -rf "${tp:?}/$name" && mkdir -p "$tp/$name"
      # (the mirrors lack some large blobs no build here reads, such as vulkan_structs.hpp: archive what is there)
      git -C "$M/${sub##*:}/repo" archive "$pin" 2>/dev/null | tar -x -C "$tp/$name" 2>/dev/null || true
    done
    for f in Vulkan-Headers/include/vulkan/vulkan_core.h volk/volk.c VulkanMemoryAllocator/include/vk_mem_alloc.h; do
      [ -f "$tp/$f" ] || { echo "missing $tp/$f" >&2; exit 1; }
    done
    echo "$ET_COMMIT" > "$ET_SRC/.commit"
  fi
fi
VK=$ET_SRC/backends/vulkan
RT=$VK/runtime

# 1. GLSL templates -> SPIR-V -> spv.cpp (ET-VK's own generator; a glslc wrapper records what Debian's rejects)
SHADERS=$BUILD/shaders
mkdir -p "$SHADERS"
cat > "$BUILD/glslc_or_skip.sh" <<EOF
#!/usr/bin/env bash
out=; prev=; for a in "\$@"; do [ "\$prev" = -o ] && out=\$a; prev=\$a; done
if ! err=\$($GLSLC "\$@" 2>&1); then
  noopt=(); for a in "\$@"; do [ "\$a" = -O ] || noopt+=("\$a"); done
  if ! $GLSLC "\${noopt[@]}" >/dev/null 2>&1; then  # "compiled but failed to optimize": keep it unoptimized
    echo "\$(basename "\$out" .spv): \$(echo "\$err" | grep -m1 error)" >> "$BUILD/failed_shaders.txt"
    : > "\$out"
  fi
fi
exit 0
EOF
chmod +x "$BUILD/glslc_or_skip.sh"
if [ ! -f "$SHADERS/spv.cpp" ] || [ "$RT/gen_vulkan_spv.py" -nt "$SHADERS/spv.cpp" ]; then
  : > "$BUILD/failed_shaders.txt"
  # their generator, with genCppFiles told to leave out the empty (rejected) SPIR-V files
  (cd "$BUILD" && nice -n 10 "$PY" - "$RT" "$SHADERS" "$JOBS" <<'EOF'
import os, sys
rt, out, jobs = sys.argv[1:4]
sys.path.insert(0, rt)
import gen_vulkan_spv as g
keep = g.genCppFiles
g.genCppFiles = lambda spv, h, c: keep({s: p for s, p in spv.items() if s is None or os.path.getsize(s)}, h, c)
sys.argv = ["gen_vulkan_spv.py", "--glsl-paths", f"{rt}/graph/ops/glsl", "--output-path", out,
            "--glslc-path", os.path.abspath("glslc_or_skip.sh"), "--tmp-dir-path", f"{out}/cache",
            "--optimize", "--nthreads", jobs]
g.main(sys.argv)
EOF
  )
fi
echo "shaders left out: $(wc -l < "$BUILD/failed_shaders.txt")"

# 2. the delegate's flatbuffer schema header (the wheel's flatc is 24.3.25, its tosa-tools headers 25.x: the
#    generated version pin is dropped, the generated code only uses API both have)
SCHEMA=$BUILD/schema/executorch/backends/vulkan/serialization
mkdir -p "$SCHEMA"
"$ETW/data/bin/flatc" --cpp --cpp-std c++11 --scoped-enums -o "$SCHEMA" "$VK/serialization/schema.fbs"
sed -i '/static_assert(FLATBUFFERS_VERSION_MAJOR/,/"Non-compatible flatbuffers version included");/d' \
  "$SCHEMA/schema_generated.h"
FB_INC=$(dirname "$ETW")/include  # site-packages/include: flatbuffers headers

# 3. compile and link: the runtime's C++ (api, vk_api, graph, utils, backend), volk, the shaders
INC=$BUILD/inc
mkdir -p "$INC/executorch"
ln -sfn "$ET_SRC/backends" "$INC/executorch/backends"
FLAGS=(-std=c++17 -O2 -fPIC -fexceptions -DUSE_VULKAN_WRAPPER -DUSE_VULKAN_VOLK -DC10_USING_CUSTOM_GENERATED_MACROS
       -I"$ETW/include" -I"$ETW/include/executorch/runtime/core/portable_type/c10" -I"$INC" -I"$BUILD/schema"
       -I"$VK/third-party/Vulkan-Headers/include" -I"$VK/third-party/volk" -I"$VK/third-party/VulkanMemoryAllocator"
       -I"$VK/third-party/VulkanMemoryAllocator/include"
       -isystem "$FB_INC" -w)
OBJ=$BUILD/obj
mkdir -p "$OBJ"
mapfile -t SRCS < <(find "$RT" -name '*.cpp' -not -path '*/glsl/*' | sort)
SRCS+=("$SHADERS/spv.cpp")
compile() {  # src -> obj, skipped when the object is newer
  local src=$1 o=$OBJ/$(echo "${1#"$ET_SRC"/}" | tr / _).o
  [ "$o" -nt "$src" ] && [ "$o" -nt "$SCHEMA/schema_generated.h" ] && return 0
  nice -n 10 g++ "${FLAGS[@]}" -c "$src" -o "$o"
}
export -f compile; export OBJ ET_SRC SCHEMA; export FLAGS_STR="${FLAGS[*]}"
printf '%s\n' "${SRCS[@]}" | xargs -P "$JOBS" -I{} bash -c 'FLAGS=($FLAGS_STR); compile "$@"' _ {}
nice -n 10 gcc -O2 -fPIC -I"$VK/third-party/Vulkan-Headers/include" -c "$VK/third-party/volk/volk.c" -o "$OBJ/volk.o"
objs=()
for s in "${SRCS[@]}"; do objs+=("$OBJ/$(echo "${s#"$ET_SRC"/}" | tr / _).o"); done
g++ -shared -o "$OUT_SO" "${objs[@]}" "$OBJ/volk.o" -L"$ETW/lib" -lexecutorch -ldl -Wl,--no-undefined \
  -Wl,-rpath,'$ORIGIN'
echo "$OUT_SO"
