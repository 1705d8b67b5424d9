"""Op tables: pooling, reductions, normalization and softmax (FP) vs eager on the TOSA reference model."""

import pytest
import torch
from torch import nn

from arm_tosa_core.testing import check_lowering

torch.manual_seed(0)


class Fn(nn.Module):
    """Wraps a function of the inputs as a module."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _randomized_bn(channels: int, cls=nn.BatchNorm2d, **kwargs) -> nn.Module:
    """A batch norm with non-trivial running statistics and affine parameters."""
    bn = cls(channels, **kwargs)
    with torch.no_grad():
        bn.running_mean.copy_(torch.randn(channels))
        bn.running_var.copy_(torch.rand(channels) + 0.5)
        if bn.weight is not None:
            bn.weight.copy_(torch.randn(channels))
            bn.bias.copy_(torch.randn(channels))
    return bn


def _randomized(module: nn.Module) -> nn.Module:
    """Non-trivial affine parameters for layer/group norms (their defaults are 1 and 0)."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p))
    return module


def _conv(cin: int = 3, cout: int = 6) -> nn.Module:
    return nn.Conv2d(cin, cout, 3, padding=1)


POOL_CASES = [
    ("maxpool_k3_s2_p1", nn.MaxPool2d(3, 2, 1), (2, 3, 9, 9)),
    ("maxpool_floor_remainder", nn.MaxPool2d(3, 2), (1, 3, 8, 10)),
    ("maxpool_ceil_pad", nn.MaxPool2d(3, 2, 1, ceil_mode=True), (1, 2, 10, 7)),
    ("maxpool_rect", nn.MaxPool2d((2, 3), (1, 2), (1, 1)), (1, 3, 7, 9)),
    ("maxpool_unbatched", nn.MaxPool2d(2), (3, 6, 6)),
    ("maxpool1d", nn.MaxPool1d(3, 2, 1), (2, 4, 11)),
    ("maxpool_dilated", nn.MaxPool2d(3, 1, dilation=2), (1, 3, 9, 9)),
    ("maxpool_dilated_stride_pad", nn.MaxPool2d(3, 2, 1, dilation=2), (2, 3, 11, 10)),
    ("maxpool_dilated_ceil", nn.MaxPool2d(2, 2, 1, dilation=3, ceil_mode=True), (1, 2, 9, 8)),
    ("maxpool_dilated_one_axis", nn.MaxPool2d((3, 2), (1, 2), (1, 0), dilation=(2, 1)), (1, 3, 8, 9)),
    ("maxpool_dilated_unbatched", nn.MaxPool2d(2, 1, dilation=2), (3, 6, 6)),
    ("maxpool1d_dilated", nn.MaxPool1d(3, 2, 1, dilation=2), (2, 4, 13)),
    ("avgpool_pad_include", nn.AvgPool2d(3, 2, 1), (1, 3, 9, 9)),
    ("avgpool_pad_exclude", nn.AvgPool2d(3, 2, 1, count_include_pad=False), (1, 3, 9, 9)),
    ("avgpool_ceil_include", nn.AvgPool2d(3, 2, 1, ceil_mode=True), (1, 2, 8, 8)),
    ("avgpool_ceil_exclude", nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False), (1, 2, 8, 8)),
    ("avgpool_ceil_nopad", nn.AvgPool2d(2, 2, ceil_mode=True), (1, 2, 7, 9)),
    ("avgpool_divisor", nn.AvgPool2d(3, 2, 1, divisor_override=5), (1, 2, 8, 8)),
    ("avgpool_divisor_ceil", nn.AvgPool2d(3, 2, 1, ceil_mode=True, divisor_override=4), (1, 2, 8, 8)),
    ("avgpool1d", nn.AvgPool1d(4, 2, 2), (1, 3, 12)),
    ("adaptive_avg_rect", nn.AdaptiveAvgPool2d((3, 1)), (1, 3, 9, 4)),
    ("adaptive_max_2x2", nn.AdaptiveMaxPool2d(2), (1, 3, 6, 6)),
]


