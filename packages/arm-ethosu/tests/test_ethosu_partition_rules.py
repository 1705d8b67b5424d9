"""Per-family partition rules: an operator vela refuses for Ethos-U55/U65 stays on the CPU there
(with its reason), the rest of the model still compiles, and the numbers match the quantized model.
The same operator is delegated for Ethos-U85, and the TOSA graph holding it is checked to make vela
fail for U55 (so each rule is needed), which also catches a vela upgrade that lifts the limit."""

from dataclasses import dataclass

import arm_ethosu_test_flow as flow
import pytest
import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from executorch.exir.backend.operator_support import (
    DontPartition,
    DontPartitionModule,
    DontPartitionName,
)
from executorch.exir.dialects._ops import ops as exir_ops
from torch import nn

from arm_ethosu import (
    EthosUCompileSpec,
    VelaCompileError,
    compile_with_vela,
    ethosu_payloads,
    parse_binstream,
)
from arm_ethosu.constraints import RULES, transposable
from arm_tosa_core import partition_report, run_on_reference_model

torch.manual_seed(0)


class Compare(nn.Module):
    """Integer inputs, no quantization: GREATER is outside the U55/U65 operator set."""

    def forward(self, a, b):
        return (a > b).to(torch.int32) + a


def _int(*shape):
    return torch.randint(-5, 5, shape, dtype=torch.int32)


def _with_relus(op: nn.Module, cin: int, cout: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(cin, cin, 1), nn.ReLU(), op, nn.ReLU(), nn.Conv2d(cout, 4, 1))


@dataclass
class Case:
    model: nn.Module
    inputs: tuple
    op: str  # the aten op (as in node names) that U55/U65 keep on the CPU
    words: str  # what the reason says
    quantize: bool = True
    rest_delegated: bool = True  # False when every node touches the refused tensor


CASES = {
    "conv_stride_4": Case(_with_relus(nn.Conv2d(8, 8, 3, 4, 1), 8, 8), (torch.randn(1, 8, 17, 17),),
                          "convolution", "stride [4, 4]"),
    "depthwise_stride_4": Case(_with_relus(nn.Conv2d(8, 8, 3, 4, 1, groups=8), 8, 8),
                               (torch.randn(1, 8, 17, 17),), "convolution", "depthwise convolution stride"),
    "transpose_conv_stride_3": Case(_with_relus(nn.ConvTranspose2d(8, 8, 3, 3), 8, 8), (torch.randn(1, 8, 5, 5),),
                                    "convolution", "transposed convolution stride [3, 3]"),
    "avg_pool_stride_4": Case(_with_relus(nn.AvgPool2d(4, 4), 8, 8), (torch.randn(1, 8, 16, 16),),
                              "avg_pool2d", "depthwise convolution, which Ethos-U55/U65 allow up to stride 3"),
    "wide_transpose": Case(nn.Sequential(nn.Conv2d(2, 2, 1), nn.ReLU()), (torch.randn(1, 2, 1, 70000),),
                           "convolution", "too large for the Ethos-U55/U65 TRANSPOSE", rest_delegated=False),
    "int_compare": Case(Compare(), (_int(1, 4, 4), _int(1, 4, 4)), "gt", "EQUAL/GREATER", quantize=False),
}  # fmt: skip

_cache: dict = {}


def _case(name: str):
    """(quantized or float module, inputs, reference outputs): computed once per case."""
    if name not in _cache:
        case = CASES[name]
        module = flow.quantize(case.model, case.inputs) if case.quantize else case.model.eval()
        inputs = case.inputs
        with torch.no_grad():
            _cache[name] = (module, inputs, module(*inputs))
    return _cache[name]


def _lower(name: str, target: str, checks=None):
    module, inputs, _ = _case(name)
    spec = EthosUCompileSpec(target).include_host_graph()
    if CASES[name].quantize:
        return flow.lower(module, inputs, spec, checks)
    return to_edge_transform_and_lower(torch.export.export(module, inputs),
                                       partitioner=[flow.EthosUPartitioner(spec, checks)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))


