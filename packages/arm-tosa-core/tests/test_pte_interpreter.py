"""Tests for arm_tosa_core.pte_interpreter: .pte programs run on the host.

Each program is exported -> to_edge -> to_executorch() and run three ways: eager PyTorch, the
interpreter, and ExecuTorch's own runtime (pybindings). Delegated programs use a test-only backend
whose processed bytes are a tiny JSON program of add/mul ops, executed by the test's runner.
"""

from __future__ import annotations

import functools
import json

import executorch.kernels.quantized  # noqa: F401  (out variants to_executorch needs for q/dq ops)
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines quantized_decomposed ops)
from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower
from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program
from executorch.exir._serialize._program import (
    _get_extended_header,
    deserialize_pte_binary,
    serialize_pte_binary,
)
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.schema import DataLocation
from executorch.runtime import Runtime
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase
from torch.library import Library, impl, register_fake

from arm_tosa_core.pte_interpreter import DelegateInfo, list_delegates, run_pte

ATOL = 1e-5


# ---- models ------------------------------------------------------------------------------------
class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class Mul(torch.nn.Module):
    def forward(self, x, y):
        return x * y * 0.5


class Conv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


class ConvChannelsLast(torch.nn.Module):
    """Weights and activations in channels-last dim order (constants stored as NHWC bytes)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last)

    def forward(self, x):
        return self.conv(x.to(memory_format=torch.channels_last)).relu()


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(x)


class Permute(torch.nn.Module):
    def forward(self, x):
        return x.permute(0, 2, 1) * 2.0


class Cat(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y, x], dim=1)


class Softmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class Mixed(torch.nn.Module):
    """Conv, linear, permute, reshape (an elided view), cat, softmax, and a view of an input."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.fc = torch.nn.Linear(6, 5)

    def forward(self, x, y):
        z = self.fc(self.conv(x) + 1.0)
        z = z.permute(0, 2, 1, 3).reshape(1, -1)
        return torch.softmax(torch.cat([z, z * 2], dim=1), dim=-1), y.view(-1)


class Cond(torch.nn.Module):
    """torch.cond becomes JumpFalseCall and MoveCall instructions."""

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: t + 1.0, lambda t: t * 3.0, (x,))


class QDQ(torch.nn.Module):
    """A quantize/dequantize pair left on the CPU, between float ops."""

    def forward(self, x):
        q = torch.ops.quantized_decomposed.quantize_per_tensor.default(
            x * 2.0, 0.05, 3, -128, 127, torch.int8
        )
        d = torch.ops.quantized_decomposed.dequantize_per_tensor.default(
            q, 0.05, 3, -128, 127, torch.int8
        )
        return d + 1.0


def _inputs(*shapes):
    gen = torch.Generator().manual_seed(0)
    return tuple(torch.randn(*s, generator=gen) for s in shapes)


FP_CASES = {
    "add": (Add, _inputs((2, 3), (2, 3))),
    "mul": (Mul, _inputs((4, 5), (4, 5))),
    "conv": (Conv, _inputs((1, 3, 8, 8))),
    "conv_channels_last": (ConvChannelsLast, _inputs((1, 3, 6, 6))),
    "linear": (Linear, _inputs((3, 8))),
    "permute": (Permute, _inputs((2, 3, 4))),
    "cat": (Cat, _inputs((2, 3), (2, 4))),
    "softmax": (Softmax, _inputs((3, 7))),
    "mixed": (Mixed, _inputs((1, 3, 8, 8), (2, 3))),
    "cond_true": (Cond, (torch.ones(4),)),
    "cond_false": (Cond, (-torch.ones(4),)),
    "qdq": (QDQ, _inputs((3, 8))),
}


def _pte(model, args, partitioner=None, extract_delegate_segments=True) -> bytes:
    ep = torch.export.export(model.eval(), args)
    if partitioner is None:
        edge = to_edge(ep)
    else:
        edge = to_edge_transform_and_lower(ep, partitioner=[partitioner])
    config = ExecutorchBackendConfig(extract_delegate_segments=extract_delegate_segments)
    return edge.to_executorch(config).buffer


@functools.cache
def _case(case: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], bytes]:
    """Model, inputs and .pte of FP_CASES[case], built once per session."""
    model_cls, args = FP_CASES[case]
    model = model_cls().eval()
    return model, args, _pte(model, args)


def _no_delegates(*_args):
    raise AssertionError("this program has no delegates")


def _as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


