"""The graphs we emit are valid for the profile their spec names, checked by tosa-opt's strict
validation (arm_tosa_core.profile_check), not only runnable on the reference model.

TOSA 1.0's FP profile has int32 only for index arithmetic (ADD/SUB/MUL, casts to and from float,
gather indices): other int32 operators stay on the CPU under "TOSA-1.0+FP", with a reason.
"""

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from arm_quantizer import TOSAQuantizer, get_symmetric_quantization_config
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report
from arm_tosa_core.builder import DType, Op, TosaGraphBuilder
from arm_tosa_core.example_models import get_example
from arm_tosa_core.profile_check import target_env, validate_tosa
from arm_tosa_core.testing import FnModule, check_lowering, lower

FP, INT = "TOSA-1.0+FP", "TOSA-1.0+INT"
torch.manual_seed(0)


def _one_op(op: Op, in_dtypes: list, out_dtype, *attr) -> bytes:
    """A graph of one operator on (2, 3) inputs."""
    b = TosaGraphBuilder()
    ins = [b.input((2, 3), d, f"in{i}") for i, d in enumerate(in_dtypes)]
    b.output(b.op(op, ins, (4, 3) if op == Op.CONCAT else (2, 3), out_dtype, *attr))
    return b.serialize()


def _problems(directory: Path, spec: str) -> list[str]:
    graphs = sorted(directory.glob("*.tosa"))
    assert graphs, f"no partition was written to {directory}"
    return [f"{g.name}: {p}" for g in graphs for p in validate_tosa(g, spec)]


def _partitioner(spec: str, directory: Path) -> TOSAPartitioner:
    return TOSAPartitioner(TosaCompileSpec(spec).dump_intermediate_artifacts_to(directory))


# -- (a) the validator can fail --------------------------------------------------------------------
def test_validator_flags_int32_comparison_without_the_int_profile():
    graph = _one_op(Op.GREATER, [DType.INT32, DType.INT32], DType.BOOL)
    problems = validate_tosa(graph, FP)
    assert len(problems) == 1 and "tosa.greater" in problems[0] and "pro_int" in problems[0], problems
    assert validate_tosa(graph, INT) == [] and validate_tosa(graph, "TOSA-1.0+FP+INT") == []


def test_validator_flags_float_ops_without_the_fp_profile(tmp_path):
    graph = _one_op(Op.ADD, [DType.FP32, DType.FP32], DType.FP32)
    assert any("tosa.add" in p and "pro_fp" in p for p in validate_tosa(graph, INT))
    (tmp_path / "g.tosa").write_bytes(graph)
    assert validate_tosa(tmp_path / "g.tosa", FP) == []  # a path works as well as bytes


def test_extensions_come_from_the_spec():
    # int16 data movement is PRO-INT; an int16 TABLE (513 entries, int32 out) is EXT-INT16
    assert validate_tosa(_one_op(Op.CONCAT, [DType.INT16, DType.INT16], DType.INT16, 0), INT) == []
    b = TosaGraphBuilder()
    table = b.const(np.zeros(513, np.int16), DType.INT16)
    b.output(b.op(Op.TABLE, [b.input((2, 3), DType.INT16, "in0"), table], (2, 3), DType.INT32))
    graph = b.serialize()
    assert any("tosa.table" in p and "int16" in p for p in validate_tosa(graph, INT))
    assert validate_tosa(graph, "TOSA-1.0+INT+int16") == []
    assert target_env("TOSA-1.0+INT+int16+u55") == \
        "specification_version=1.0 profiles=pro_int extensions=int16 level=8k"
    assert target_env("TOSA-1.0+FP+INT") == "specification_version=1.0 profiles=pro_fp,pro_int level=8k"


def test_unreadable_graphs_are_reported():
    problems = validate_tosa(b"not a tosa graph", FP)
    assert len(problems) == 1 and problems[0].startswith("tosa-opt failed") and "TOSA" in problems[0]
    with pytest.raises(FileNotFoundError, match="no TOSA flatbuffer"):
        validate_tosa(Path("/nonexistent/g.tosa"), FP)


# -- (b) example models under the FP profile -------------------------------------------------------
@pytest.mark.parametrize("name,size", [("mobilenet_v2", 32), ("resnet18", 32), ("deit_tiny_block", 8),
                                       ("llama_block", 8)])
def test_example_models_are_valid_for_pro_fp(name, size, tmp_path):
    model, inputs = get_example(name).build(seed=0, input_size=size)
    edge = lower(model, inputs, _partitioner(FP, tmp_path))
    assert not partition_report(edge).cpu_nodes, partition_report(edge)
    assert _problems(tmp_path, FP) == []


# -- (c) quantized graphs under the INT profile ----------------------------------------------------
def _quantized(module: nn.Module, inputs: tuple):
    quantizer = TOSAQuantizer(TosaCompileSpec(INT)).set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(module.eval(), inputs).module(), quantizer)
    prepared(*inputs)
    return convert_pt2e(prepared)


_CNN = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                     nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.Hardswish(), nn.AdaptiveAvgPool2d(1),
                     nn.Flatten(), nn.Linear(8, 4))
