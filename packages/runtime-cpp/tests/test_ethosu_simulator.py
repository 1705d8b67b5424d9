"""EthosUBackend runs the deployable Ethos-U payload (vela's command stream and weights, no host
graph) on its Ethos-U55/U65 simulator: outputs equal the TOSA reference model's on the same TOSA
graph bit for bit, runs are byte-identical, a stream with an operation the simulator lacks is
refused naming the command (or runs its host graph when it has one), and a malformed stream is an
Error naming the command and its offset.

The default session runs the tiny model on both targets and a small block of every op kind
MobileNetV2/ResNet use on ethos-u55-128; `nox -s test-full` (marked slow) runs MobileNetV2 and
ResNet18 (about 100 s each to quantize and compile here), the DeiT-tiny and Llama blocks (layer
norm's channel sums, softmax and activation LUTs) on both targets.
"""

from __future__ import annotations

import re
import struct
from dataclasses import replace

import pytest
import runtime_cpp_test_programs as progs
import torch
from executorch.runtime import Runtime
from torch import nn

import runtime_cpp  # noqa: F401  (registers the backends)
from arm_ethosu import (
    build_binstream,
    parse_binstream,
)
from arm_tosa_core import partition_report, run_on_reference_model
from arm_tosa_core.example_models import get_example

TARGETS = ("ethos-u55-128", "ethos-u65-256")
SET_OFM_BASE0 = 0x4010  # cmd1 NPU_SET_OFM_BASE0
SET_WEIGHT_LENGTH = 0x4021  # cmd1 NPU_SET_WEIGHT_LENGTH
SET_ACTIVATION = 0x0125  # cmd0 NPU_SET_ACTIVATION


def _method(pte: bytes):
    program = Runtime.get().load_program(pte)
    return program, program.load_method("forward")


def _stream_words(cmd_data: bytes) -> tuple[list[int], int]:
    """The cmd_data words and the index where the register command stream starts (after the
    driver header: COP1, Config + 2 words, NOPs, the CmdStream tag)."""
    words = list(struct.unpack(f"<{len(cmd_data) // 4}I", cmd_data))
    i = 1
    while words[i] & 0xFF != 2:
        i += 3 if words[i] & 0xFF == 1 else 1
    return words, i + 1


def _patch_cmd1(stream, code: int, data: int):
    """Set the payload word of the first cmd1 command `code` in the stream."""
    words, i = _stream_words(stream.cmd_data)
    while words[i] & 0xFFFF != code:
        i += 2 if words[i] & 0x4000 else 1
    words[i + 1] = data
    return replace(stream, cmd_data=struct.pack(f"<{len(words)}I", *words))


@pytest.mark.parametrize("target", TARGETS)
def test_deployable_pte_runs_on_the_simulator_bit_exactly(target):
    edge = progs.ethosu_edge(0, target)
    _program, method = _method(progs.deployable_pte(edge))
    for seed in range(3):
        torch.manual_seed(seed)
        x = torch.randn(progs.INPUT) * (1 + seed)
        (got,) = method.execute([x])
        expected = run_on_reference_model(edge, x)
        assert got.dtype == expected.dtype and torch.equal(got, expected), (
            f"max abs diff {(got - expected).abs().max().item()}")
        (again,) = method.execute([x])
        assert again.numpy().tobytes() == got.numpy().tobytes()  # byte-identical reruns


