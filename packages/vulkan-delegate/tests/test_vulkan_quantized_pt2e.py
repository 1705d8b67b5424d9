"""PT2E / torchao q/dq linear graphs (the form ExecuTorch's documented Vulkan flow produces) lowered to
the integer kernels with the weights kept as packed integers. Graphs built here: by hand with the
quantized_decomposed ops (torchao's 8da4w form: per-token asymmetric activations, grouped 4-bit or
per-channel 8-bit weights), and through torchao's prepare_pt2e/convert_pt2e with an annotator of our own
(per-channel 8-bit weights, dynamic per-tensor activations). Numerics vs the eager q/dq model: 1e-2
where the delegate quantizes activations (torch computes per-token scales in float64, the shader in
float32, so an element may land on the neighbouring int8 value), else 1e-4."""

from __future__ import annotations

import csv

import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines the quantized_decomposed ops)
import torch.nn.functional as F
from torch import nn

from arm_tosa_core.testing import compare_outputs
from vulkan_delegate import partition_report, run_on_vulkan
from vulkan_delegate.runtime import clear_method_cache

qd = torch.ops.quantized_decomposed
DYNAMIC_TOL = 1e-2


def rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    """max |y - ref| / max |ref|, NaN-aware (inf where one side is NaN/inf and the other is not)."""
    c = compare_outputs(y.float(), ref.float())
    return c.max_error / max(c.max_magnitude, 1e-12)


