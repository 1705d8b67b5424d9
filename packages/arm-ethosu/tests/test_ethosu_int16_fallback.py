"""int16 only where it lowers (arm_quantizer.int16_fallback): a LayerNorm + softmax block under
a16w8 keeps at int8 the ops whose int16 TABLE the partitioner leaves on the CPU (LayerNorm's rsqrt,
softmax's reciprocal: more than 1 LSB off for these qparams), so the a16w8 model has the all-int8
model's CPU nodes and one partition, and its SQNR vs float still beats int8's. The lowered program
runs on the TOSA reference model against `run_exactly` (the converted model with exact
quantize/dequantize arithmetic)."""

from __future__ import annotations

import arm_ethosu_test_flow as flow
import pytest
import torch
from torch import nn
from tosa.DType import DType

from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer, ethosu_payloads
from arm_ethosu.backend import tosa_graph_of
from arm_quantizer import (
    TOSAQuantizer,
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
    output_sqnr,
    run_exactly,
)
from arm_quantizer.int16_fallback import KEPT_INT8_META
from arm_quantizer.mixed_precision import quantize_with_overrides
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report, run_on_reference_model

TARGETS = ("ethos-u85-256", "TOSA-1.0+INT+int16")


class _Block(nn.Module):
    """LayerNorm -> linear -> softmax -> linear (the norm and the attention weights of a transformer)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm, self.fc, self.out = nn.LayerNorm(16), nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.softmax(self.fc(self.norm(x)), -1))


def _target(name: str):
    """(quantizer factory, partitioner) of a target: an Ethos-U one or a plain TOSA spec."""
    if name.startswith("ethos-u"):
        spec = EthosUCompileSpec(name).include_host_graph()
        return (lambda: EthosUQuantizer(spec)), EthosUPartitioner(spec)
    spec = TosaCompileSpec(name)
    return (lambda: TOSAQuantizer(spec).set_global(get_symmetric_quantization_config())), TOSAPartitioner(spec)


def _lower(quantized, inputs, partitioner):
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    return to_edge_transform_and_lower(torch.export.export(quantized, inputs), partitioner=[partitioner],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))


@pytest.mark.parametrize("target", TARGETS)
def test_a16w8_keeps_int8_where_its_int16_table_stays_on_the_cpu(target):
    torch.manual_seed(0)
    model = _Block().eval()
    gen = torch.Generator().manual_seed(1)
    calibration = [(torch.randn(1, 8, 16, generator=gen),) for _ in range(6)]
    evaluation = [(torch.randn(1, 8, 16, generator=gen),) for _ in range(4)]
    inputs = calibration[0]
    make_quantizer, partitioner = _target(target)
    a16w8 = {"": get_symmetric_a16w8_quantization_config()}

    plain = quantize_with_overrides(model, inputs, calibration, make_quantizer)  # no target check
    int8, wide = plain({}), plain(a16w8)
    cpu8 = flow.cpu_compute(_lower(int8, inputs, partitioner))
    cpu_wide = flow.cpu_compute(_lower(wide, inputs, partitioner))
    # what the mechanism is for: plain a16w8 leaves int16 TABLEs on the CPU that int8 does not
    assert not cpu8, cpu8
    assert any("int16 TABLE" in r for r in cpu_wide.values()), cpu_wide

    fitted = quantize_with_overrides(model, inputs, calibration, make_quantizer, partitioner)(a16w8)
    kept = fitted.meta[KEPT_INT8_META]
    ops = {str(n.target).split(".")[-2] for n in fitted.graph.nodes if n.name in kept}
    assert ops >= {"rsqrt", "reciprocal"}, kept
    # the linears stay int16 on Ethos-U85 too (their output RESCALE has a 16-bit multiplier there, which
    # regor stores exactly: EthosUCompileSpec.int16_fc_rescale16); they were set back to int8 before
    assert all("int16 TABLE" in r for r in kept.values()), kept
    edge = _lower(fitted, inputs, partitioner)
    report = partition_report(edge)
    assert flow.cpu_compute(edge) == cpu8 and len(report.delegates) == 1, report
    if target.startswith("ethos-u"):
        (payload,) = ethosu_payloads(edge)
        assert {DType.INT16, DType.INT8} <= flow.tensor_dtypes(tosa_graph_of(payload))

    db8, db_wide, db_fitted = (output_sqnr(q, evaluation) for q in (int8, wide, fitted))
    print(f"{target}: int8 {db8:.2f} dB, a16w8 {db_wide:.2f} dB (CPU: {sorted(cpu_wide)}), "
          f"a16w8 where it lowers {db_fitted:.2f} dB (int8: {sorted(kept)})")
    assert db_fitted >= db8 + 3.0, (db8, db_fitted)
    # the lowered program computes what the converted model does
    # rounded: a float32 output of ~32767 codes carries ~0.002 LSB of its own rounding
    lsb = round(max(((run_on_reference_model(edge, *s) - run_exactly(fitted, *s)).abs().max()
                     / flow.output_lsb(fitted)).item() for s in evaluation), 2)
    print(f"{target}: lowered vs run_exactly {lsb:.2f} LSB")
    assert lsb <= 1.0, lsb  # measured 1.00 on both targets