@pytest.mark.parametrize("case", sorted(FP_CASES))
def test_matches_eager_and_executorch_runtime(case):
    model, args, pte = _case(case)
    got = run_pte(pte, args, _no_delegates)
    eager = _as_tuple(model(*args))
    runtime = Runtime.get().load_program(pte).load_method("forward").execute(list(args))
    assert len(got) == len(eager) == len(runtime)
    for g, e, r in zip(got, eager, runtime, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        assert torch.allclose(g, e, atol=ATOL), f"{case}: max err vs eager {(g - e).abs().max()}"
        assert torch.allclose(g, r, atol=ATOL), f"{case}: max err vs runtime {(g - r).abs().max()}"


class DynamicBatch(torch.nn.Module):
    """A dynamic batch dim: sym_size, et_view and resized (DYNAMIC_BOUND) planned tensors."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = self.fc(x).relu()
        return y.reshape(-1) * x.shape[0], torch.cat([y, y], 0)


@pytest.mark.parametrize("batch", [3, 10])
def test_dynamic_shapes_below_and_at_the_bound(batch):
    model = DynamicBatch().eval()
    example = _inputs((6, 8))
    dims = ({0: torch.export.Dim("batch", max=10)},)
    ep = torch.export.export(model, example, dynamic_shapes=dims)
    pte = to_edge(ep).to_executorch().buffer
    args = _inputs((batch, 8))
    got = run_pte(pte, args, _no_delegates)
    runtime = Runtime.get().load_program(pte).load_method("forward").execute(list(args))
    for g, e, r in zip(got, model(*args), runtime, strict=True):
        assert g.shape == e.shape
        assert torch.allclose(g, e, atol=ATOL) and torch.allclose(g, r, atol=ATOL)


def test_qdq_really_quantizes():
    _, args, pte = _case("qdq")
    (got,) = run_pte(pte, args, _no_delegates)
    steps = (got - 1.0 - 3 * -0.05) / 0.05  # dequantized values sit on the int8 grid
    assert torch.allclose(steps, steps.round(), atol=1e-3)
    assert not torch.allclose(got, args[0] * 2.0 + 1.0, atol=1e-3)


def test_channels_last_constant_is_stored_in_dim_order():
    program = deserialize_pte_binary(_case("conv_channels_last")[2]).program
    constants = [v.val for v in program.execution_plan[0].values if hasattr(v.val, "dim_order")]
    # The weight is a constant stored in NHWC order, so reading it must honour dim_order.
    assert any(t.data_buffer_idx > 0 and list(t.dim_order) == [0, 2, 3, 1] for t in constants)


def test_accepts_a_path(tmp_path):
    model, args, pte = _case("linear")
    path = tmp_path / "linear.pte"
    path.write_bytes(pte)
    (got,) = run_pte(path, args, _no_delegates)
    assert torch.allclose(got, model(*args), atol=ATOL)


# A custom op whose out variant has a schema but no kernel: the interpreter must fall back to the
# functional overload and copy its result into the planned out tensor.
_LIB = Library("pte_interp_test", "DEF")
_LIB.define("scale_shift(Tensor x, float s) -> Tensor")
_LIB.define("scale_shift.out(Tensor x, float s, *, Tensor(a!) out) -> Tensor(a!)")


@impl(_LIB, "scale_shift", "CompositeExplicitAutograd")
def _scale_shift(x, s):
    return x * s + 1.0


@register_fake("pte_interp_test::scale_shift")
def _scale_shift_fake(x, s):
    return torch.empty_like(x)


@register_fake("pte_interp_test::scale_shift.out")
def _scale_shift_out_fake(x, s, *, out):
    return out


class CustomOp(torch.nn.Module):
    def forward(self, x):
        return torch.ops.pte_interp_test.scale_shift(x, 3.0) - x


def test_out_variant_without_kernel_uses_functional_overload():
    model, args = CustomOp().eval(), _inputs((2, 5))
    pte = _pte(model, args)
    ops = [o.name for o in deserialize_pte_binary(pte).program.execution_plan[0].operators]
    assert "pte_interp_test::scale_shift" in ops
    (got,) = run_pte(pte, args, _no_delegates)
    assert torch.allclose(got, model(*args), atol=ATOL)


# ---- delegation ------------------------------------------------------------------------------
_TEST_OPS = {exir_ops.edge.aten.add.Tensor: "add", exir_ops.edge.aten.mul.Tensor: "mul"}
_SPECS = [CompileSpec("flavour", b"json-v1")]


class PteInterpTestBackend(BackendDetails):
    """Test-only backend: processed bytes are a JSON list of the partition's add/mul ops."""

    @staticmethod
    def preprocess(edge_program, compile_specs):
        prog = {"inputs": [], "ops": [], "outputs": []}
        for node in edge_program.graph_module.graph.nodes:
            if node.op == "placeholder":
                prog["inputs"].append(node.name)
            elif node.op == "call_function":
                assert not node.kwargs, node.kwargs
                operands = [a.name if isinstance(a, torch.fx.Node) else a for a in node.args]
                prog["ops"].append([_TEST_OPS[node.target], node.name, operands])
            elif node.op == "output":
                prog["outputs"] = [a.name for a in node.args[0]]
        return PreprocessResult(processed_bytes=json.dumps(prog).encode())


class _AddMulSupport(OperatorSupportBase):
    def is_node_supported(self, submodules, node):
        return node.op == "call_function" and node.target in _TEST_OPS


class PteInterpTestPartitioner(Partitioner):
    def partition(self, exported_program):
        partitions = CapabilityBasedPartitioner(
            exported_program.graph_module, _AddMulSupport(), allows_single_node_partition=True
        ).propose_partitions()
        tags = {}
        for partition in partitions:
            tag = f"pte_interp_test_{partition.id}"
            for node in partition.nodes:
                node.meta["delegation_tag"] = tag
            tags[tag] = DelegationSpec(PteInterpTestBackend.__name__, _SPECS)
        return PartitionResult(exported_program, tags)


def _json_runner(calls):
    def run(backend_id, processed, compile_specs, inputs):
        calls.append((backend_id, [(s.key, s.value) for s in compile_specs]))
        prog = json.loads(processed)
        env = dict(zip(prog["inputs"], inputs, strict=True))
        for op, out, operands in prog["ops"]:
            a, b = (env[x] if isinstance(x, str) else x for x in operands)
            env[out] = a + b if op == "add" else a * b
        return [env[name] for name in prog["outputs"]]

    return run


class TwoDelegates(torch.nn.Module):
    """Two partitions with CPU work between; constants and an elided view feed the first."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1, 1, 12))

    def forward(self, x, y):
        a = x.reshape(-1) * 2.0 + self.w
        b = torch.relu(a).view(3, 4)
        return b * y, a


class ViewIntoDelegate(torch.nn.Module):
    """The delegate's last input is an elided view whose value id sits right before its output."""

    def forward(self, x, y):
        return y * torch.relu(x).reshape(3, 4)


@pytest.mark.parametrize("segments", [True, False], ids=["segments", "inline"])
def test_delegate_calls_go_to_the_runner(segments):
    model, args = TwoDelegates().eval(), _inputs((3, 4), (3, 4))
    pte = _pte(model, args, PteInterpTestPartitioner(), extract_delegate_segments=segments)
    header = _get_extended_header(pte)
    raw = _flatbuffer_to_program(pte[: header.program_size])
    locations = {d.processed.location for d in raw.execution_plan[0].delegates}
    assert locations == {DataLocation.SEGMENT if segments else DataLocation.INLINE}

    calls = []
    got = run_pte(pte, args, _json_runner(calls))
    for g, e in zip(got, model(*args), strict=True):
        assert torch.allclose(g, e, atol=ATOL), (g - e).abs().max()
    assert calls == [("PteInterpTestBackend", [("flavour", b"json-v1")])] * 2

    delegates = list_delegates(pte)
    assert [d.index for d in delegates] == [0, 1]
    assert all(isinstance(d, DelegateInfo) for d in delegates)
    assert {d.backend_id for d in delegates} == {"PteInterpTestBackend"}
    assert [[op[0] for op in json.loads(d.processed)["ops"]] for d in delegates] == [
        ["mul", "add"],
        ["mul"],
    ]
    assert [(s.key, s.value) for s in delegates[0].compile_specs] == [("flavour", b"json-v1")]


def test_elided_view_as_last_delegate_input():
    model, args = ViewIntoDelegate().eval(), _inputs((12,), (3, 4))
    pte = _pte(model, args, PteInterpTestPartitioner())
    (got,) = run_pte(pte, args, _json_runner([]))
    assert torch.allclose(got, model(*args), atol=ATOL)


def test_runner_returning_wrong_output_count_is_reported():
    model, args = ViewIntoDelegate().eval(), _inputs((12,), (3, 4))
    pte = _pte(model, args, PteInterpTestPartitioner())
    with pytest.raises(RuntimeError, match="returned 2 outputs; the program expects 1"):
        run_pte(pte, args, lambda *_: [torch.zeros(3, 4)] * 2)


# ---- bad input ------------------------------------------------------------------------------
def test_not_a_pte_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="not an ExecuTorch .pte"):
        run_pte(b"definitely not a flatbuffer", [], _no_delegates)
    junk = tmp_path / "junk.pte"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(ValueError, match="not an ExecuTorch .pte"):
        list_delegates(junk)


def test_unknown_operator_names_the_operator():
    _, args, pte = _case("add")
    pte_file = deserialize_pte_binary(pte)
    ops = pte_file.program.execution_plan[0].operators
    assert [o.name for o in ops] == ["aten::add"]
    ops[0].name = "pte_interp_missing::frobnicate"
    broken = bytes(serialize_pte_binary(pte_file))
    with pytest.raises(NotImplementedError, match="pte_interp_missing::frobnicate.out"):
        run_pte(broken, args, _no_delegates)


def test_wrong_inputs_are_value_errors():
    _, args, pte = _case("add")
    with pytest.raises(ValueError, match="takes 2 inputs, 1 were given"):
        run_pte(pte, args[:1], _no_delegates)
    with pytest.raises(ValueError, match="dtype torch.float64"):
        run_pte(pte, [a.double() for a in args], _no_delegates)
    with pytest.raises(ValueError, match=r"shape \(3, 3\)"):
        run_pte(pte, [torch.zeros(3, 3), args[1]], _no_delegates)
    with pytest.raises(ValueError, match="no method 'backward'"):
        run_pte(pte, args, _no_delegates, method="backward")
