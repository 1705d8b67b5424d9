"""Tensors past the dispatch limits: more than 65535 workgroups along an axis and more than 2^24 elements.

A 1-D shader folds its workgroups into y (linear_id()); a 2-D shader's axis with more than 65535 groups
runs as several dispatches with a base workgroup. Each case compares the whole output with eager, and the
last elements explicitly (a shader that stops early leaves them 0).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from vulkan_delegate import partition_report, run_on_vulkan


class ScaleShiftRelu(nn.Module):
    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return (a * 2.0 + 1.0).relu()  # binary, binary, unary, then the copy to the output


def _run(vk_lower, model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    edge = vk_lower(model, (x,))
    assert not (report := partition_report(edge)).cpu_nodes, str(report)
    y = run_on_vulkan(edge.to_executorch(), x)
    return (y[0] if isinstance(y, (list, tuple)) else y), model(x)


def test_elementwise_past_2_pow_24_elements_writes_every_element(vk_lower):
    # 17,000,000 > 65535 * 257 = 16,842,495: the first element a fold with a wrong row stride never wrote
    x = torch.linspace(-1.0, 1.0, 17_000_000)
    y, ref = _run(vk_lower, ScaleShiftRelu(), x)
    assert torch.equal(y[-1000:], ref[-1000:]), (y[-4:], ref[-4:])
    assert torch.equal(y, ref), f"{(y != ref).sum().item()} elements differ, first at {(y != ref).nonzero()[0].item()}"


def test_pool2d_with_more_than_65535_workgroups_on_an_axis(vk_lower):
    # x axis (OH*OW = 2100 * 2100 > 65535 * 64) with y = N*C = 1: was folded into y, which pool2d reads as
    # N*C (pixels past 65535 * 64 left 0); y axis (N*C = 70000 > 65535): was refused at run time
    pool = nn.MaxPool2d(3, stride=1, padding=1)
    for shape in ((1, 1, 2100, 2100), (1, 70_000, 2, 2)):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
        y, ref = _run(vk_lower, pool, x)
        assert y.shape == ref.shape
        assert torch.equal(y.flatten()[-1000:], ref.flatten()[-1000:]), shape
        assert torch.equal(y, ref), f"{shape}: {(y != ref).sum().item()} elements differ"


class RowMax(nn.Module):
    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return a.amax(dim=1)


def test_reduction_with_64_wide_workgroups_folded_past_65535_groups(vk_lower):
    # reduce.comp (64 invocations per workgroup, one per output row): 4,300,000 rows > 65535 * 65 folds
    x = torch.randn(4_300_000, 2, generator=torch.Generator().manual_seed(0))
    y, ref = _run(vk_lower, RowMax(), x)
    assert torch.equal(y[-1000:], ref[-1000:]), (y[-4:], ref[-4:])
    assert torch.equal(y, ref), f"{(y != ref).sum().item()} elements differ"


def test_tensor_past_max_storage_buffer_range_is_a_load_error(vk_lower, monkeypatch, capfd):
    # a binding larger than maxStorageBufferRange is undefined (reads past it may return 0 on a device that
    # enforces it; lavapipe's 128 MiB is not enforced): the load must fail, naming the limit. The limit is
    # lowered to 16 KiB by VKDG_MAX_STORAGE_RANGE (read at each load)
    monkeypatch.setenv("VKDG_MAX_STORAGE_RANGE", str(16 * 1024))
    fits = torch.linspace(-1.0, 1.0, 4096)  # 16 KiB per tensor: at the limit, runs
    y, ref = _run(vk_lower, ScaleShiftRelu(), fits)
    assert torch.equal(y, ref)
    over = torch.linspace(-1.0, 1.0, 4097)
    capfd.readouterr()
    with pytest.raises(RuntimeError):
        _run(vk_lower, ScaleShiftRelu(), over)
    err = capfd.readouterr().err
    assert "maxStorageBufferRange" in err and "16388 bytes" in err and "16384 bytes" in err, err
