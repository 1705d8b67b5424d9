"""vela maps our INT residual add/sub to a single NPU elementwise op and the global average to a
reduction without extra rescaling steps: asserted on vela's per-layer report (not on timing).

Unfused, each int8 -> int32 RESCALE of an add's operands would be its own NPU layer (an Add and a
Mul) and the RESCALE after it another Mul; vela folds them only for the operand scaling that
`arm_tosa_core.ops.elementwise.add_sub_factors` produces.
"""

import functools
from collections import Counter

import arm_ethosu_test_flow as flow
import pytest
import torch
from torch import nn

from arm_ethosu import EthosUCompileSpec, ethosu_report
from arm_tosa_core import run_on_reference_model
from arm_tosa_core.testing import FnModule as Fn


class Residual(nn.Module):
    """conv -> relu6 -> conv, plus the block input (MobileNetV2's residual), then x + x and a sub."""

    def __init__(self) -> None:
        super().__init__()
        self.expand, self.project = nn.Conv2d(8, 16, 1), nn.Conv2d(16, 8, 1)

    def forward(self, x, y):
        z = self.project(torch.clamp(self.expand(x), 0, 6)) + x
        return (z + z) - y


CASES = {
    "residual": (Residual(), [(1, 8, 10, 10), (1, 8, 10, 10)], {"Add": 2, "Sub": 1}),
    # a16w8: int16 operands at TFLite's int16 scaling (2^14 units per code); any other leaves each
    # RESCALE a Mul/Add pass of its own on U55 (an int16 residual add cost 5.3x its int8 form)
    "residual_a16w8": (Residual(), [(1, 8, 10, 10), (1, 8, 10, 10)], {"Add": 2, "Sub": 1}),
    "gap": (nn.Sequential(nn.Conv2d(3, 32, 3), nn.ReLU6(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(32, 10)), [(1, 3, 9, 9)], {}),
    "mean_then_add": (Fn(lambda s, x: s.c(x).mean((2, 3)) + s.l(x.flatten(1)), c=nn.Conv2d(2, 4, 1),
                         l=nn.Linear(2 * 4 * 4, 4)), [(1, 2, 4, 4)], {"Add": 1}),
}


@functools.cache
def _layers(name):
    module, shapes, _ = CASES[name]
    gen = torch.Generator().manual_seed(0)
    inputs = tuple(torch.randn(s, generator=gen) for s in shapes)
    spec = EthosUCompileSpec("ethos-u55-128").include_host_graph()
    # the target's own quantizer: on U55 a global average keeps its own qparams (a REDUCE_SUM)
    quantized = flow.quantize_mixed(module.eval(), inputs, spec, None if name.endswith("a16w8") else ())
    edge = flow.lower(quantized, inputs, spec)
    (part,) = ethosu_report(edge).partitions
    return quantized, inputs, edge, part.layers


@pytest.mark.parametrize("name", list(CASES))
def test_elementwise_ops_fold_their_rescales(name):
    quantized, inputs, edge, layers = _layers(name)
    assert flow.cpu_compute(edge) == {}
    original = Counter(row["Original Operator"] for row in layers)
    npu_ops = Counter(row["NNG Operator"] for row in layers)
    # no RESCALE is left as a layer of its own: each is folded into a convolution, add or sub
    assert "Rescale" not in original and "Mul" not in npu_ops, [
        (row["Name"], row["Original Operator"], row["NNG Operator"]) for row in layers]
    for op, count in CASES[name][2].items():
        assert original[op] == count and npu_ops[op] == count, (op, original, npu_ops)
    assert all(row["Target"] == "NPU" for row in layers)
    # and the graph vela compiled computes what the quantized model does: bit for bit in int8; in
    # int16 within one output step (the integer ADD rounds once where fake-quant rounds in float)
    out = run_on_reference_model(edge, *inputs)
    with torch.no_grad():
        expected = quantized(*inputs)
    if name.endswith("a16w8"):
        (result,) = [n for n in quantized.graph.nodes if n.op == "output"][0].args[0]
        step = float(result.args[1])  # the output dequantize's scale: compare integer codes
        codes_apart = (torch.round(out / step) - torch.round(expected / step)).abs().max()
        assert int(codes_apart) <= 1, int(codes_apart)
    else:
        assert torch.equal(out, expected)


def test_global_average_is_at_most_two_layers():
    """The spatial mean (one REDUCE_SUM over H*W): a TRANSPOSE to the channel axis and one reduction,
    where summing H then W took two of each plus a zero-point subtraction."""
    *_, layers = _layers("gap")
    reduce_rows = [(row["Name"], row["NNG Operator"]) for row in layers if row["Original Operator"] == "ReduceSum"]
    assert 1 <= len(reduce_rows) <= 2 and not any(op == "Sub" for _, op in reduce_rows), reduce_rows
