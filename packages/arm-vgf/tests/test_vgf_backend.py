"""VgfCompileSpec, VgfPartitioner and VgfBackend: settings, converter flags, and clear failures."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from torch import nn
from vgf_flow_helpers import lower_tosa, lower_vgf, payloads, relative_error

from arm_tosa_core import (
    ReferenceModelError,
    TosaCompileSpec,
    partition_report,
    run_on_reference_model,
)
from arm_tosa_core.testing import FnModule as Fn
from arm_vgf import (
    VgfCompileSpec,
    VgfConversionError,
    VgfPartitioner,
    VgfQuantizer,
    extract_vgf,
    read_vgf,
    run_vgf_on_vulkan,
)


def test_compile_spec_defaults_and_encoding():
    spec = VgfCompileSpec()
    assert str(spec.tosa_spec) == "TOSA-1.0+FP+INT+int16"
    assert VgfCompileSpec.get_output_format() == spec.get_output_format() == "vgf"
    spec = VgfCompileSpec("TOSA-1.0+INT", compiler_flags=["--type-narrowing", "full"])
    spec.dump_intermediate_artifacts_to("somewhere")
    settings = TosaCompileSpec.settings_from_list(spec.to_list())
    assert settings["tosa_spec"] == "TOSA-1.0+INT" and settings["output_format"] == "vgf"
    assert settings["compiler_flags"] == ["--type-narrowing", "full"]
    assert settings["intermediate_path"] == "somewhere" == spec.get_intermediate_path()
    assert "compiler_flags=['--type-narrowing', 'full']" in repr(spec)
    back = TosaCompileSpec.from_list(spec.to_list())  # the typed spec back, by its output format
    assert type(back) is VgfCompileSpec and back.compiler_flags == ["--type-narrowing", "full"]
    assert back.to_list() == spec.to_list() and back.get_intermediate_path() == "somewhere"
    assert all(b"somewhere" not in bytes(s.value) for s in spec.to_list())  # not stored in the .pte


def test_bad_settings_name_the_fix():
    with pytest.raises(TypeError, match=re.escape("use ['--type-narrowing', 'full']")):
        VgfCompileSpec(compiler_flags="--type-narrowing full")
    with pytest.raises(TypeError, match="must all be strings"):
        VgfCompileSpec(compiler_flags=["--type-narrowing", 16])
    with pytest.raises(ValueError, match="unknown TOSA specification"):
        VgfCompileSpec("TOSA-9+FP")
    with pytest.raises(TypeError, match=r"needs a VgfCompileSpec.*use VgfCompileSpec\(\)"):
        VgfPartitioner(TosaCompileSpec("TOSA-1.0+FP"))
    with pytest.raises(TypeError, match=r"use VgfQuantizer\(VgfCompileSpec\(\)\)"):
        VgfQuantizer(TosaCompileSpec("TOSA-1.0+INT"))


_BOOL_TO_FLOAT = Fn(lambda s, x: (x > 0).float() * x + 1)
_FLOAT_TO_BOOL = Fn(lambda s, x: torch.where(torch.floor(x).to(torch.bool), x, -x))


@pytest.mark.parametrize("module", [_BOOL_TO_FLOAT, _FLOAT_TO_BOOL], ids=["bool_to_float", "float_to_bool"])
def test_bool_float_casts_convert_and_run_on_vulkan(module):
    """TOSA 1.0 has no bool<->float CAST; the core lowers them as SELECT / NOT(EQUAL), which converts."""
    x = torch.randn(2, 8)
    edge = lower_vgf(module, (x,), VgfCompileSpec())
    assert not partition_report(edge).cpu_nodes
    err, _ = relative_error(run_vgf_on_vulkan(edge, x), module(x))
    assert err <= 1e-6


def test_converter_failure_keeps_the_tosa_and_a_reproduce_command(tmp_path):
    spec = VgfCompileSpec(compiler_flags=["--no-such-flag"]).dump_intermediate_artifacts_to(tmp_path)
    with pytest.raises(VgfConversionError) as info:
        lower_vgf(_BOOL_TO_FLOAT, (torch.randn(2, 8),), spec)
    err = info.value
    assert "SELECT x1" in str(err)  # the partition's operators are listed
    assert "DontPartition" in str(err)
    # The TOSA input is kept in the intermediate path and the reproduce command fails the same way.
    assert err.tosa_path.parent.parent == tmp_path.resolve() and err.tosa_path.is_file()
    stem = err.tosa_path.parent.name.removesuffix(".converter")
    assert (tmp_path / f"{stem}.tosa").read_bytes() == err.tosa_path.read_bytes()
    assert err.command_line in str(err)
    proc = subprocess.run(err.command, capture_output=True, text=True)
    assert proc.returncode != 0 and "--no-such-flag" in proc.stdout + proc.stderr


def test_converter_failure_without_intermediate_path_keeps_a_named_temp_dir():
    with pytest.raises(VgfConversionError) as info:
        lower_vgf(_BOOL_TO_FLOAT, (torch.randn(2, 8),), VgfCompileSpec(compiler_flags=["--no-such-flag"]))
    kept = info.value.tosa_path
    try:
        assert kept.is_file() and str(kept) in str(info.value) and "arm-vgf-" in kept.parent.name
    finally:
        shutil.rmtree(kept.parent, ignore_errors=True)


def test_bad_compiler_flag_reaches_the_converter_and_is_named():
    spec = VgfCompileSpec("TOSA-1.0+FP", compiler_flags=["--no-such-flag"])
    with pytest.raises(VgfConversionError) as info:
        lower_vgf(nn.Linear(4, 3), (torch.randn(2, 4),), spec)
    assert "Unknown argument: --no-such-flag" in info.value.converter_message
    assert "compiler_flags=['--no-such-flag']" in str(info.value)
    assert info.value.command[-1] == "--no-such-flag"
    shutil.rmtree(info.value.tosa_path.parent, ignore_errors=True)


def test_type_narrowing_flag_gives_an_fp16_vgf_that_run_on_vulkan_bridges(tmp_path):
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU6(), nn.Conv2d(8, 4, 3, padding=1)).eval()
    x = torch.randn(1, 3, 8, 8)
    spec = VgfCompileSpec("TOSA-1.0+FP", compiler_flags=["--type-narrowing", "full"])
    edge = lower_vgf(model, (x,), spec.dump_intermediate_artifacts_to(tmp_path))
    ((_, vgf),) = payloads(edge)
    vgf_model = read_vgf(vgf)
    assert [t.dtype for t in vgf_model.inputs + vgf_model.outputs] == ["float16", "float16"]
    assert {c.vk_format for c in vgf_model.constants} == {"VK_FORMAT_R16_SFLOAT"}
    with torch.no_grad():
        out, expected = run_vgf_on_vulkan(edge, x), model(x)
    assert out.dtype == torch.float32
    err, mag = relative_error(out, expected)
    assert 1e-6 < err <= 1e-2, f"fp16 VGF vs fp32 eager: {err:.3g} x max|out| {mag:.3g}"


def test_reference_model_refuses_vgf_programs_and_points_to_run_vgf_on_vulkan():
    x = torch.randn(2, 4)
    edge = lower_vgf(nn.Linear(4, 3), (x,))
    with pytest.raises(ReferenceModelError, match=r"arm_vgf\.run_vgf_on_vulkan\(program, \*inputs\)"):
        run_on_reference_model(edge, x)


def test_extract_vgf_rejects_programs_without_vgf_delegates(tmp_path):
    x = torch.randn(2, 4)
    pte = tmp_path / "tosa.pte"
    pte.write_bytes(lower_tosa(nn.Linear(4, 3), (x,), "TOSA-1.0+FP").to_executorch().buffer)
    with pytest.raises(ValueError, match="holds no VgfBackend delegate .*TOSABackend.*VgfPartitioner"):
        extract_vgf(pte, tmp_path / "out")
    not_pte = tmp_path / "model.vgf"
    not_pte.write_bytes(b"\x00" * 64)
    with pytest.raises(ValueError, match="not an ExecuTorch .pte"):
        extract_vgf(not_pte, tmp_path / "out")
    with pytest.raises(FileNotFoundError, match="no .pte file"):
        extract_vgf(tmp_path / "missing.pte", tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any(Path(tmp_path / "out").iterdir())


def test_extract_vgf_accepts_pte_bytes(tmp_path):
    x = torch.randn(2, 4)
    buffer = lower_vgf(nn.Linear(4, 3), (x,)).to_executorch().buffer
    (path,) = extract_vgf(buffer, tmp_path)
    sidecar = json.loads(path.with_suffix(".json").read_text())
    assert path.name == "program_0.vgf" and sidecar["pte"] is None
    assert sidecar["inputs"][0]["shape"] == [2, 4] and sidecar["outputs"][0]["shape"] == [2, 3]
