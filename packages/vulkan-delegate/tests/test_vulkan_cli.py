"""`arm-compile mobilenet_v2 --target vulkan`: the Vulkan target registered through the entry points
writes a Vulkan-delegate .pte that runs on the Vulkan device and matches eager PyTorch."""

import math

import torch

from arm_tosa_core.compile_cli import main
from arm_tosa_core.compile_inputs import load_model
from arm_tosa_core.pte_delegates import list_delegates
from vulkan_delegate import BACKEND_ID, run_on_vulkan

REL_TOL = 1e-4  # max |pte - eager| / max |eager|: fp32 on the GPU (measured 2.7e-5 on lavapipe)


def test_arm_compile_vulkan_writes_a_pte_that_runs(tmp_path, capsys):
    pte = tmp_path / "mv2.pte"
    argv = ["mobilenet_v2", "--input-size", "32", "--target", "vulkan", "-o", str(pte), "--no-verify"]
    assert main(argv) == 0
    assert "operators (100.0 %) in 1 partition(s)" in capsys.readouterr().out
    delegates = list_delegates(pte.read_bytes())
    assert delegates and all(d.backend_id == BACKEND_ID for d in delegates)
    # the CLI's model and inputs are the seeded bundled example: rebuild them for the eager reference
    example = load_model("mobilenet_v2", input_size=32, seed=0)
    actual = run_on_vulkan(pte.read_bytes(), *example.example_inputs)
    with torch.no_grad():
        expected = example.module(*example.example_inputs)
    scale = expected.abs().max().item()
    error = (actual - expected).abs().max().item()
    assert math.isfinite(error) and error <= REL_TOL * scale, (error, scale)


def test_vulkan_target_refuses_what_does_not_apply(tmp_path, capsys):
    status = main(["mobilenet_v2", "--target", "vulkan", "--accuracy-report", "-o", str(tmp_path / "x.pte")])
    assert status == 1 and "--accuracy-report measures quantization error, and vulkan runs float" in \
        capsys.readouterr().err