def _check_numbers(name: str, edge) -> None:
    module, inputs, expected = _case(name)
    with torch.no_grad():
        out = run_on_reference_model(edge, *inputs)
    assert (out.double() - expected.double()).abs().max().item() <= 1e-6, name


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u65-256"])
@pytest.mark.parametrize("name", list(CASES))
def test_u55_u65_keep_op_on_cpu(name, target):
    if target == "ethos-u65-256" and name != "conv_stride_4":
        assert RULES["U65"] == RULES["U55"]  # the other cases run the same rules
        return
    edge = _lower(name, target)
    op, words = CASES[name].op, CASES[name].words
    cpu = flow.cpu_compute(edge)
    kept = {n: r for n, r in cpu.items() if op in n}
    assert kept, f"{name}: no {op} node on the CPU; CPU nodes: {cpu}"
    assert all(r.startswith(f"{target}: ") and words in r for r in kept.values()), kept
    if CASES[name].rest_delegated:
        assert ethosu_payloads(edge), f"{name}: the rest of the model was not delegated"
    _check_numbers(name, edge)


@pytest.mark.parametrize("name", list(CASES))
def test_u85_delegates_op_that_u55_vela_refuses(name):
    edge = _lower(name, "ethos-u85-256")
    assert flow.cpu_compute(edge) == {}
    payloads = ethosu_payloads(edge)
    assert len(payloads) == 1
    _check_numbers(name, edge)
    graph = parse_binstream(payloads[0]).extra["tosa_graph"]
    with pytest.raises(VelaCompileError, match="could not run on NPU"):
        compile_with_vela(graph, "ethos-u55-128")


def test_kernel_equal_stride_conv_stays_on_u55():
    """vela rewrites a stride-4 convolution whose kernel is 4x4 and unpadded: no rule needed."""
    model = nn.Sequential(nn.Conv2d(4, 8, 4, 4), nn.ReLU())
    inputs = (torch.randn(1, 4, 16, 16),)
    edge = flow.lower(flow.quantize(model, inputs), inputs, EthosUCompileSpec("ethos-u55-128"))
    assert flow.cpu_compute(edge) == {}


def test_avg_pool_with_excluded_padding_is_delegated_for_u55():
    """The core lowers INT average pooling as an explicitly padded all-ones DEPTHWISE_CONV2D (the
    window sums), a per-position int32 MUL and a RESCALE, never a padded AVG_POOL2D, so vela's U55
    kernel <= 8 limit on padded average pools does not apply: a 9x9 pool with excluded padding
    compiles whole, within 1 LSB of the quantized model."""
    model = _with_relus(nn.AvgPool2d(9, 1, 4, count_include_pad=False), 8, 8)
    inputs = (torch.randn(1, 8, 12, 12),)
    quantized = flow.quantize(model, inputs)
    edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u55-128").include_host_graph())
    assert flow.cpu_compute(edge) == {} and len(ethosu_payloads(edge)) == 1
    with torch.no_grad():
        out, expected = run_on_reference_model(edge, *inputs), quantized(*inputs)
    assert (out.double() - expected.double()).abs().max().item() <= flow.output_lsb(quantized) + 1e-6


def test_transposable_shapes():
    assert transposable((1, 3, 224, 224)) and transposable((1, 64, 300, 300))
    assert not transposable((1, 2, 1, 70000))
    assert not transposable((2, 3, 300, 300))  # N > 1: 300 * 300 > 2^16
    assert transposable((2, 3, 200, 200))


# -- DontPartition & co. -------------------------------------------------------------------------
def _three_convs():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 1, 1), nn.ReLU(),
                          nn.Conv2d(8, 4, 1))
    inputs = (torch.randn(1, 3, 8, 8),)
    return model, inputs


