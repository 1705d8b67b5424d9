"""fp16 arithmetic (issue 23 item 6): with force_fp16 on a device with shaderFloat16 (lavapipe has it), the
elementwise, pooling, upsample, compare and data-movement shaders compute in fp16 (reductions still sum in
fp32); without it (or under VKDG_FP16_MATH=0) the runtime runs their `f16math32` twins, fp16 storage with
fp32 arithmetic, where every shader of the program has one or needs no fp16 arithmetic. Eager fp32 is the
reference: 1e-2 relative (conftest.check), NaN-aware."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vulkan_delegate import run_on_vulkan
from vulkan_delegate.profile import profile_program
from vulkan_delegate.runtime import clear_method_cache


def r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed + sum(shape)))


class Elementwise(nn.Module):
    """unary (piecewise-linear in fp16, transcendental in fp32) and binary ops with broadcast."""

    def forward(self, x, y):
        a = F.hardswish(x) * y + 1.5
        b = torch.sigmoid(a) - torch.maximum(x, y) / (y.abs() + 1)
        return F.leaky_relu(b * 0.5, 0.1) + torch.tanh(x) * F.gelu(y[:, :1])


class PoolUpsample(nn.Module):
    """max pooling (fp16) and average pooling (fp32 sums), bilinear and nearest upsampling."""

    def forward(self, x, y):
        c = F.max_pool2d(x, 3, 2, 1) + F.avg_pool2d(y, 3, 2, 1)
        return F.interpolate(c, scale_factor=2, mode="bilinear") + F.interpolate(c, scale_factor=2)


class Movement(nn.Module):
    """compare, where, pad, permute (copy), gather: data movement through fp16 registers."""

    def forward(self, x, y):
        e = torch.where(x > y, x, y * 2).permute(0, 1, 3, 2).contiguous()
        f = torch.where(e <= 0.5, e, -e)
        idx = torch.arange(x.shape[-1] - 1, -1, -1)
        return F.pad(f, (1, 2)).index_select(-2, idx)


FAMILIES = {"elementwise": Elementwise, "pool_upsample": PoolUpsample, "movement": Movement}


@pytest.mark.parametrize("name", ["elementwise", pytest.param("pool_upsample", marks=pytest.mark.slow),
                                  pytest.param("movement", marks=pytest.mark.slow)])
def test_fp16_compute_family(name, vk_check):
    vk_check(FAMILIES[name]().eval(), (r(2, 3, 9, 10), r(2, 3, 9, 10, seed=1)), fp16=True)


class TinyScale(nn.Module):
    """x * 1e-7: a scalar fp16 cannot hold (a subnormal there; its nearest one is 1.19e-7)."""

    def forward(self, x):
        return x * 1e-7


class TinySlope(nn.Module):
    """leaky_relu with slope 1e-7 on negative inputs."""

    def forward(self, x):
        return F.leaky_relu(-x.abs(), 1e-7)


@pytest.mark.parametrize("model", [TinyScale, TinySlope])
def test_fp16_unary_scalars_are_not_rounded_to_fp16(model, vk_check, vk_rel_err):
    """The unary shader computed affine (x * s + b), leaky_relu and hardswish/hardsigmoid in fp16 with
    the scalar (and 1/6) rounded to fp16: `x * 1e-7` came back 19 % large, silently. They compute in
    fp32 now, rounded to fp16 once at the store, as eager fp16 (opmath fp32) does: within eager fp16's
    own distance from fp32 plus one fp16 ulp (the input's own rounding differs in order)."""
    x = r(2, 3, 16, 16) * 3000  # outputs ~3e-4: normal fp16 numbers
    ref = model()(x)
    eager_fp16 = vk_rel_err(model().half()(x.half()), ref)
    vk_check(model().eval(), (x,), fp16=True, tol=2 * eager_fp16 + 2 ** -11, ref=ref)


def _shaders(edge, inputs) -> list[str]:
    return [row.shader for row in profile_program(edge, *inputs, runs=1).rows]


def test_fp16_math_variant_is_chosen_at_load(vk_lower, monkeypatch):
    """lavapipe has shaderFloat16: the f16 shaders run as they are. VKDG_FP16_MATH=0 (as a device without
    it) runs their math32 twins with the same numerics; a program whose GEMM needs fp16 arithmetic keeps it
    (it has no twin), the other shaders then computing in fp16 too."""
    model, inputs = PoolUpsample().eval(), (r(1, 2, 8, 8), r(1, 2, 8, 8, seed=1))
    edge = vk_lower(model, inputs, fp16=True)
    fp16_math = _shaders(edge, inputs)
    assert "pool2d_f16" in fp16_math and "upsample2d_f16" in fp16_math
    ref = model(*inputs)
    monkeypatch.setenv("VKDG_FP16_MATH", "0")
    math32 = _shaders(edge, inputs)
    assert math32 == [s + "math32" if "_f16" in s else s for s in fp16_math], math32
    clear_method_cache()
    try:
        y = run_on_vulkan(edge.to_executorch(), *inputs)
    finally:
        clear_method_cache()
    assert torch.isfinite(y).all() and (y - ref).abs().max() <= 1e-2 * ref.abs().max()
    gemm = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval()
    shaders = _shaders(vk_lower(gemm, (r(3, 8),), fp16=True), (r(3, 8),))
    assert not any(s.endswith("math32") for s in shaders) and any(s.startswith("matmul_f16") for s in shaders)


class ConvBatchNorm(nn.Module):
    """conv -> batch norm (folded into the convolution), then batch norm on its own (after a relu: its
    own dispatch). Each norm's shift beta - mean * scale nearly cancels: mean 1000 (fp16 spacing 0.5
    there), scale 1 + 2^-10, so mean * scale is 1000.98 exactly and 1001 in fp16."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn, self.bn2 = nn.BatchNorm2d(4), nn.BatchNorm2d(4)
        with torch.no_grad():
            self.conv.weight.mul_(0.1)
            for bn in (self.bn, self.bn2):
                bn.running_mean.fill_(1000.0)
                bn.running_var.fill_(1.0)
                bn.weight.fill_(1 + 2 ** -10)
                bn.bias.fill_(1000.0)

    def forward(self, x):
        return self.bn2(F.relu(self.bn(self.conv(x))))


def test_half_batch_norm_folds_in_fp32(vk_check, vk_rel_err):
    """A `model.half()` program hands the delegate fp16 batch-norm statistics. Folding them in fp16
    rounded mean * scale (1000.98 -> 1001) before the shift's cancellation: 2.4e-2 absolute on outputs
    near 1 (GoogLeNet `model.half()`: 1.6x eager fp16's distance from fp32). In fp32, rounded once when
    stored, as eager fp16 (opmath fp32) computes the norm. Reference: the fp32 model with the same
    fp16-rounded parameters; within eager fp16's own distance plus one fp16 ulp."""
    model = ConvBatchNorm().eval().half()
    x = r(1, 3, 8, 8).half()
    ref = ConvBatchNorm().eval().float()
    ref.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    ref = ref(x.float())
    eager_fp16 = vk_rel_err(model(x), ref)
    vk_check(model, (x,), tol=eager_fp16 + 2 ** -10, ref=ref)
