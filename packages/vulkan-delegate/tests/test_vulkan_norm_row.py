"""Wide-row layer/RMS norm (`norm_row`: a workgroup per row, shared-memory sums; the decode step's one
token of thousands of features; row_reduce.glsl) against eager PyTorch, NaN-aware, and the shader the rule picks."""

from __future__ import annotations

import csv

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from arm_tosa_core.testing import compare_outputs
from vulkan_delegate import run_on_vulkan


class RmsNorm(nn.Module):
    def __init__(self, cols: int) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.rand(cols) + 0.5, requires_grad=False)

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.w, 1e-5)


@pytest.mark.parametrize("kind,shape,shader", [
    ("rms", (1, 1, 4100), "norm_row"),  # one token, cols past a multiple of the 256 threads
    ("layer", (3, 300), "norm_row"),
    ("rms", (2, 16), "norm"),  # narrow rows (under 32) stay one thread per row
])
def test_norm_row_matches_eager(vk_lower, tmp_path, monkeypatch, kind, shape, shader):
    torch.manual_seed(shape[-1])
    model = (RmsNorm(shape[-1]) if kind == "rms" else nn.LayerNorm(shape[-1])).eval()
    x = torch.randn(*shape) * 3 + 1
    pte = vk_lower(model, (x,)).to_executorch().buffer
    profile = tmp_path / "profile.csv"
    monkeypatch.setenv("VKDG_PROFILE", str(profile))
    y = run_on_vulkan(pte, x)
    kernels = [row["shader"].rsplit("_", 1)[0] for row in csv.DictReader(profile.open())]
    assert kernels[0] == shader and {"norm", "norm_row"} - {shader} & set(kernels) == set(), kernels
    c = compare_outputs(y, model(x))
    assert c.max_error / c.max_magnitude <= 1e-5, c