_ATTENTION = FnModule(lambda s, x: F.scaled_dot_product_attention(s.q(x), s.k(x), s.v(x)) + x,
                      q=nn.Linear(16, 16), k=nn.Linear(16, 16), v=nn.Linear(16, 16))
_NORM_SOFTMAX = FnModule(lambda s, x: F.softmax(s.ln(x), -1), ln=nn.LayerNorm(16))


@pytest.mark.parametrize("name,module,shape", [("cnn", _CNN, (1, 3, 16, 16)),
                                               ("attention", _ATTENTION, (1, 2, 8, 16)),
                                               ("layer_norm_softmax", _NORM_SOFTMAX, (2, 4, 16))],
                         ids=["cnn", "attention", "layer_norm_softmax"])
def test_quantized_graphs_are_valid_for_pro_int(name, module, shape, tmp_path):
    inputs = (torch.randn(shape),)
    edge = lower(_quantized(module, inputs), inputs, _partitioner(INT, tmp_path))
    compute_on_cpu = [c for c in partition_report(edge).cpu_nodes if "quantize" not in c.target]
    assert not compute_on_cpu, partition_report(edge)
    # RESCALEs round once (SINGLE_ROUND): no "doubleround" extension is needed
    assert _problems(tmp_path, INT) == []
    assert _problems(tmp_path, FP), "an int8 graph must not pass as FP-profile"


# -- (d) int32 beyond index arithmetic stays on the CPU under FP -----------------------------------
def _int_compare(s, x, y):
    k = (x * 4).int() + (y * 4).int()  # a cast from float and an int32 ADD: both in the FP profile
    return torch.where(k > 2, x, y)  # the int32 comparison is not


def test_int32_comparison_stays_on_cpu_under_fp_and_still_matches_eager(tmp_path):
    inputs = (torch.randn(2, 3, 4), torch.randn(2, 3, 4))
    result = check_lowering(FnModule(_int_compare), inputs, expect_full=False,
                            partitioner=_partitioner(FP, tmp_path))
    cpu = {c.target: c.reason for c in result.report.cpu_nodes}
    assert list(cpu) == ["aten.gt.Scalar"], result.report
    assert "needs the INT profile" in cpu["aten.gt.Scalar"] and f"under {FP} it runs on the CPU" in \
        cpu["aten.gt.Scalar"]
    assert any("ADD" in d.ops and "CAST" in d.ops for d in result.report.delegates), result.report
    assert _problems(tmp_path, FP) == []


def test_int32_comparison_is_delegated_when_the_spec_has_the_int_profile(tmp_path):
    inputs = (torch.randn(2, 3, 4), torch.randn(2, 3, 4))
    check_lowering(FnModule(_int_compare), inputs, partitioner=_partitioner("TOSA-1.0+FP+INT", tmp_path))
    assert _problems(tmp_path, "TOSA-1.0+FP+INT") == []


_INT_CASES = [
    ("int_view", lambda s, x: (x * 4).int().reshape(-1), "view"),
    ("int_maximum", lambda s, x: torch.maximum((x * 4).int(), (x * 2).int()), "maximum"),
    ("int_broadcast_add", lambda s, x: (x * 4).int() + (x[0] * 4).int(), "broadcasting"),
    ("bool_to_int", lambda s, x: (x > 0).int() + 1, "casting between bool"),
]


@pytest.mark.parametrize("name,fn,reason", _INT_CASES, ids=[c[0] for c in _INT_CASES])
def test_other_int32_operators_stay_on_cpu_under_fp(name, fn, reason, tmp_path):
    result = check_lowering(FnModule(fn), (torch.randn(2, 3, 4),), case=name, expect_full=False,
                            partitioner=_partitioner(FP, tmp_path))
    assert any(reason in c.reason and "INT profile" in c.reason for c in result.report.cpu_nodes), \
        result.report
    assert _problems(tmp_path, FP) == []


def test_masks_from_constant_indices_are_folded_and_stay_delegated(tmp_path):
    """A causal mask from arange compares int64 constants: folded at compile time, no int32 op."""
    causal = FnModule(lambda s, x: x.masked_fill(torch.arange(4)[None, :] > torch.arange(4)[:, None], -1e4))
    result = check_lowering(causal, (torch.randn(2, 4, 4),), partitioner=_partitioner(FP, tmp_path))
    assert "GREATER" not in result.report.delegates[0].ops and "SELECT" in result.report.delegates[0].ops
    assert _problems(tmp_path, FP) == []


def test_bool_equality_lowers_to_logical_ops(tmp_path):
    """TOSA's EQUAL takes no bool operands (the reference model refuses it): == and != on bool
    tensors become LOGICAL_XOR (and LOGICAL_NOT)."""
    module = FnModule(lambda s, a, b: ((a > 0) == (b > 0)) & ((a > 1) != (b < 0)))
    result = check_lowering(module, (torch.randn(3, 5), torch.randn(3, 5)),
                            partitioner=_partitioner(FP, tmp_path))
    assert result.report.delegates[0].ops.get("LOGICAL_XOR") == 2, result.report
    assert _problems(tmp_path, FP) == []