class _GroupedConvs(nn.Module):
    """Grouped convolutions with per-channel weight scales: plain, dilated with a ReLU, and a grouped
    conv1d (reshaped around its CONCAT)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(4, 8, 1), nn.Conv2d(8, 8, 3, groups=2), nn.ReLU(),
                                  nn.Conv2d(8, 12, 3, padding=2, dilation=2, groups=4))
        self.conv1d = nn.Conv1d(12, 8, 3, padding=1, groups=2)

    def forward(self, x):
        return self.conv1d(self.body(x).mean(2))


@pytest.mark.parametrize("target", [*TARGETS, "ethos-u85-256"])
def test_grouped_conv_on_the_npu_is_bit_exact(target):
    """vela fused the one per-channel RESCALE after a grouped conv's CONCAT into every group's CONV with
    the first group's multipliers (group 1 up to 8 LSB off); with each group rescaled before the CONCAT
    the deployable stream equals the reference model bit for bit, and the convolutions are on the NPU."""
    torch.manual_seed(0)
    x = torch.randn(1, 4, 9, 9)
    edge = progs.ethosu_lower(_GroupedConvs().eval(), (x,), target)
    assert not [c for c in partition_report(edge).cpu_nodes if "convolution" in c.name]
    _program, method = _method(progs.deployable_pte(edge))
    for seed in range(2):
        torch.manual_seed(seed + 1)
        xi = torch.randn(1, 4, 9, 9) * (1 + seed)
        (got,) = method.execute([xi])
        expected = run_on_reference_model(edge, xi)
        assert torch.equal(got, expected), f"max abs diff {(got - expected).abs().max().item()}"


class _Block(nn.Module):
    """Strided conv, depthwise, pointwise with a residual add, max pool, global average pool, a
    linear layer and a sigmoid (an 8-bit LUT): the op kinds of MobileNetV2 and ResNet18 in one
    small partition."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, groups=16), nn.ReLU())
        self.pw = nn.Conv2d(16, 16, 1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        x = self.pool(self.pw(self.dw(x)) + x)
        return torch.sigmoid(self.fc(torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)))


def test_op_mix_block_bit_exact_against_the_reference_model():
    torch.manual_seed(0)
    inputs = (torch.randn(1, 3, 16, 16),)
    edge = progs.ethosu_lower(_Block().eval(), inputs, "ethos-u55-128")
    _program, method = _method(progs.deployable_pte(edge))
    (got,) = method.execute(list(inputs))
    expected = run_on_reference_model(edge, *inputs)
    assert torch.equal(got, expected), f"max abs diff {(got - expected).abs().max().item()}"