class DqLinear(nn.Module):
    """A linear in q/dq form: int8 weights (values in [-8, 7] for 4 bits) dequantized per channel or per
    group; activations dynamically quantized per token; `also_read`: the dequantized activations are
    also an output (read by something other than the linear)."""

    def __init__(self, k: int, n: int, bits: int, group: int | None, weight_zero_point: int = 0,
                 also_read: bool = False) -> None:
        super().__init__()
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        self.register_buffer("qw", torch.randint(lo, hi + 1, (n, k), dtype=torch.int8))
        scales = torch.rand(n, k // group) if group else torch.rand(n)
        self.register_buffer("ws", scales * 0.02 + 0.001)
        self.register_buffer("wzp", torch.full(scales.shape, weight_zero_point, dtype=torch.int64))
        self.bias = nn.Parameter(torch.randn(n), requires_grad=False)
        self.group, self.range, self.also_read = group, (lo, hi), also_read

    def forward(self, x):
        s, zp = qd.choose_qparams_per_token_asymmetric(x, torch.int8)
        xq = qd.quantize_per_token(x, s, zp, -128, 127, torch.int8)
        xdq = qd.dequantize_per_token(xq, s, zp, -128, 127, torch.int8, torch.float32)
        if self.group:
            w = qd.dequantize_per_channel_group(self.qw, self.ws, self.wzp, *self.range, torch.int8, self.group,
                                                torch.float32)
        else:
            w = qd.dequantize_per_channel(self.qw, self.ws, self.wzp, 0, *self.range, torch.int8)
        y = F.linear(xdq, w, self.bias)
        return (y, xdq) if self.also_read else y


def shaders_run(pte: bytes, x: torch.Tensor, tmp_path, monkeypatch):
    """(outputs, the shaders the program dispatched), from the per-dispatch profile."""
    profile = tmp_path / "profile.csv"
    monkeypatch.setenv("VKDG_PROFILE", str(profile))
    clear_method_cache()
    y = run_on_vulkan(pte, x)
    clear_method_cache()
    return y, {row["shader"].rsplit("_", 1)[0] for row in csv.DictReader(profile.open())}


@pytest.mark.parametrize("bits,group", [(4, 16), pytest.param(8, None, marks=pytest.mark.slow)])
def test_dq_linear_runs_in_integers(vk_lower, tmp_path, monkeypatch, bits, group):
    """Per-token dynamic activations x 4-bit grouped / 8-bit per-channel weights: fully delegated, the
    integer kernel runs, the payload holds packed integer weights (less than fp16 would take)."""
    torch.manual_seed(bits)
    k, n = 128, 64
    m = DqLinear(k, n, bits, group).eval()
    x = torch.randn(2, 3, k)
    edge = vk_lower(m, (x,))
    report = partition_report(edge)
    assert not report.cpu_nodes, str(report)
    assert report.delegates[0].payload_bytes < n * k * 2, report.delegates[0].payload_bytes  # < fp16 weights
    y, shaders = shaders_run(edge.to_executorch().buffer, x, tmp_path, monkeypatch)
    assert {"quantize_rows", "linear_qi_dot"} <= shaders or {"quantize_rows", "linear_qi"} <= shaders, shaders
    assert "matmul" not in shaders, shaders
    assert rel_err(y, m(x)) <= DYNAMIC_TOL


def test_dequantized_activations_read_elsewhere_are_computed(vk_lower):
    """The dequantized activations are also an output: computed (quantize_rows + dequantize_rows), not
    the float input passed through."""
    torch.manual_seed(1)
    m = DqLinear(40, 8, 4, 8, also_read=True).eval()
    x = torch.randn(3, 40)
    edge = vk_lower(m, (x,))
    assert not partition_report(edge).cpu_nodes, str(partition_report(edge))
    y, xdq = run_on_vulkan(edge.to_executorch(), x)
    ref_y, ref_xdq = m(x)
    assert rel_err(xdq, ref_xdq) <= DYNAMIC_TOL and rel_err(y, ref_y) <= DYNAMIC_TOL
    assert rel_err(xdq, x) > 1e-4  # it is the quantized value, not x


def test_asymmetric_weights_run_in_float(vk_lower):
    """A nonzero weight zero point (seen only in the values; the partitioner may get fake weights):
    lowered as a float matmul of the dequantized weights and activations, no exception, right outputs."""
    torch.manual_seed(2)
    m = DqLinear(32, 8, 8, None, weight_zero_point=3).eval()
    x = torch.randn(4, 32)
    edge = vk_lower(m, (x,))
    assert not partition_report(edge).cpu_nodes, str(partition_report(edge))
    assert rel_err(run_on_vulkan(edge.to_executorch(), x), m(x)) <= DYNAMIC_TOL


def test_foreign_dequantize_stays_on_cpu_with_reason(vk_lower):
    """dequantize_per_token of int8 values the delegate did not quantize (a model input): not the chain
    the delegate computes, so it stays on the CPU with the reason; the linear still runs on the GPU."""

    class Foreign(nn.Module):
        def forward(self, xq, s, zp):
            return qd.dequantize_per_token(xq, s, zp, -128, 127, torch.int8, torch.float32) * 2.0

    xq = torch.randint(-128, 128, (3, 16), dtype=torch.int8)
    s, zp = torch.rand(3, 1, dtype=torch.float64) * 0.1, torch.zeros(3, 1, dtype=torch.int64)
    report = partition_report(vk_lower(Foreign(), (xq, s, zp)))
    assert any("dequantize_per_token" in c.target and "per-token dynamic q/dq chain" in c.reason
               for c in report.cpu_nodes), str(report)


def _pt2e_dynamic_linear(model: nn.Module, x: torch.Tensor) -> nn.Module:
    """torchao PT2E with our own annotator: each linear's weight int8 per-channel symmetric, its input
    int8 dynamic per tensor (the scheme of ExecuTorch's Vulkan PT2E flow)."""
    from torchao.quantization.pt2e import PerChannelMinMaxObserver, PlaceholderObserver
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.quantization.pt2e.quantizer import (
        QuantizationAnnotation,
        QuantizationSpec,
        Quantizer,
    )

    act = QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_affine,
                           is_dynamic=True, observer_or_fake_quant_ctr=PlaceholderObserver.with_args(eps=2**-12))
    weight = QuantizationSpec(dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=torch.per_channel_symmetric,
                              ch_axis=0, observer_or_fake_quant_ctr=PerChannelMinMaxObserver)

    class DynamicLinearAnnotator(Quantizer):
        def annotate(self, gm):
            for node in gm.graph.nodes:
                if node.op == "call_function" and node.target == torch.ops.aten.linear.default:
                    node.meta["quantization_annotation"] = QuantizationAnnotation(
                        input_qspec_map={node.args[0]: act, node.args[1]: weight}, _annotated=True)
            return gm

        def validate(self, gm):
            pass

    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), DynamicLinearAnnotator())
    prepared(x)
    return convert_pt2e(prepared)


def test_pt2e_dynamic_per_tensor_linear_keeps_integer_weights(vk_lower):
    """torchao PT2E output (dequantize_per_channel weights, choose_qparams.tensor dynamic activations):
    the per-tensor activation q/dq stays on the CPU with its reason, the linear runs on the GPU as
    linear_q with the int8 weights (payload far below the float weights), numerics as eager."""
    torch.manual_seed(3)
    k, n = 128, 64
    model = nn.Sequential(nn.Linear(k, n)).eval()
    x = torch.randn(4, k)
    qmodel = _pt2e_dynamic_linear(model, x)
    edge = vk_lower(qmodel, (x,))
    report = partition_report(edge)
    assert len(report.delegates) == 1 and report.delegates[0].payload_bytes < n * k + 4096, str(report)
    assert any("choose_qparams" in str(r) for r in report.cpu_nodes), str(report)
    assert rel_err(run_on_vulkan(edge.to_executorch(), x), qmodel(x)) <= 1e-4
