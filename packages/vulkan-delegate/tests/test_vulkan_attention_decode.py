"""The decode attention kernel (attention_decode.comp, issue 19): SDPA with at most 8 query rows over at
most 1024 keys runs as one dispatch, a workgroup per query row (the decode step's matmul, mask, softmax,
matmul were 4 dispatches at the per-dispatch floor). GQA (kv heads read, not copied), a runtime bool mask
as the KV-cache decoder builds it, causal over several query rows, an additive float mask, head dims on
both sides of the kernel's 128 lanes and not a multiple of its 8 lanes per key. Eager PyTorch is the
reference: FP32 1e-4, FP16 1e-2 relative, NaN-aware (vk_check)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn


def r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed + sum(shape)))


class CacheAttention(nn.Module):
    """One decode step's attention over the cache: keep[j] = j <= pos (kv_decoder's mask)."""

    def forward(self, q, k, v, pos):
        keep = torch.arange(k.shape[2])[None, :] <= pos[:, None]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)


class CausalPlusFloatMask(nn.Module):
    def forward(self, q, k, v, add):
        return (F.scaled_dot_product_attention(q, k, v, is_causal=True)
                + F.scaled_dot_product_attention(q, k, v, attn_mask=add, scale=0.3))


@pytest.mark.parametrize("fp16", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_decode_attention_over_a_cache_with_gqa(fp16, vk_check, vk_shaders):
    """8 q heads over 2 kv heads, one query over 48 cached keys of which 30 are kept: one dispatch."""
    inputs = (r(1, 8, 1, 64), r(1, 2, 48, 64, seed=1), r(1, 2, 48, 64, seed=2), torch.tensor([29]))
    edge = vk_check(CacheAttention().eval(), inputs, fp16=fp16)
    assert [s for s in vk_shaders(edge, fp16) if s not in ("compare", "copy")] == ["attention_decode"], vk_shaders(edge, fp16)


@pytest.mark.parametrize("d", [48, pytest.param(160, marks=pytest.mark.slow), pytest.param(20, marks=pytest.mark.slow)])
def test_decode_attention_causal_and_float_mask(d, vk_check, vk_shaders):
    """3 query rows (causal: row i keeps keys j <= i) and an additive mask broadcast over heads; head dim
    48 (two lane groups in the output sum), 160 (past 128: two dims per lane), 20 (not a multiple of 8)."""
    inputs = (r(2, 3, 3, d), r(2, 3, 37, d, seed=1), r(2, 3, 37, d, seed=2), r(2, 1, 3, 37, seed=3))
    edge = vk_check(CausalPlusFloatMask().eval(), inputs)
    assert vk_shaders(edge, False).count("attention_decode") == 2, vk_shaders(edge, False)


def test_decode_attention_propagates_nan(vk_check):
    """A NaN in one head's query: that head's output is NaN, as torch's, not the 0 of a row with no kept key
    (the kernel told them apart by the sum of the probabilities, which is NaN there too)."""
    q = r(1, 4, 1, 32)
    q[0, 1, 0, 5] = float("nan")
    inputs = (q, r(1, 2, 20, 32, seed=1), r(1, 2, 20, 32, seed=2), torch.tensor([11]))
    ref = CacheAttention()(*inputs)
    assert ref[0, 1].isnan().all() and ref[0, [0, 2, 3]].isfinite().all()
    vk_check(CacheAttention().eval(), inputs, ref=ref)
