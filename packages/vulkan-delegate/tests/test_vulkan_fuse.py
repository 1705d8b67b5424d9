"""Elementwise fusion (vulkan_delegate/fuse.py): trees of unary/binary dispatches become one `ewise_expr`
dispatch. Each fused form is run on the device against eager PyTorch (fp32 1e-4, fp16 1e-2 relative,
NaN-aware: conftest.check) and the lowered graph must hold the fused dispatch, so a case cannot pass by
not fusing."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn


def r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed + sum(shape)))


class UnaryChain(nn.Module):
    """unary ops and scalar operands (a float cast would not show here: the delegate computes every float in its
    compute dtype, so a cast is a view, no dispatch, and a chain through one fuses as if it were not there)."""

    def forward(self, x):
        return torch.sigmoid(torch.exp(x * 0.5) - 1.25).clamp(0.3, 0.7) * 3 + F.silu(x)


class SameShape(nn.Module):
    """a tree over two same-shape inputs, with sub's alpha and non-commutative ops."""

    def forward(self, x, y):
        return torch.sub(x * y, y, alpha=2.5) / (y.abs() + 1) + torch.maximum(x, y)


class RmsNorm(nn.Module):
    """add, rsqrt, mul by the row's broadcast, mul by the per-column gain: 4 dispatches into 1."""

    def __init__(self, cols: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.rand(cols) + 0.5)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class ChannelAffine(nn.Module):
    """per-channel scale and shift of NCHW (broadcast operands [C, 1, 1]) and a residual add."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.rand(channels, 1, 1) + 0.5)
        self.shift = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x, y):
        return F.hardtanh(x * self.scale + self.shift, -1.0, 2.0) + y


class Order(nn.Module):
    """Every op depends on its operands' order: a chain evaluated with any operand pair swapped, or its
    steps in another order, gives other values."""

    def forward(self, x, y, z):
        return torch.pow(2.0 - (x - y) / z, 3) - x / (y * 4 - z)


CASES = {
    "unary_chain": (lambda: UnaryChain(), lambda: (r(2, 3, 40),)),
    "same_shape": (lambda: SameShape(), lambda: (r(3, 50), r(3, 50, seed=1).abs() + 0.5)),
    "rms_norm": (lambda: RmsNorm(96), lambda: (r(2, 5, 96) * 2 + 0.5,)),
    "channel_affine": (lambda: ChannelAffine(6), lambda: (r(2, 6, 5, 7), r(2, 6, 5, 7, seed=1))),
}


DEFAULT_CASES = {("rms_norm", False), ("channel_affine", True)}  # the rest: slow


@pytest.mark.parametrize(("name", "fp16"), [
    pytest.param(name, fp16, marks=() if (name, fp16) in DEFAULT_CASES else pytest.mark.slow)
    for name in CASES for fp16 in (False, True)])
def test_fused_form_matches_eager(name, fp16, vk_check, vk_shaders):
    make_model, make_inputs = CASES[name]
    torch.manual_seed(0)
    model, inputs = make_model().eval(), make_inputs()
    edge = vk_check(model, inputs, fp16=fp16)
    kernels = vk_shaders(edge, fp16)
    unfused = [k for k in kernels if k in ("unary", "binary")]
    assert "ewise_expr" in kernels and unfused == (["unary"] if name == "rms_norm" else []), kernels  # pow: the mean reads it


def test_fused_chain_keeps_operand_order(vk_check, vk_shaders):
    x, y = r(4, 33), r(4, 33, seed=1)
    z = r(4, 33, seed=2).abs() + 0.5
    edge = vk_check(Order().eval(), (x, y, z))
    assert vk_shaders(edge, False) == ["ewise_expr", "copy"]  # copy: the output


def test_shared_producer_is_computed_once_and_read_twice(vk_check, vk_shaders):
    """a = x * 2 is read twice: it keeps its own dispatch (folding it into one reader would leave the other
    reading a buffer nobody wrote); the rest, each op read once, is one tree."""

    class Shared(nn.Module):
        def forward(self, x):
            a = x * 2
            return (torch.sigmoid(a) + 1) * (torch.tanh(a) - 1)

    edge = vk_check(Shared().eval(), (r(3, 20),))
    assert vk_shaders(edge, False) == ["binary", "ewise_expr", "copy"]


class RopeSplit(nn.Module):
    """Llama's rotate_half written with torch.split (exir: split_with_sizes_copy), as the bench's Llama block."""

    def forward(self, x, cos, sin):
        x1, x2 = x.split(x.shape[-1] // 2, dim=-1)
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def test_rope_through_a_split_is_one_dispatch(vk_check, vk_shaders):
    """The rotary chain with its halves split (not sliced) is one `rope` dispatch (was 8: two split copies,
    neg, two cat copies, two muls and the add)."""
    x, cos, sin = r(1, 4, 16, 32), r(16, 32, seed=1), r(16, 32, seed=2)
    edge = vk_check(RopeSplit().eval(), (x, cos, sin))
    assert vk_shaders(edge, False) == ["rope", "copy"]


def _corrupt_op_code(program: list) -> list:
    """The first unary word's op code replaced by one past the unary table."""
    from vulkan_delegate import fuse, opcodes

    k = next((i for i, w in enumerate(program) if isinstance(w, int) and w & 3 == fuse.KIND_UNARY), None)
    if k is None:  # (a subtree without a unary op)
        return program
    return [*program[:k], (program[k] & 0xFF) | len(opcodes.OP_TABLES["unary"]) << 8, *program[k + 1:]]


def _extra_load(program: list) -> list:
    """One more input pushed and never consumed: the program leaves two values."""
    from vulkan_delegate import fuse

    return [fuse.KIND_LOAD, *program]


@pytest.mark.parametrize("corrupt", [_corrupt_op_code, _extra_load], ids=["op_code", "unbalanced"])
def test_corrupt_fused_program_is_refused_at_load(vk_lower, vk_shaders, monkeypatch, corrupt):
    """The runtime checks each fused program at load (op codes inside the unary/binary tables, the stack within
    the shader's 4 slots, one value left): a payload that fails is an Error, never a NaN or a read past the
    shader's stack at run time."""
    from executorch.runtime import Runtime

    from vulkan_delegate import fuse

    dispatch = fuse._dispatch

    def corrupted(expr, root):
        d = dispatch(expr, root)
        program = corrupt(d.push[10:])
        d.push[1:2], d.push[10:] = [len(program)], program
        return d

    monkeypatch.setattr(fuse, "_dispatch", corrupted)
    x = r(4, 33)
    edge = vk_lower(UnaryChain().eval(), (x,))
    assert vk_shaders(edge, False) == ["ewise_expr", "copy"]
    pte = bytes(edge.to_executorch().buffer)
    with pytest.raises(RuntimeError):
        Runtime.get().load_program(pte).load_method("forward").execute([x])
