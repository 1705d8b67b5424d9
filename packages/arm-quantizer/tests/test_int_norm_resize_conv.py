"""INT op tables for the families that used to split CNNs: standalone batch norm, resize, dilated max
pooling, padding modes, grouped/transposed/3-d convolution, and the quantizer patterns around them.

Every case is fully delegated for TOSA-1.0+INT and within 1 output LSB of the PT2E model evaluated with
exact quantize arithmetic (`run_exactly`) and of the fake-quantized module itself.
"""

import pytest
import torch
import torch.nn.functional as F
from quant_harness import check_int, output_scales
from torch import nn

from arm_quantizer import run_exactly
from arm_tosa_core import run_on_reference_model
from arm_tosa_core.testing import FnModule as Fn
from arm_tosa_core.testing import max_relative_error


def _bn(channels: int, dims: int = 2) -> nn.Module:
    """A batch norm with non-trivial statistics (negative and tiny scales included)."""
    bn = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}[dims](channels)
    g = torch.Generator().manual_seed(channels)
    with torch.no_grad():
        bn.weight.copy_(torch.randn(channels, generator=g))
        bn.weight[0] = 1e-3
        bn.bias.copy_(torch.randn(channels, generator=g))
        bn.running_mean.copy_(torch.randn(channels, generator=g) * 0.5)
        bn.running_var.copy_(torch.rand(channels, generator=g) + 0.2)
    return bn


def _interp(**kwargs) -> nn.Module:
    return Fn(lambda s, x: F.interpolate(x, **kwargs))


CASES = [
    # batch norm that does not follow a convolution (ConvMixer, audio front-ends)
    ("bn_after_gelu", nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GELU(), _bn(8), nn.Conv2d(8, 4, 1)),
     [(1, 3, 6, 6)]),
    ("bn_input", nn.Sequential(_bn(4), nn.Conv2d(4, 4, 3)), [(2, 4, 5, 5)]),
    ("bn1d_rank3", nn.Sequential(nn.ReLU(), _bn(6, 1)), [(2, 6, 7)]),
    ("bn1d_rank2", nn.Sequential(nn.Linear(5, 6), nn.Tanh(), _bn(6, 1)), [(3, 5)]),
    ("bn_after_add", Fn(lambda s, a, b: s.bn(a + b), bn=_bn(3)), [(1, 3, 4, 4), (1, 3, 4, 4)]),
    # resize: the int8 tensor goes through RESIZE; bilinear sums are RESCALEd
    ("nearest_x2", _interp(scale_factor=2, mode="nearest"), [(1, 3, 4, 5)]),
    ("nearest_fractional", _interp(scale_factor=(1.5, 3.0), mode="nearest"), [(1, 2, 4, 3)]),
    ("nearest_exact_size", _interp(size=(9, 4), mode="nearest-exact"), [(1, 2, 5, 6)]),
    ("bilinear_x2", _interp(scale_factor=2, mode="bilinear"), [(1, 3, 4, 5)]),
    ("bilinear_x4", _interp(scale_factor=4, mode="bilinear"), [(1, 2, 3, 3)]),
    ("bilinear_size", _interp(size=(9, 7), mode="bilinear"), [(1, 2, 5, 3)]),
    ("bilinear_downscale", _interp(scale_factor=0.5, mode="bilinear"), [(1, 2, 8, 6)]),
    ("bilinear_align_corners_x2", _interp(scale_factor=2, mode="bilinear", align_corners=True), [(2, 1, 3, 4)]),
    ("bilinear_align_corners_size", _interp(size=(7, 9), mode="bilinear", align_corners=True), [(1, 2, 4, 5)]),
    # dilated max pooling: taps gathered by SLICE/RESHAPE/CONCAT, one MAX_POOL2D on int8
    ("maxpool_dilated", nn.Sequential(nn.Conv2d(3, 4, 1), nn.MaxPool2d(3, 1, dilation=2)), [(1, 3, 9, 9)]),
    ("maxpool_dilated_stride_pad", nn.Sequential(nn.Conv2d(3, 4, 1), nn.MaxPool2d(3, 2, 1, dilation=2)),
     [(1, 3, 11, 10)]),
    # convolution variants: padding modes (the edge copies run on int8), "same", 3-d, grouped transposed
    ("conv_reflect", nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), [(1, 3, 6, 5)]),
    ("conv_replicate", nn.Conv2d(3, 4, 3, padding=1, padding_mode="replicate"), [(1, 3, 5, 5)]),
    ("conv_circular", nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular"), [(1, 3, 5, 6)]),
    ("conv1d_reflect", nn.Conv1d(3, 4, 3, padding=1, padding_mode="reflect"), [(2, 3, 8)]),
    ("conv_same_even_kernel", nn.Conv2d(3, 4, 4, padding="same"), [(1, 3, 7, 6)]),
    ("conv1d_same", nn.Conv1d(3, 4, 4, padding="same"), [(2, 3, 9)]),
    ("conv3d", nn.Conv3d(3, 4, 3, padding=1), [(1, 3, 4, 5, 5)]),
    ("conv3d_relu", nn.Sequential(nn.Conv3d(2, 4, (1, 3, 3), stride=(1, 2, 2)), nn.ReLU()), [(1, 2, 3, 9, 8)]),
    ("conv_transpose_grouped", nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2), [(1, 4, 5, 5)]),
    # quantizer patterns
    ("input_feeds_conv_and_add", Fn(lambda s, x: x + F.relu(s.c(x)), c=nn.Conv2d(4, 4, 3, padding=1)),
     [(1, 4, 6, 6)]),
    ("silu_rank1", Fn(lambda s, x: F.silu(x)), [(16,)]),
]