class _GlobalPools(nn.Module):
    """The two global average pools of torchvision's models after a conv + ReLU: an adaptive pool to
    1x1 over 7x7 (ResNet, SqueezeNet; an odd count) and a mean over H and W of a strided conv's 4x4
    (MobileNetV3's squeeze-excite; an even count, so ties occur)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.down = nn.Conv2d(8, 8, 3, 2, 1)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return torch.nn.functional.adaptive_avg_pool2d(y, 1), torch.relu(self.down(y)).mean((2, 3))


@pytest.mark.parametrize("shared", [True, False], ids=["input_qparams", "own_qparams"])
def test_global_average_pools_bit_exact_in_both_forms(shared):
    """With its input's qparams (EthosUQuantizer's choice on U85, forced here) a global average pool is
    one int8 AVG_POOL2D; with its own (the U55/U65 default: fewer NPU cycles under vela 5.2) an int32
    REDUCE_SUM and a RESCALE. On ethos-u55-128 both forms' command streams equal the reference model
    bit for bit. (The U85 simulator refuses regor's AVERAGE pool over more than one element: how
    that NPU divides is not modelled.)"""
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer
    from arm_tosa_core.tosa_inspect import tosa_op_counts

    torch.manual_seed(0)
    model, x = _GlobalPools().eval(), torch.randn(1, 3, 7, 7) * 2
    spec = EthosUCompileSpec("ethos-u55-128").include_host_graph()
    quantizer = EthosUQuantizer(spec)
    assert quantizer.global_average_shares_qparams is False  # the U55/U65 default
    quantizer.global_average_shares_qparams = shared
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    prepared(x)
    edge = to_edge_transform_and_lower(torch.export.export(convert_pt2e(prepared), (x,)),
                                       partitioner=[EthosUPartitioner(spec)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    (module,) = progs.lowered_modules(edge)
    ops = tosa_op_counts(parse_binstream(bytes(module.processed_bytes)).extra["tosa_graph"])
    assert (ops.get("AVG_POOL2D", 0), ops.get("REDUCE_SUM", 0)) == ((2, 0) if shared else (0, 2)), ops
    _program, method = _method(progs.deployable_pte(edge))
    for seed in range(2):
        torch.manual_seed(seed + 1)
        xi = torch.randn(1, 3, 7, 7) * (1 + seed)
        got = method.execute([xi])
        expected = run_on_reference_model(edge, xi)
        for g, e in zip(got, expected, strict=True):
            assert torch.equal(g, e), f"max abs diff {(g - e).abs().max().item()}"


def test_ethos_u65_512_two_cores_bit_exact_against_the_reference_model():
    """ethos-u65-512 runs two cores (PARALLEL_MODE 1): each convolution's OFM channels are
    interleaved between them, core 1 reading its own weight and scale streams (WEIGHT1_*, SCALE1_*),
    and the sigmoid's LUT sits at the top of the first core's shared buffer (CONFIG counts both)."""
    torch.manual_seed(0)
    inputs = (torch.randn(1, 3, 16, 16),)
    edge = progs.ethosu_lower(_Block().eval(), inputs, "ethos-u65-512")
    (module,) = progs.lowered_modules(edge)
    words, i = _stream_words(parse_binstream(bytes(module.processed_bytes)).cmd_data)
    weight1_lengths = []
    while i < len(words):
        if words[i] & 0xFFFF == 0x4091:  # cmd1 NPU_SET_WEIGHT1_LENGTH
            weight1_lengths.append(words[i + 1])
        i += 2 if words[i] & 0x4000 else 1
    assert any(n > 0 for n in weight1_lengths)  # the second core has weights of its own
    _program, method = _method(progs.deployable_pte(edge))
    for seed in range(2):
        torch.manual_seed(seed)
        x = torch.randn(inputs[0].shape) * (1 + seed)
        (got,) = method.execute([x])
        expected = run_on_reference_model(edge, x)
        assert torch.equal(got, expected), f"max abs diff {(got - expected).abs().max().item()}"

SIZES = {"mobilenet_v2": 32, "resnet18": 32, "deit_tiny_block": 8, "llama_block": 8}
MODEL_CASES = [(m, t) for m in SIZES for t in TARGETS]


@pytest.mark.slow
@pytest.mark.parametrize(("model_name", "target"), MODEL_CASES)
def test_in_repo_models_bit_exact_against_the_reference_model(model_name, target):
    model, inputs = get_example(model_name).build(seed=0, input_size=SIZES[model_name])
    edge = progs.ethosu_lower(model, inputs, target)
    _program, method = _method(progs.deployable_pte(edge))
    (got,) = method.execute(list(inputs))
    expected = run_on_reference_model(edge, *inputs)
    assert torch.equal(got, expected), f"max abs diff {(got - expected).abs().max().item()}"


def _patch_cmd0(stream, code: int, param: int):
    """Set the parameter of the first cmd0 command `code` in the stream."""
    words, i = _stream_words(stream.cmd_data)
    while words[i] & 0xFFFF != code:
        i += 2 if words[i] & 0x4000 else 1
    words[i] = (words[i] & 0xFFFF) | (param << 16)
    return replace(stream, cmd_data=struct.pack(f"<{len(words)}I", *words))


def test_stream_the_simulator_lacks_is_refused_or_runs_its_host_graph(capfd):
    # the hardware TANH activation (type 3; vela uses LUTs instead) is not simulated
    edge = progs.ethosu_edge(0, "ethos-u55-128")
    program = Runtime.get().load_program(
        progs.deployable_pte(edge, lambda s: _patch_cmd0(s, SET_ACTIVATION, 3)))
    with pytest.raises(RuntimeError, match="Failed to load method"):
        program.load_method("forward")
    err = capfd.readouterr().err
    assert re.search(r"NPU_OP_\w+ at cmd_data offset \d+: activation function 3", err)
    assert "--host-graph" in err
    # with the host graph the payload runs that graph on the TOSA reference model instead
    stream = parse_binstream(bytes(progs.lowered_modules(edge)[0].processed_bytes))
    with_graph = build_binstream(_patch_cmd0(stream, SET_ACTIVATION, 3), stream.extra)
    _program, method = _method(progs.pte_with_payload(edge, with_graph))
    x = torch.randn(progs.INPUT)
    (got,) = method.execute([x])
    assert torch.equal(got, run_on_reference_model(edge, x))


def test_malformed_command_streams_name_the_command_and_offset(capfd):
    edge = progs.ethosu_edge(0, "ethos-u55-128")
    x = torch.randn(progs.INPUT)

    def truncated(s):
        return replace(s, cmd_data=s.cmd_data[:-16])

    def unknown_opcode(s):
        words, i = _stream_words(s.cmd_data)
        words[i] = 0x0000_03F0  # a cmd0 opcode the register map does not define
        return replace(s, cmd_data=struct.pack(f"<{len(words)}I", *words))

    for edit, log in ((truncated, "truncated cmd_data: the CmdStream tag declares"),
                      (unknown_opcode, "unknown cmd0 opcode 0x3f0 at cmd_data offset")):
        program = Runtime.get().load_program(progs.deployable_pte(edge, edit))
        with pytest.raises(RuntimeError, match="Failed to load method"):
            program.load_method("forward")
        assert log in capfd.readouterr().err
    # addresses outside their region fail the call, not the process
    for edit, log in ((lambda s: _patch_cmd1(s, SET_OFM_BASE0, 0x7FFF_FF00),
                       "at cmd_data offset 288: an OFM address lies outside its (writable) region"),
                      (lambda s: _patch_cmd1(s, SET_WEIGHT_LENGTH, 16), "weight")):
        _program, method = _method(progs.deployable_pte(edge, edit))
        with pytest.raises(RuntimeError):
            method.execute([x])
        assert log in capfd.readouterr().err
    _program, method = _method(progs.deployable_pte(edge))
    (got,) = method.execute([x])
    assert torch.equal(got, run_on_reference_model(edge, x))


class _Add(nn.Module):
    def forward(self, a, b):
        return a + b


def test_add_rescaled_stream_computes_what_its_registers_say():
    """vela's stream for arm-ethosu's `add_rescaled` graph (two int8 inputs RESCALEd by x1024 (zero point
    2) and x512 (zero point -1), ADD, RESCALE by 2^-10 (zero point 1): a + b/2 + 1) is one ELEMENTWISE
    ADD with IFM_PRECISION scale mode 2 (IFM2 scaled by OPA_SCALE 512, shift 0), OPB_SCALE 1024 and
    OFM_SCALE 1 >> 10. In the 32-bit scale modes (1, 2) the NPU does not read OPB_SCALE: the unscaled
    operand is shifted left by 19, the fixed point vela's advanced add scaling assumes (its OPB_SCALE
    is 0 there) and the one that makes every model's ADD bit-exact here. So this stream computes
    a * 2^19 + b * 512 >> 10, not the graph's a * 1024 + b * 512 >> 10: the two agree only where a = 0.
    vela writes the 16-bit mode's second scale into a 32-bit-mode stream for this fused RESCALE form
    (to confirm on an FVP); the simulator follows the registers."""
    import importlib.util
    from pathlib import Path

    import numpy as np
    import tosa_reference_model as trm

    from arm_ethosu import compile_with_vela

    spec = importlib.util.spec_from_file_location(  # arm-ethosu's hand-written TOSA graphs
        "runtime_cpp_test_tosa_graphs", Path(__file__).parents[2] / "arm-ethosu" / "tests" / "tosa_graphs.py")
    graphs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(graphs)
    graph = graphs.add_rescaled(c=8)
    torch.manual_seed(0)
    wrapper = progs.ethosu_lower(_Add(), (torch.randn(1, 8, 4, 4), torch.randn(1, 8, 4, 4)))
    gm = wrapper.exported_program().graph_module
    quant = [n.args[1:3] for n in gm.graph.nodes if n.op == "call_function" and "quantize_per_tensor" in str(n.target)]
    (s0, z0), (s1, z1), (so, zo) = quant[0], quant[1], quant[-1]  # the inputs', the output's dequantize
    pte = progs.pte_with_payload(wrapper, build_binstream(compile_with_vela(graph, "ethos-u55-128")))
    _program, method = _method(pte)
    rng = np.random.default_rng(0)
    q0 = rng.integers(0, 5, (1, 4, 4, 8)).astype(np.int8)  # a = q0 - 2 in -2..2: a = 0 for a fifth
    q1 = rng.integers(-60, 60, (1, 4, 4, 8)).astype(np.int8)
    # the stream reads the delegate's input bytes as NHWC [1, 4, 4, 8]
    (got,) = method.execute([torch.tensor(((q0.astype(np.float64) - z0) * s0).reshape(1, 8, 4, 4), dtype=torch.float32),
                             torch.tensor(((q1.astype(np.float64) - z1) * s1).reshape(1, 8, 4, 4), dtype=torch.float32)])
    simulated = np.round(got.numpy().astype(np.float64) / so + zo).astype(np.int64).reshape(1, 4, 4, 8)
    a, b = q0.astype(np.int64) - 2, q1.astype(np.int64) + 1
    registers = np.clip(((a << 19) + b * 512 + (1 << 9) >> 10) + 1, -128, 127)  # natural rounding
    assert np.array_equal(simulated, registers)
    reference = np.asarray(trm.run(graph, [q0, q1])[0][0]).astype(np.int64)  # (outputs, status)
    assert np.array_equal(reference, np.clip(np.floor((a * 1024 + b * 512) / 1024 + 0.5) + 1, -128, 127))
    assert np.array_equal(simulated[a == 0], reference[a == 0]) and (simulated[a != 0] != reference[a != 0]).all()


SET_OFM_PRECISION = 0x0114  # cmd0 NPU_SET_OFM_PRECISION (bit 8: the global scale mode)
SET_OFM_SCALE = 0x4024  # cmd1 NPU_SET_OFM_SCALE
OP_POOL = 0x0005  # cmd0 NPU_OP_POOL (parameter 0: MAX)


def _max_pool_in_per_channel_mode_after_a_stale_scale(stream):
    """The stream with the last OFM_SCALE before its max pool set to 3 >> 1 and the pool's OFM_PRECISION
    switched to the per-channel scale mode: the registers vela's generator leaves for a max pool that
    follows an ADD (it writes OFM_SCALE for global-scale pools only)."""
    words, i = _stream_words(stream.cmd_data)
    scale = precision = None
    while not (words[i] & 0xFFFF == OP_POOL and words[i] >> 16 == 0):
        scale = i if words[i] & 0xFFFF == SET_OFM_SCALE else scale
        precision = i if words[i] & 0xFFFF == SET_OFM_PRECISION else precision
        i += 2 if words[i] & 0x4000 else 1
    words[scale] = (words[scale] & 0xFFFF) | (1 << 16)
    words[scale + 1] = 3
    words[precision] &= ~(1 << (16 + 8))
    return replace(stream, cmd_data=struct.pack(f"<{len(words)}I", *words))


def test_max_pool_in_per_channel_mode_ignores_a_stale_ofm_scale():
    """OFM_SCALE scales a pool only in the global scale mode: a max pool in the per-channel mode is
    unscaled, whatever OFM_SCALE an earlier kick-off left (the simulator applied it before)."""
    torch.manual_seed(0)
    inputs = (torch.randn(1, 4, 8, 8),)
    edge = progs.ethosu_lower(nn.Sequential(nn.Conv2d(4, 4, 1), nn.MaxPool2d(2)), inputs, "ethos-u55-128")
    _program, method = _method(progs.deployable_pte(edge, _max_pool_in_per_channel_mode_after_a_stale_scale))
    (got,) = method.execute(list(inputs))
    expected = run_on_reference_model(edge, *inputs)
    assert torch.equal(got, expected), f"max abs diff {(got - expected).abs().max().item()}"
