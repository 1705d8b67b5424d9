"""Wide-row layer/RMS/group norm (`norm_row`: a 64-lane workgroup per row; `norm_row_wide`: 256 lanes for rows of
NORM_WIDE_MIN or more, the decode step's one token of thousands of features; row_reduce.glsl) against eager
PyTorch, NaN-aware, and the shader the rule picks, with the subgroup twins and the shared-memory tree."""

from __future__ import annotations

import csv

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from arm_tosa_core.testing import compare_outputs
from vulkan_delegate import run_on_vulkan
from vulkan_delegate.runtime import clear_method_cache


class RmsNorm(nn.Module):
    def __init__(self, cols: int) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.rand(cols) + 0.5, requires_grad=False)

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.w, 1e-5)


NORMS = {"norm", "norm_row", "norm_row_wide", "group_norm"}


@pytest.mark.parametrize("kind,shape,shader,subgroup", [
    ("rms", (1, 1, 4100), "norm_row_wide", "1"),  # one token, cols past a multiple of the 256 lanes
    ("rms", (1, 1, 4100), "norm_row_wide", "0"),  # the shared-memory tree over 256 lanes
    ("layer", (3, 1030), "norm_row_wide", "1"),  # NORM_WIDE_MIN: the mean pass too, rows off the lanes
    ("group", (2, 8, 16, 20), "norm_row_wide", "1"),  # 2 groups of 4 x 16 x 20 = 1280: per-channel gains
    ("layer", (3, 300), "norm_row", "1"),
    pytest.param("layer", (3, 300), "norm_row", "0", marks=pytest.mark.slow),
    ("rms", (2, 16), "norm", "1"),  # narrow rows (under 32) stay one thread per row
])
def test_norm_row_matches_eager(vk_lower, tmp_path, monkeypatch, kind, shape, shader, subgroup):
    torch.manual_seed(shape[-1])
    model = {"rms": lambda: RmsNorm(shape[-1]), "layer": lambda: nn.LayerNorm(shape[-1]),
             "group": lambda: nn.GroupNorm(2, shape[1])}[kind]().eval()
    for p in model.parameters():
        p.data.uniform_(0.5, 1.5)  # gains and biases off 1 and 0, so a wrong channel index shows
    x = torch.randn(*shape) * 3 + 1
    pte = vk_lower(model, (x,)).to_executorch().buffer
    profile = tmp_path / "profile.csv"
    monkeypatch.setenv("VKDG_PROFILE", str(profile))
    monkeypatch.setenv("VKDG_SUBGROUP", subgroup)  # read at load: a cached method keeps its twins
    clear_method_cache()
    try:
        y = run_on_vulkan(pte, x)
    finally:
        clear_method_cache()
    names = [row["shader"] for row in csv.DictReader(profile.open())]
    kernels = [n.rsplit("_", 1)[0] for n in names]
    assert kernels[0] == shader and (NORMS - {shader}) & set(kernels) == set(), kernels
    assert names[0].endswith("sg") == (subgroup == "1" and shader != "norm"), names
    c = compare_outputs(y, model(x))
    assert c.max_error / c.max_magnitude <= 1e-5, c