@pytest.mark.parametrize("name,module,shape", POOL_CASES, ids=[c[0] for c in POOL_CASES])
def test_pooling(name, module, shape):
    check_lowering(module, (torch.randn(shape),), case=name)


REDUCE_CASES = [
    ("mean_neg_dim", Fn(lambda x: x.mean(-1)), (2, 3, 6)),
    ("mean_all", Fn(lambda x: x.mean()), (3, 4, 5)),
    ("mean_unit_dim", Fn(lambda x: x.mean(1)), (3, 1, 5)),
    ("sum_dims", Fn(lambda x: x.sum((0, 2))), (2, 3, 4, 5)),
    ("sum_keepdim_neg", Fn(lambda x: x.sum(-2, keepdim=True)), (3, 7, 2)),
    ("amax_dims", Fn(lambda x: x.amax((1, 2))), (2, 3, 4, 5)),
    ("amin_keepdim", Fn(lambda x: x.amin(-1, keepdim=True)), (3, 8)),
    ("min_dim_keepdim", Fn(lambda x: torch.min(x, 2, keepdim=True)[0]), (2, 3, 4)),
    ("max_all", Fn(lambda x: x.max()), (3, 5)),
    ("var_unbiased", Fn(lambda x: x.var(1)), (2, 6, 3)),
    ("var_mean", Fn(lambda x: torch.var_mean(x, (1, 2))), (2, 4, 5)),
    ("any_dim", Fn(lambda x: (x > 0.5).any(1)), (3, 4, 5)),
    ("all_dims", Fn(lambda x: (x > -1.5).all()), (3, 4)),
    ("softmax_last", nn.Softmax(-1), (2, 3, 8)),
    ("softmax_large", Fn(lambda x: torch.softmax(x * 50, 0)), (6, 4)),
    ("log_softmax", nn.LogSoftmax(-1), (3, 10)),
]


@pytest.mark.parametrize("name,module,shape", REDUCE_CASES, ids=[c[0] for c in REDUCE_CASES])
def test_reductions(name, module, shape):
    check_lowering(module, (torch.randn(shape),), case=name)


NORM_CASES = [
    ("batchnorm2d_noaffine", _randomized_bn(3, affine=False), (1, 3, 4, 4)),
    ("batchnorm1d_2d", _randomized_bn(5, nn.BatchNorm1d), (3, 5)),
    ("batchnorm1d_3d", _randomized_bn(4, nn.BatchNorm1d), (2, 4, 6)),
    ("batchnorm_batch_stats", nn.BatchNorm2d(3, track_running_stats=False), (2, 3, 4, 4)),
    ("layernorm_last", _randomized(nn.LayerNorm(8)), (2, 5, 8)),
    ("layernorm_two_dims", _randomized(nn.LayerNorm([4, 6])), (2, 3, 4, 6)),
    ("layernorm_noaffine", nn.LayerNorm(7, elementwise_affine=False, eps=1e-3), (3, 7)),
    ("groupnorm_3d", _randomized(nn.GroupNorm(3, 6)), (2, 6, 5)),
    ("groupnorm_layer", nn.GroupNorm(1, 4, affine=False), (1, 4, 3, 3)),
    ("rmsnorm", _randomized(nn.RMSNorm(8)), (2, 3, 8)),
]


@pytest.mark.parametrize("name,module,shape", NORM_CASES, ids=[c[0] for c in NORM_CASES])
def test_normalization(name, module, shape):
    check_lowering(module, (torch.randn(shape),), case=name)


