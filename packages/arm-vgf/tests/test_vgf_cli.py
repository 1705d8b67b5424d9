"""`arm-compile mobilenet_v2 --target vgf`: the VGF target registered through the entry points writes
a VGF .pte and the extracted .vgf beside it; the .pte runs on Vulkan (runtime_cpp's VgfBackend on
lavapipe or a GPU) and matches eager PyTorch."""

import json
import math

import torch

from arm_tosa_core.compile_cli import main
from arm_tosa_core.compile_inputs import load_model
from arm_tosa_core.pte_delegates import list_delegates
from arm_vgf import read_vgf, run_vgf_on_vulkan

REL_TOL = 1e-4  # max |pte - eager| / max |eager|: fp32 on the GPU (measured 1.8e-5 on lavapipe)


def test_arm_compile_vgf_writes_a_pte_that_runs_on_vulkan(tmp_path, capsys):
    pte = tmp_path / "mv2.pte"
    status = main(["mobilenet_v2", "--input-size", "32", "--target", "vgf", "-o", str(pte), "--no-verify"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "skipped: vgf runs float" in err and "VgfBackend" in out
    assert {d.backend_id for d in list_delegates(pte.read_bytes())} == {"VgfBackend"}
    extracted = tmp_path / "mv2_0.vgf"
    assert f"extracted {extracted}" in err
    assert read_vgf(extracted.read_bytes()).modules  # a VGF file the ML SDK decoder reads
    model = load_model("mobilenet_v2", input_size=32, seed=0)  # what the CLI compiled
    with torch.no_grad():
        expected = model.module(*model.example_inputs)
    actual = run_vgf_on_vulkan(pte, *model.example_inputs)
    error = ((actual - expected).abs().max() / expected.abs().max()).item()
    assert math.isfinite(error) and error <= REL_TOL, error


def test_vgf_int8_target_and_foreign_options(tmp_path, capsys):
    # an Ethos-U option with a VGF target is refused, naming the option and its family
    status = main(["mobilenet_v2", "--target", "vgf-int8", "--sram-limit", "1000", "-o", str(tmp_path / "x.pte")])
    err = capsys.readouterr().err
    assert status == 1 and "--sram-limit (Ethos-U (vela)) does not apply to target 'vgf-int8'" in err
    assert not (tmp_path / "x.pte").exists()


TINY = '''
import torch
from torch import nn


def make_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 4, 1))
    return model.eval(), (torch.randn(1, 3, 16, 16),)
'''


def test_vgf_int8_accuracy_report_runs_the_pte_on_vulkan(tmp_path, capsys):
    (tmp_path / "tiny.py").write_text(TINY)
    status = main([f"{tmp_path / 'tiny.py'}:make_model", "--target", "vgf-int8", "-o", str(tmp_path / "t.pte"),
                   "--accuracy-report", "--calibration-samples", "3"])
    out = capsys.readouterr().out
    assert status == 0
    # the int8 VGF on Vulkan computes exactly what the quantized model does
    assert "max abs error vs the quantized PyTorch model: 0 " in out
    data = json.loads((tmp_path / "t_report" / "accuracy.json").read_text())
    db = data["output_db"]
    assert math.isfinite(db["target"]) and abs(db["target"] - db["fake_quant"]) < 1.0, db
    assert abs(db["tosa_reference"] - db["fake_quant"]) < 1.0, db  # the lowered TOSA graphs