@pytest.fixture(scope="module")
def three_convs():
    model, inputs = _three_convs()
    quantized = flow.quantize(model, inputs)
    with torch.no_grad():
        return quantized, inputs, quantized(*inputs)


@pytest.mark.parametrize("check,excluded", [
    (lambda: DontPartition(exir_ops.edge.aten.convolution.default), 3),
    (lambda: DontPartitionModule(instance_name="2"), 1),
    (lambda: DontPartitionModule(module_name="ReLU"), 2),
    (lambda: DontPartitionName("aten_convolution_default_1"), 1),
])  # fmt: skip
def test_dont_partition_checks(three_convs, check, excluded):
    quantized, inputs, expected = three_convs
    checker = check()
    edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u55-128").include_host_graph(), [checker])
    cpu = flow.cpu_compute(edge)
    by_check = {n for n, r in cpu.items() if r == f"excluded by {type(checker).__name__}"}
    assert len(by_check) == excluded, cpu
    # what the excluded nodes compute with stays with them: no float value enters a partition
    assert all(r.startswith("it ") or r.startswith("excluded") for r in cpu.values()), cpu
    with torch.no_grad():
        out = run_on_reference_model(edge, *inputs)
    assert torch.equal(out, expected)


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_grouped_transposed_conv_stays_on_cpu(target):
    """The stream vela writes for a grouped transposed convolution computes another function than the
    graph on the NPU simulator (0.39 off): it stays on the CPU with that reason. Plain grouped and depthwise
    convolutions run on the NPU (the core rescales each group before the CONCAT)."""
    model = nn.Sequential(nn.Conv2d(4, 4, 1), nn.ReLU(), nn.Conv2d(4, 8, 3, padding=1, groups=2), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=8), nn.ReLU(),
                          nn.ConvTranspose2d(8, 6, 3, stride=2, groups=2), nn.ReLU(), nn.Conv2d(6, 4, 1))
    inputs = (torch.randn(1, 4, 9, 9),)
    module = flow.quantize(model, inputs)
    edge = flow.lower(module, inputs, EthosUCompileSpec(target).include_host_graph())
    cpu = flow.cpu_compute(edge)
    convs = {n: r for n, r in cpu.items() if n.startswith("aten_convolution")}
    assert len(convs) == 1 and all("grouped transposed convolution (2 groups)" in r for r in convs.values()), cpu
    assert ethosu_payloads(edge)
    with torch.no_grad():
        expected = module(*inputs)
        out = run_on_reference_model(edge, *inputs)
    assert (out.double() - expected.double()).abs().max().item() <= 1e-6


class _MinOverWidth(nn.Module):
    def __init__(self, keepdim: bool):
        super().__init__()
        self.conv, self.keepdim = nn.Conv2d(3, 4, 1), keepdim

    def forward(self, x):
        return torch.amin(self.conv(x), -1, keepdim=self.keepdim)


@pytest.mark.parametrize("keepdim", [False, True])
def test_min_dropping_a_spatial_axis_stays_on_cpu_for_u55(keepdim):
    """vela 5.2's stream for amin(x, -1) (REDUCE_MIN then the dropped axis) spreads each minimum over
    several outputs on the NPU simulator (2.2 off): it stays on the CPU on U55 with that reason; with
    keepdim=True (exact on the simulator) it is delegated."""
    inputs = (torch.randn(1, 3, 4, 5),)
    module = flow.quantize(_MinOverWidth(keepdim), inputs)
    edge = flow.lower(module, inputs, EthosUCompileSpec("ethos-u55-128").include_host_graph())
    kept = {n: r for n, r in flow.cpu_compute(edge).items() if n.startswith("aten_amin")}
    if keepdim:
        assert not kept, kept
    else:
        assert len(kept) == 1 and all("without keepdim" in r and "spreads each minimum" in r for r in kept.values()), kept
    assert ethosu_payloads(edge)
    with torch.no_grad():
        expected = module(*inputs)
        out = run_on_reference_model(edge, *inputs)
    assert (out.double() - expected.double()).abs().max().item() <= 1e-6


