"""Tests for .pte files on the host: `list_delegates` and the one execution path.

A .pte runs only through executorch.runtime (`run_program` -> `pte_runtime`); its delegate payloads
are read with `arm_tosa_core.pte_delegates.list_delegates`. Delegated programs use a test-only
backend whose processed bytes are a tiny JSON program of add/mul ops: the runtime has no backend
for it, which the error must say.
"""

from __future__ import annotations

import json

import executorch.kernels.quantized  # noqa: F401  (out variants to_executorch needs for q/dq ops)
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines quantized_decomposed ops)
from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower
from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program
from executorch.exir._serialize._program import _get_extended_header
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.schema import DataLocation
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from arm_tosa_core.errors import ReferenceModelError
from arm_tosa_core.pte_delegates import DelegateInfo, list_delegates
from arm_tosa_core.reference import run_delegate, run_program

ATOL = 1e-5


def _inputs(*shapes):
    gen = torch.Generator().manual_seed(0)
    return tuple(torch.randn(*s, generator=gen) for s in shapes)


def _pte(model, args, partitioner=None, extract_delegate_segments=True) -> bytes:
    ep = torch.export.export(model.eval(), args)
    edge = to_edge(ep) if partitioner is None else to_edge_transform_and_lower(ep, partitioner=[partitioner])
    config = ExecutorchBackendConfig(extract_delegate_segments=extract_delegate_segments)
    return edge.to_executorch(config).buffer


# ---- CPU-only programs on the runtime path ------------------------------------------------------
class ConvChannelsLast(torch.nn.Module):
    """Weights and activations in channels-last dim order (constants stored as NHWC bytes)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1).to(memory_format=torch.channels_last)

    def forward(self, x):
        return self.conv(x.to(memory_format=torch.channels_last)).relu()


class QDQ(torch.nn.Module):
    def forward(self, x):
        q = torch.ops.quantized_decomposed.quantize_per_tensor(x * 2.0, 0.05, 3, -128, 127, torch.int8)
        d = torch.ops.quantized_decomposed.dequantize_per_tensor(q, 0.05, 3, -128, 127, torch.int8)
        return d + 1.0


def test_pte_path_matches_eager(tmp_path):
    model, args = ConvChannelsLast().eval(), _inputs((1, 3, 6, 6))
    pte = _pte(model, args)
    got = run_program(pte, args, None)
    assert got.shape == (1, 4, 6, 6) and torch.allclose(got, model(*args), atol=ATOL)
    path = tmp_path / "conv.pte"
    path.write_bytes(pte)  # a path takes the same route
    assert torch.equal(run_program(path, args, run_delegate), got)


def test_qdq_really_quantizes_on_the_runtime():
    args = _inputs((3, 8))
    got = run_program(_pte(QDQ().eval(), args), args, None)
    steps = (got - 1.0 - 3 * -0.05) / 0.05  # dequantized values sit on the int8 grid
    assert torch.allclose(steps, steps.round(), atol=1e-3)
    assert not torch.allclose(got, args[0] * 2.0 + 1.0, atol=1e-3)


# ---- delegation ------------------------------------------------------------------------------
_TEST_OPS = {exir_ops.edge.aten.add.Tensor: "add", exir_ops.edge.aten.mul.Tensor: "mul"}
_SPECS = [CompileSpec("flavour", b"json-v1")]


class PteDelegatesTestBackend(BackendDetails):
    """Test-only backend: processed bytes are a JSON list of the partition's add/mul ops."""

    @staticmethod
    def preprocess(edge_program, compile_specs):
        prog = {"inputs": [], "ops": [], "outputs": []}
        for node in edge_program.graph_module.graph.nodes:
            if node.op == "placeholder":
                prog["inputs"].append(node.name)
            elif node.op == "call_function":
                operands = [a.name if isinstance(a, torch.fx.Node) else a for a in node.args]
                prog["ops"].append([_TEST_OPS[node.target], node.name, operands])
            elif node.op == "output":
                prog["outputs"] = [a.name for a in node.args[0]]
        return PreprocessResult(processed_bytes=json.dumps(prog).encode())


class _AddMulSupport(OperatorSupportBase):
    def is_node_supported(self, submodules, node):
        return node.op == "call_function" and node.target in _TEST_OPS


class PteDelegatesTestPartitioner(Partitioner):
    def partition(self, exported_program):
        partitions = CapabilityBasedPartitioner(
            exported_program.graph_module, _AddMulSupport(), allows_single_node_partition=True
        ).propose_partitions()
        tags = {}
        for partition in partitions:
            tag = f"pte_delegates_test_{partition.id}"
            for node in partition.nodes:
                node.meta["delegation_tag"] = tag
            tags[tag] = DelegationSpec(PteDelegatesTestBackend.__name__, _SPECS)
        return PartitionResult(exported_program, tags)


class TwoDelegates(torch.nn.Module):
    """Two partitions with CPU work between."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1, 1, 12))

    def forward(self, x, y):
        a = x.reshape(-1) * 2.0 + self.w
        b = torch.relu(a).view(3, 4)
        return b * y, a


@pytest.mark.parametrize("segments", [True, False], ids=["segments", "inline"])
def test_list_delegates_finds_payloads_inline_and_in_segments(segments):
    model, args = TwoDelegates().eval(), _inputs((3, 4), (3, 4))
    pte = _pte(model, args, PteDelegatesTestPartitioner(), extract_delegate_segments=segments)
    header = _get_extended_header(pte)
    raw = _flatbuffer_to_program(pte[: header.program_size])
    locations = {d.processed.location for d in raw.execution_plan[0].delegates}
    assert locations == {DataLocation.SEGMENT if segments else DataLocation.INLINE}

    delegates = list_delegates(pte)
    assert [d.index for d in delegates] == [0, 1]
    assert all(isinstance(d, DelegateInfo) for d in delegates)
    assert {d.backend_id for d in delegates} == {"PteDelegatesTestBackend"}
    assert [[op[0] for op in json.loads(d.processed)["ops"]] for d in delegates] == [
        ["mul", "add"],
        ["mul"],
    ]
    assert [(s.key, s.value) for s in delegates[0].compile_specs] == [("flavour", b"json-v1")]


def test_unregistered_backend_and_custom_runner_are_clear_errors():
    model, args = TwoDelegates().eval(), _inputs((3, 4), (3, 4))
    pte = _pte(model, args, PteDelegatesTestPartitioner())
    with pytest.raises(ReferenceModelError, match=r"\['PteDelegatesTestBackend'\], which no backend"):
        run_program(pte, args, None)
    with pytest.raises(ValueError, match="pass the lowered program"):
        run_program(pte, args, lambda *_: [], caller="run_somewhere")


def test_not_a_pte_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="not an ExecuTorch .pte"):
        list_delegates(b"definitely not a flatbuffer")
    junk = tmp_path / "junk.pte"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(ValueError, match="not an ExecuTorch .pte"):
        list_delegates(junk)
