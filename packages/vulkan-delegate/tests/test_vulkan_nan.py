"""NaN propagation: torch's maximum/minimum, clamp-like activations, amax/amin and max pooling return NaN where
an operand is NaN; GLSL's max/min/clamp leave that undefined (llvmpipe and NVIDIA return the other operand), so
each such shader goes through common.glsl's nan_max/nan_min/nan_clamp. The shared comparison (conftest.check)
fails on a finite value where eager gives NaN."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn


def with_nans(*shape, seed=0):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    x.view(-1)[seed::7] = float("nan")  # in some rows/windows, not in others
    return x


class Fn(nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


CASES = {
    "maximum": (lambda x, y: torch.maximum(x, y), 2),
    "minimum": (lambda x, y: torch.minimum(x, y), 2),
    "relu": (lambda x: torch.relu(x), 1),
    "clamp": (lambda x: x.clamp(-0.5, 0.5), 1),
    "hardswish": (lambda x: F.hardswish(x), 1),
    "tanh": (lambda x: torch.tanh(x), 1),
    "amax_last": (lambda x: x.amax(-1), 1),  # one workgroup per row (reduce_row)
    "amin_last": (lambda x: x.amin(-1), 1),
    "amax_middle": (lambda x: x.amax(1), 1),  # reduce over [outer, red, inner]
    "max_pool": (lambda x: F.max_pool2d(x.reshape(2, 3, 10, 12), 2), 1),
}


# fp16: one case per shader whose f16 variant computes in fp16 (binary, unary, reduce_row)
RUNS = [(name, False) for name in CASES] + [("maximum", True), ("clamp", True), ("amax_last", True)]


@pytest.mark.parametrize("name,fp16", RUNS, ids=[f"{n}-{'fp16' if h else 'fp32'}" for n, h in RUNS])
def test_nan_propagates_as_in_torch(vk_check, name, fp16):
    fn, arity = CASES[name]
    inputs = tuple(with_nans(2, 3, 120, seed=s) for s in range(1, arity + 1))
    vk_check(Fn(fn).eval(), inputs, fp16=fp16)


class _EpilogueClamps(nn.Module):
    """A clamp fused into each conv/GEMM shader's epilogue: direct, im2col-GEMM, 1x1 (few pixels), depthwise and
    transposed convs, a linear and a GEMV-shaped linear, a matmul."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv3 = nn.Conv2d(4, 8, 3, stride=2, padding=1)
        self.wino = nn.Conv2d(4, 8, 3, padding=1)  # fp32 stride-1 3x3: Winograd
        self.conv1 = nn.Conv2d(4, 8, 1)
        self.depthwise = nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.transposed = nn.ConvTranspose2d(4, 4, 2, stride=2)
        self.linear = nn.Linear(6, 5)

    def forward(self, x, t):
        outs = (torch.relu(self.conv3(x)), torch.relu(self.wino(x)), F.hardtanh(self.conv1(x)),
                F.relu6(self.depthwise(x)), torch.relu(self.transposed(x)), torch.relu(self.linear(t)), torch.relu(self.linear(t[:1])),
                torch.clamp(t @ t.T, -1.0, 1.0))
        return torch.cat([o.flatten() for o in outs])  # one output for the shared comparison


@pytest.mark.parametrize("fp16", [False, True], ids=["fp32", "fp16"])
def test_nan_accumulator_survives_the_fused_clamp(vk_check, vk_shaders, fp16):
    """relu/hardtanh/clamp of a NaN accumulator is NaN in torch; the conv/GEMM epilogues clamp with nan_clamp
    (GLSL's clamp returned the bound: 0 where eager gives NaN)."""
    x = torch.randn(1, 4, 6, 6, generator=torch.Generator().manual_seed(1))
    x[0, 1, 2, 3] = float("nan")  # one input pixel: NaN in every output window that covers it
    t = torch.randn(4, 6, generator=torch.Generator().manual_seed(2))
    t[1, 2] = float("nan")
    edge = vk_check(_EpilogueClamps().eval(), (x, t), fp16=fp16)
    shaders = set(vk_shaders(edge, fp16))
    expected = {"conv2d_gemm", "conv2d_dw", "conv_transpose2d", "matmul", "matmul_gemv"}
    expected |= set() if fp16 else {"conv2d_wino"}  # fp16 takes Winograd only for larger convs (ops/conv.py)
    assert expected <= shaders, str(sorted(shaders))
    assert not shaders & {"unary", "ewise_expr"}, str(sorted(shaders))  # every clamp fused into its producer


class ConvKinds(nn.Module):
    """One convolution per conv kernel (and split-K's sum): each epilogue clamps, also with no activation
    (bounds -inf, inf), where llvmpipe's clamp turned a NaN sum into -inf."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(8, 16, 3, stride=2, padding=1),  # conv2d_gemm
                                    nn.Conv2d(8, 16, 3, padding=1),  # conv2d_wino
                                    nn.Conv2d(8, 16, 1),  # conv2d_1x1_small
                                    nn.Conv2d(8, 8, 3, padding=1, groups=8),  # conv2d_dw
                                    nn.Conv2d(8, 8, 3, padding=1, groups=2),  # conv2d
                                    nn.ConvTranspose2d(8, 4, 3)])  # conv_transpose2d
        # 64 channels at 6x6: few workgroups, so K / the input channels split (conv2d_splitk sums)
        self.split = nn.ModuleList([nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.Conv2d(64, 64, 3, padding=1)])

    def forward(self, x, z):
        return torch.cat([c(x).flatten() for c in self.convs] + [c(z).flatten() for c in self.split])


def test_nan_propagates_through_every_conv_kernel(vk_check, vk_shaders):
    """A NaN in the input gives NaN in every output whose window holds it (torch), not -inf."""
    torch.manual_seed(0)
    x, z = torch.randn(1, 8, 10, 10), torch.randn(1, 64, 6, 6)
    x.view(-1)[::97] = float("nan")
    z.view(-1)[5::301] = float("nan")
    edge = vk_check(ConvKinds().eval(), (x, z))
    assert {"conv2d_gemm", "conv2d_wino", "conv2d_1x1_small", "conv2d_dw", "conv2d", "conv_transpose2d",
            "conv2d_splitk"} <= set(vk_shaders(edge, False))