# After an NHWC convolution, each of these must run in NHWC too: only the boundary TRANSPOSEs remain
# (one into the conv, one back to NCHW for the graph output, none when the output has a single non-1 dim).
NHWC_CASES = [
    ("conv_avgpool_pad", nn.Sequential(_conv(), nn.AvgPool2d(3, 2, 1)), 2),
    ("conv_adaptive_2x2", nn.Sequential(_conv(), nn.AdaptiveAvgPool2d(2)), 2),
    ("conv_bn_relu_pool", nn.Sequential(_conv(), _randomized_bn(6), nn.ReLU(), nn.MaxPool2d(2)), 2),
    ("conv_global_pool_flatten", nn.Sequential(_conv(), nn.AdaptiveAvgPool2d(1), nn.Flatten()), 1),
    ("conv_sum_channels", nn.Sequential(_conv(), Fn(lambda x: x.sum(1, keepdim=True))), 1),
    ("conv_softmax_channels", nn.Sequential(_conv(), nn.Softmax(1)), 2),
    ("conv_log_softmax_w", nn.Sequential(_conv(), nn.LogSoftmax(-1)), 2),
    ("conv_groupnorm", nn.Sequential(_conv(), _randomized(nn.GroupNorm(3, 6))), 2),
    ("conv_instancenorm", nn.Sequential(_conv(), nn.InstanceNorm2d(6, affine=True)), 2),
    ("conv_var_hw", nn.Sequential(_conv(), Fn(lambda x: x.var((2, 3), keepdim=True))), 1),
]


@pytest.mark.parametrize("name,module,transposes", NHWC_CASES, ids=[c[0] for c in NHWC_CASES])
def test_after_conv_stays_nhwc(name, module, transposes):
    result = check_lowering(module, (torch.randn(1, 3, 8, 8),), case=name)
    ops = result.report.delegates[0].ops
    assert ops.get("TRANSPOSE", 0) == transposes, ops


def test_inference_batch_norm_after_conv_folds_into_its_weights():
    """conv -> batch norm with constant statistics is one CONV2D: scale and shift fold into its weights."""
    result = check_lowering(nn.Sequential(_conv(), _randomized_bn(6)), (torch.randn(1, 3, 6, 6),), case="bn")
    ops = result.report.delegates[0].ops
    assert ops.get("CONV2D") == 1 and "MUL" not in ops and "ADD" not in ops, ops
    assert ops.get("TRANSPOSE", 0) == 2, ops


def test_standalone_inference_batch_norm_is_mul_add():
    """Without a conv in front, constant statistics still fold at compile time: one MUL and one ADD."""
    result = check_lowering(_randomized_bn(6), (torch.randn(1, 6, 5, 5),), case="bn_alone")
    ops = result.report.delegates[0].ops
    assert ops.get("MUL", 0) == 1 and ops.get("ADD", 0) == 1, ops
    assert not any(op.startswith("REDUCE") or op == "RSQRT" for op in ops), ops


def test_global_average_is_one_op():
    """adaptive_avg_pool2d(1) arrives as mean.dim. After an (NHWC) convolution it is one AVG_POOL2D;
    on an NCHW input H and W are adjacent, so one REDUCE_SUM over them (and a MUL), no TRANSPOSE."""
    result = check_lowering(nn.AdaptiveAvgPool2d(1), (torch.randn(1, 4, 6, 6),), case="gap")
    ops = result.report.delegates[0].ops
    assert ops.get("REDUCE_SUM", 0) == 1 and ops.get("MUL", 0) == 1 and "TRANSPOSE" not in ops, ops
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
    result = check_lowering(model, (torch.randn(2, 3, 9, 7),), case="conv_gap")
    ops = result.report.delegates[0].ops
    assert ops.get("AVG_POOL2D", 0) == 1 and not any(op.startswith("REDUCE") for op in ops), ops


UNSUPPORTED_CASES = [
    ("maxpool_indices_used", Fn(lambda x: torch.nn.functional.max_pool2d(x, 2, return_indices=True)[1].float()),
     (1, 2, 4, 4), "only the first output is lowered"),
    ("adaptive_max_too_many_windows", nn.AdaptiveMaxPool2d((65, 2)), (1, 1, 100, 5), "beyond 64 windows"),
    ("sum_int", Fn(lambda x: (x > 0).sum(1)), (2, 5), "needs the INT profile"),
]


@pytest.mark.parametrize("name,module,shape,reason", UNSUPPORTED_CASES, ids=[c[0] for c in UNSUPPORTED_CASES])
def test_unsupported_stays_on_cpu(name, module, shape, reason):
    result = check_lowering(module, (torch.randn(shape),), case=name, expect_full=False)
    reasons = [c.reason for c in result.report.cpu_nodes]
    assert any(reason in r for r in reasons), result.report
