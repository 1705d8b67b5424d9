"""The fused attention kernel (attention_flash.comp, issue 19): SDPA with at least 64 keys runs as one
dispatch streaming 64-key tiles with an online softmax (4 query rows per workgroup). Query counts off the
4-row blocks, key counts off the 64-key tiles, GQA (kv heads read, not copied), causal, an additive float
mask and a bool mask with a fully masked row (0, as torch). Eager PyTorch is the reference: FP32 1e-4,
FP16 1e-2 relative, NaN-aware."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vulkan_delegate.lower import lower_program


def r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed + sum(shape)))


class CausalGQA(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


class Masked(nn.Module):
    def forward(self, q, k, v, add, keep):
        return (F.scaled_dot_product_attention(q, k, v, attn_mask=add)
                + F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=0.3))


def _masked_inputs():
    keep = torch.rand(1, 2, 6, 64, generator=torch.Generator().manual_seed(4)) > 0.5
    keep[0, 1, 3] = False  # a fully masked row: 0 there, as torch
    return (r(1, 2, 6, 40), r(1, 2, 64, 40, seed=1), r(1, 2, 64, 40, seed=2), r(1, 1, 6, 64, seed=3), keep)


def delegated_shaders(edge) -> list[str]:
    """The dispatches of the program's (single) Vulkan partition."""
    delegated = edge.exported_program().graph_module.lowered_module_0.original_module
    return [d.shader for d in lower_program(delegated, fp16=False).dispatches]


@pytest.mark.parametrize("fp16", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_flash_attention_causal_gqa(fp16, vk_check):
    """4 q heads over 2 kv heads, 10 queries (2 past a 4-row block), 70 keys (6 past a 64-key tile): one
    fused dispatch."""
    edge = vk_check(CausalGQA().eval(), (r(1, 4, 10, 48), r(1, 2, 70, 48, seed=1), r(1, 2, 70, 48, seed=2)),
                    fp16=fp16)
    assert delegated_shaders(edge)[0] == "attention_flash_f32"


def test_flash_attention_masks(vk_check, monkeypatch):
    monkeypatch.setenv("VKDG_DECODE_ATTN", "0")  # 6 query rows: attention_decode's otherwise
    model, inputs = Masked().eval(), _masked_inputs()
    ref = model(*inputs)
    assert ref[0, 1, 3].abs().max() > 0  # the additive branch still attends there
    assert delegated_shaders(vk_check(model, inputs, ref=ref)).count("attention_flash_f32") == 2


@pytest.mark.slow
def test_flash_attention_is_chosen_for_long_key_sequences(vk_lower, monkeypatch):
    def shaders(model, inputs):
        return delegated_shaders(vk_lower(model, inputs))

    long_kv = (r(1, 4, 10, 48), r(1, 2, 70, 48, seed=1), r(1, 2, 70, 48, seed=2))
    short_kv = (r(1, 4, 10, 48), r(1, 2, 40, 48, seed=1), r(1, 2, 40, 48, seed=2))
    assert "attention_flash_f32" not in shaders(CausalGQA(), short_kv)
    monkeypatch.setenv("VKDG_FLASH_ATTN", "0")
    assert "attention_flash_f32" not in shaders(CausalGQA(), long_kv)