class _PlusArange(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x):
        return self.conv(x) + torch.arange(x.shape[-1])  # an int64 arange, promoted to float by the add


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_float_cast_of_a_constant_stays_on_cpu(target):
    """`y + torch.arange(n)`: the quantizer leaves the integer arange (folded into a buffer) unquantized, so
    the add runs in float on the CPU, and exir's cast of the buffer to float was a partition of its own
    whose float output made vela fail ("Invalid argument output", on every family). The cast stays on
    the CPU with the reason; the convolution before it still runs on the NPU."""
    inputs = (torch.randn(1, 3, 4, 5),)
    module = flow.quantize(_PlusArange(), inputs)
    edge = flow.lower(module, inputs, EthosUCompileSpec(target).include_host_graph())
    cpu = flow.cpu_compute(edge)
    casts = {n: r for n, r in cpu.items() if "to_dim_order_copy" in n or "to_copy" in n}
    assert casts and all("Ethos-U computes integers only" in r for r in casts.values()), cpu
    assert ethosu_payloads(edge)
    with torch.no_grad():
        expected = module(*inputs)
        out = run_on_reference_model(edge, *inputs)
    assert (out.double() - expected.double()).abs().max().item() <= 1e-6


class ConstantTableIndexed(nn.Module):
    """LeViT's attention biases: a parameter table indexed by a constant index buffer, added to a
    runtime value."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)
        self.table = nn.Parameter(torch.randn(4, 6))
        self.register_buffer("idx", torch.tensor([[0, 5, 2, 2, 1], [3, 3, 4, 0, 5], [1, 2, 3, 4, 5]]))

    def forward(self, x):
        return self.conv(x) + self.table[:, self.idx]


def test_indexing_a_constant_table_is_folded_for_u55():
    """x[:, idx] with x and idx constants is computed at compile time, so the U55/U65 GATHER rule does not
    apply: the whole model is one partition with no GATHER, bit-exact against the quantized model (before:
    the index and its quantize/dequantize stayed on the CPU, 11 times in LeViT-128S)."""
    inputs = (torch.randn(1, 4, 3, 5),)
    quantized = flow.quantize(ConstantTableIndexed(), inputs)
    edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u55-128").include_host_graph())
    assert flow.cpu_compute(edge) == {}
    (payload,) = ethosu_payloads(edge)
    from arm_ethosu.backend import tosa_graph_of
    from arm_tosa_core.tosa_inspect import tosa_op_counts

    assert "GATHER" not in tosa_op_counts(tosa_graph_of(payload))
    with torch.no_grad():
        assert torch.equal(run_on_reference_model(edge, *inputs), quantized(*inputs))


class _GatherOfTheInput(torch.nn.Module):
    """torch.gather of a runtime input at a constant index (the op sweep's `gather const index`)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("index", torch.tensor([[2, 0], [1, 1]]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, 1, self.index)


def test_gather_of_an_input_stays_on_cpu_for_u55_and_runs_on_u85():
    """torch.gather lowers to TOSA GATHER, which vela refuses on U55/U65 ("Non-passthrough operation (Gather) could
    not run on NPU"): before, the partitioner claimed it there and `to_edge_transform_and_lower` raised
    VelaCompileError. It stays on the CPU with the reason now; U85 runs it, bit-exact."""
    inputs = (torch.randn(2, 4),)
    quantized = flow.quantize(_GatherOfTheInput().eval(), inputs)
    edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u55-128"))
    reasons = {c.name: c.reason for c in partition_report(edge).cpu_nodes}
    assert any("gather lowers to TOSA GATHER" in r for r in reasons.values()), reasons
    edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u85-256").include_host_graph())
    assert flow.cpu_compute(edge) == {}
    with torch.no_grad():
        assert torch.equal(run_on_reference_model(edge, *inputs), quantized(*inputs))
