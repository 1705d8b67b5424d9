"""Workgroup-per-row reductions (issue 19): softmax, layer / RMS / group norm and reductions over a
contiguous axis of at least ROW_MIN elements run one workgroup per row (softmax_row, norm_row,
reduce_row), summed with subgroupAdd/subgroupMax where the device has subgroup arithmetic (lavapipe's
subgroups are 8 wide, NVIDIA's 32), else (VKDG_SUBGROUP=0) through a shared-memory tree. Row lengths off
the 64 lanes, a causal softmax, a fully masked attention row. Eager PyTorch is the reference: FP32 1e-4,
FP16 1e-2 relative, NaN-aware."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from executorch.exir import to_edge
from torch import nn

from vulkan_delegate import run_on_vulkan
from vulkan_delegate.lower import lower_program
from vulkan_delegate.profile import profile_program
from vulkan_delegate.runtime import clear_method_cache


def r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed + sum(shape)))


class Rows(nn.Module):
    """softmax over 100 (log-softmax too), layer norm over 70, RMS norm over 33, group norm of 2 groups of
    4 x 5 x 5 = 100, a global average pool (mean over 25) and an amax over 100; a short softmax (over 9)
    keeps the one-invocation kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.ln, self.rms = nn.LayerNorm(70), nn.RMSNorm(33, eps=1e-5)
        self.gn = nn.GroupNorm(2, 8)
        for p in (*self.ln.parameters(), *self.rms.parameters(), *self.gn.parameters()):
            p.data.uniform_(0.5, 1.5)

    def forward(self, s, a, b, img):
        p = torch.softmax(s * 3, -1) + F.log_softmax(s, -1) * 0.01 + torch.softmax(s[..., :9], -1).sum(-1, True)
        g = self.gn(img)
        pooled = g.mean((2, 3))
        return torch.cat([p.flatten(), p.sum().reshape(1), self.ln(a).sum(-1), self.rms(b).amax(-1),
                          pooled.flatten(), s.amax(-1).flatten(), F.adaptive_avg_pool2d(img, 1).flatten()])


INPUTS = (r(3, 4, 100), r(2, 70), r(2, 33, seed=1), r(2, 8, 5, 5, seed=2))


def _shaders(model, inputs) -> list[str]:
    return [d.shader for d in lower_program(to_edge(torch.export.export(model, inputs)).exported_program(),
                                            False).dispatches]


@pytest.mark.slow
def test_rows_take_a_workgroup_each(monkeypatch):
    shaders = _shaders(Rows().eval(), INPUTS)
    assert shaders.count("softmax_row_f32") == 2 and shaders.count("softmax_f32") == 1
    # layer and group norm (exir decomposes the RMS norm outside the partitioner's preserve list)
    assert shaders.count("norm_row_f32") >= 2 and "norm_f32" not in shaders and "group_norm_f32" not in shaders
    assert shaders.count("reduce_row_f32") >= 3
    monkeypatch.setenv("VKDG_ROW_REDUCE", "0")
    assert _shaders(nn.Softmax(-1), (r(2, 100),))[0] == "softmax_f32"


@pytest.mark.parametrize("fp16", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_row_reductions(fp16, vk_check):
    edge = vk_check(Rows().eval(), INPUTS, fp16=fp16)
    delegated = edge.exported_program().graph_module.lowered_module_0.original_module
    shaders = [d.shader for d in lower_program(delegated, fp16=False).dispatches]
    assert {"softmax_row_f32", "norm_row_f32", "reduce_row_f32"} <= set(shaders)


def test_subgroup_and_shared_memory_variants_agree(vk_lower, monkeypatch):
    """lavapipe has subgroup arithmetic: the sg twins run; VKDG_SUBGROUP=0 the shared-memory tree, with
    eager's numbers both ways (a causal SDPA over 40 keys, a row fully masked: 0 as torch)."""
    class Attn(nn.Module):
        def forward(self, q, k, v, m):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m) + torch.softmax(q, -1)

    q, k, v = r(1, 2, 5, 48), r(1, 2, 40, 48, seed=1), r(1, 2, 40, 48, seed=2)
    m = torch.rand(1, 1, 5, 40, generator=torch.Generator().manual_seed(3)) > 0.3
    m[..., 2, :] = False
    inputs = (q, k, v, m)
    model = Attn().eval()
    ref = model(*inputs)
    monkeypatch.setenv("VKDG_DECODE_ATTN", "0")  # the unfused attention's softmax_row (not attention_decode)
    edge = vk_lower(model, inputs)
    for env, suffix in (("1", "sg"), ("0", "")):
        monkeypatch.setenv("VKDG_SUBGROUP", env)
        rows = [row.shader for row in profile_program(edge, *inputs, runs=1).rows if "_row_" in row.shader]
        assert rows == [f"softmax_row_f32{suffix}"] * 2, rows
        clear_method_cache()
        try:
            y = run_on_vulkan(edge.to_executorch(), *inputs)
        finally:
            clear_method_cache()
        assert torch.isfinite(y).all() and (y - ref).abs().max() <= 1e-4 * ref.abs().max()
        assert (y[0, :, 2] - torch.softmax(q, -1)[0, :, 2]).abs().max() <= 1e-6  # the masked row's attention: 0
