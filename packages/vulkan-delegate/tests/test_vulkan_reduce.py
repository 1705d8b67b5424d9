"""Reductions (sum, mean, amax, amin) at every dim form torch accepts: none given, an empty list (both
reduce every dim, as torch defines them), a negative dim, every dim listed, keepdim; ranks 0-4.
Compared with eager FP32 within 1e-4 of the output scale, NaN-aware; fully delegated."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from vulkan_delegate import partition_report, run_on_vulkan

REDUCTIONS = (torch.sum, torch.mean, torch.amax, torch.amin)
DIMS = {"none": None, "empty": [], "neg": -1, "all": "all"}


class Reduce(nn.Module):
    def __init__(self, dims, keepdim: bool) -> None:
        super().__init__()
        self.dims, self.keepdim = dims, keepdim

    def forward(self, x):
        dims = list(range(x.dim())) if self.dims == "all" else self.dims
        if dims is None and not self.keepdim:  # x.sum(), x.mean(), x.amax(), x.amin()
            return tuple(f(x) for f in REDUCTIONS)
        return tuple(f(x, dims, keepdim=self.keepdim) for f in REDUCTIONS)


def max_rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    """max |y - ref| / max |ref| (a NaN or inf in y where ref is finite gives NaN or inf: a failure)."""
    return ((y - ref).abs().max() / ref.abs().max().clamp_min(1e-12)).item()


CASES = [(rank, dims, keepdim) for rank in range(5) for dims in DIMS for keepdim in (False, True)
         if not (rank == 0 and dims == "all")]


@pytest.mark.parametrize("rank,dims,keepdim", CASES,
                         ids=[f"rank{r}-{d}-{'keep' if k else 'drop'}" for r, d, k in CASES])
def test_reduction(rank, dims, keepdim, vk_lower):
    x = torch.randn((2, 3, 4, 5)[:rank], generator=torch.Generator().manual_seed(rank)) + 0.5
    model = Reduce(DIMS[dims], keepdim).eval()
    edge = vk_lower(model, (x,))
    report = partition_report(edge)
    assert not report.cpu_nodes, str(report)
    ys = run_on_vulkan(edge.to_executorch(), x)
    for f, y, ref in zip(REDUCTIONS, ys, model(x), strict=True):
        assert y.shape == ref.shape, f.__name__
        err = max_rel_err(y, ref)
        assert err <= 1e-4, f"{f.__name__}: rel err {err:.3g}"