def check_exact(module, shapes, case: str, max_lsb: float = 1.0):
    """check_int, then the same bound against `run_exactly` (exact quantize/dequantize arithmetic)."""
    torch.manual_seed(0)
    inputs = tuple(torch.randn(s) for s in shapes)
    edge, report, lsb, converted = check_int(module, inputs, max_lsb=max_lsb, case=case)
    out = run_on_reference_model(edge, *inputs)
    err, _ = max_relative_error(out, run_exactly(converted, *inputs))
    scale = max(output_scales(converted))
    assert err <= max_lsb * scale * 1.0001, f"[{case}] {err / scale:.2f} LSB from run_exactly\n{report}"
    assert len(report.delegates) == 1, f"[{case}] split into {len(report.delegates)} partitions\n{report}"
    return report


# Slow to quantize (40-70 s each on the 2-core CI machine): run by `nox -s test-full`.
SLOW = {"bn_input", "bn1d_rank3", "bn1d_rank2", "bn_after_add"}


@pytest.mark.parametrize("name,module,shapes", [
    pytest.param(*c, id=c[0], marks=[pytest.mark.slow] if c[0] in SLOW else []) for c in CASES])
def test_int_within_one_lsb(name, module, shapes):
    check_exact(module, shapes, name)


def test_grouped_transposed_conv_with_per_tensor_weights():
    """Per-tensor weight qparams: one scale for every output channel of every group (the bias scale and
    the lowering's accumulator scale repeated the scale per group instead: a size mismatch)."""
    from arm_quantizer import get_symmetric_quantization_config

    torch.manual_seed(0)
    module = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2).eval()
    inputs = (torch.randn(1, 4, 5, 5),)
    edge, report, _, converted = check_int(module, inputs, case="conv_transpose_grouped_per_tensor",
                                           config=get_symmetric_quantization_config(is_per_channel=False))
    err, _ = max_relative_error(run_on_reference_model(edge, *inputs), run_exactly(converted, *inputs))
    assert err <= max(output_scales(converted)) * 1.0001 and len(report.delegates) == 1, report


def test_standalone_batch_norm_is_one_depthwise_conv():
    """conv -> GELU -> BN -> conv: the BN is one 1x1 DEPTHWISE_CONV2D whose RESCALE is the requantize."""
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GELU(), _bn(8), nn.Conv2d(8, 4, 1))
    ops = check_exact(model, [(1, 3, 6, 6)], "bn_ops").delegates[0].ops
    assert ops.get("DEPTHWISE_CONV2D") == 1 and "MUL" not in ops and ops.get("CONV2D") == 2, ops


def test_bilinear_x2_rescale_is_a_shift():
    """vela takes a bilinear RESIZE only when its RESCALE is a pure shift by log2(n_y * n_x)."""
    report = check_exact(_interp(scale_factor=2, mode="bilinear"), [(1, 2, 4, 4)], "bilinear_shift")
    assert report.delegates[0].ops.get("RESIZE") == 1 and report.delegates[0].ops.get("RESCALE") == 1


def test_bilinear_between_convs():
    """A bilinear sum halfway between two codes rounds up in TOSA's RESCALE and to even in torch: 1 LSB
    at the resize, which the next convolution may turn into 2 output LSBs (as in MobileNetV2)."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Upsample(scale_factor=2, mode="bilinear"),
                          nn.Conv2d(4, 2, 3, padding=1))
    ops = check_exact(model, [(1, 3, 5, 4)], "conv_upsample_conv", max_lsb=2).delegates[0].ops
    assert ops.get("RESIZE") == 1 and ops.get("TRANSPOSE", 0) == 2, ops
