"""Quantized avg_pool2d over every window form (issue 9): ceil_mode, count_include_pad, padding and
divisor_override. Windows of one size and windows that differ in size (ceil_mode overhang,
count_include_pad=False with padding) all lower fully and stay within 1 LSB of `run_exactly` (the exact
evaluation of the PT2E quantized module); the FP lowering matches eager PyTorch."""

import itertools

import pytest
import torch
import torch.nn.functional as F
from quant_harness import output_scales, quantize

from arm_quantizer import run_exactly
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report, run_on_reference_model
from arm_tosa_core.testing import FnModule as Fn
from arm_tosa_core.testing import lower, max_relative_error

# (kernel, stride, input shape): 3/2 on 8x8 leaves a ceil_mode overhang; 2/2 on 7x6 too, on one axis
WINDOWS = [(3, 2, (1, 3, 8, 8)), (2, 2, (2, 2, 7, 6))]
CASES = [
    (k, s, shape, ceil, include, pad, div)
    for (k, s, shape), ceil, include, pad, div in itertools.product(
        WINDOWS, (False, True), (True, False), (0, 1), (None, 3))
]


def _module(k, s, ceil, include, pad, div):
    return Fn(lambda self, a: F.avg_pool2d(a, k, s, pad, ceil_mode=ceil, count_include_pad=include,
                                           divisor_override=div))


def _id(case):
    k, s, shape, ceil, include, pad, div = case
    return f"k{k}s{s}-ceil{int(ceil)}-incl{int(include)}-pad{pad}-div{div}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_int_avg_pool2d_within_one_lsb(case):
    k, s, shape, ceil, include, pad, div = case
    x = torch.randn(shape, generator=torch.Generator().manual_seed(7)) * 3
    converted = quantize(_module(k, s, ceil, include, pad, div), (x,))
    expected = run_exactly(converted, x.clone())
    edge = lower(converted, [x.clone()], TOSAPartitioner(TosaCompileSpec("TOSA-1.0+INT")))
    report = partition_report(edge)
    compute = [c for c in report.cpu_nodes if "quantize" not in c.target]
    assert not compute, f"not fully delegated:\n{report}"
    out = run_on_reference_model(edge, x.clone())
    err, _ = max_relative_error(out, expected)
    scale = max(output_scales(converted))
    assert err <= scale * 1.0001, f"{err / scale:.2f} LSB\n{report}"


@pytest.mark.parametrize("case", CASES[::5], ids=[_id(c) for c in CASES[::5]])
def test_fp_avg_pool2d_matches_eager(case):
    k, s, shape, ceil, include, pad, div = case
    x = torch.randn(shape, generator=torch.Generator().manual_seed(7))
    module = _module(k, s, ceil, include, pad, div)
    edge = lower(module, [x.clone()], TOSAPartitioner(TosaCompileSpec("TOSA-1.0+FP")))
    assert not partition_report(edge).cpu_nodes
    torch.testing.assert_close(run_on_reference_model(edge, x.clone()), module(x), rtol=1e-5, atol=1e-5)
