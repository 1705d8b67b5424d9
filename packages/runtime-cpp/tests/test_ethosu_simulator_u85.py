"""EthosUBackend on Ethos-U85 payloads (regor's command stream, vela 5.x): the stream decodes into
named register state per kick-off, a mutated stream is an Error and never a crash, the kick-offs the
U85 simulator covers (elementwise, pooling, convolution and depthwise with regor's weight streams
in the mlw or the fast format, resize, int8 and int16 activations, transposed OFMs) run bit-exactly against the TOSA reference model on
ethos-u85-256, and a stream with a kick-off it does not cover is refused at load naming the command
(or runs its host graph when the payload has one).
"""

from __future__ import annotations

import importlib.util
import random
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import runtime_cpp_test_programs as progs
import torch
from executorch.runtime import Runtime
from torch import nn

import runtime_cpp
from arm_ethosu import build_binstream, parse_binstream
from arm_tosa_core import run_on_reference_model
from arm_tosa_core.example_models import get_example
from arm_tosa_core.testing import FnModule
from runtime_cpp import fuzz
from runtime_cpp.ethosu_commands import ethosu_commands, kick_offs

TARGET = "ethos-u85-256"


_NAME = "runtime_cpp_ethosu_sim_cases"  # the U55/U65 sweep's harness (lower, deployable .pte, compare)
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(_NAME, Path(__file__).with_name("ethosu_sim_cases.py"))
    sys.modules[_NAME] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules[_NAME])
sim = sys.modules[_NAME]


class _Binary(nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x, y):
        return self.fn(x, y)


def _binary(fn, scale: float = 3.0, shape2=(1, 4, 5, 6)) -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    return _Binary(fn), (torch.randn(1, 4, 5, 6), torch.randn(*shape2) * scale)


def _lower(module, inputs):
    return sim.lower(sim.SimCase("u85", module, inputs), TARGET)


def _payload(edge) -> bytes:
    (module,) = progs.lowered_modules(edge)
    return bytes(module.processed_bytes)


@pytest.fixture(scope="module")
def add_edge():
    return _lower(*_binary(torch.add))


@pytest.fixture(scope="module")
def conv_edge():
    return progs.ethosu_edge(0, TARGET)


def test_u85_streams_decode_to_named_register_state(add_edge, conv_edge):
    product, commands = ethosu_commands(_payload(add_edge))
    assert product == "ethos-u85" and commands[-1].name == "NPU_OP_STOP"
    (add, stop) = kick_offs(commands)
    assert (add.op, add.param & 0x3F) == ("NPU_OP_ELEMENTWISE", 1)  # elementwise mode ADD
    # the U85's own registers, by their U85 names: per-operand scales and the IFM broadcast
    for reg in ("NPU_SET_IFM_SCALE", "NPU_SET_IFM2_SCALE", "NPU_SET_OFM_SCALE", "NPU_SET_IFM_BROADCAST"):
        assert reg in add.registers, reg
    ofm = [add.registers[f"NPU_SET_OFM_{d}_M1"][0] + 1 for d in ("HEIGHT", "WIDTH", "DEPTH")]
    assert ofm[0] * ofm[1] * ofm[2] == 4 * 5 * 6, ofm  # regor may fold the shape, never the volume
    assert "NPU_SET_OPA_SCALE" not in add.registers  # a U55 name the U85 map does not have
    (work,) = runtime_cpp.ethosu_work_record(_payload(add_edge))  # the per-op work record walks it too
    assert work.op == "add" and work.ofm_shape == tuple(ofm) and work.ifm2_shape == tuple(ofm)
    product, commands = ethosu_commands(_payload(conv_edge))
    ops = [k.op for k in kick_offs(commands)]
    assert product == "ethos-u85" and ops.count("NPU_OP_CONV") == 2, ops
    conv = next(k for k in kick_offs(commands) if k.op == "NPU_OP_CONV")
    assert conv.registers["NPU_SET_KERNEL_WIDTH_M1"][0] == 2 and "NPU_SET_WEIGHT_LENGTH" in conv.registers


def test_u85_malformed_streams_are_errors_naming_the_command(add_edge, capfd):
    stream = parse_binstream(_payload(add_edge))
    words = bytearray(stream.cmd_data)
    words[-8:-4] = (0x0000_03F0).to_bytes(4, "little")  # a cmd0 opcode the U85 map does not define
    for cmd_data, log in ((stream.cmd_data[:-16], "truncated cmd_data: the CmdStream tag declares"),
                          (bytes(words), "unknown cmd0 opcode 0x3f0 at cmd_data offset")):
        payload = build_binstream(replace(stream, cmd_data=cmd_data, extra={}))
        with pytest.raises(ValueError, match="cannot be decoded"):
            ethosu_commands(payload)
        assert log in capfd.readouterr().err


class _FastConvResize(nn.Module):
    """A 16->16 3x3 convolution (fast-format weights) into an align_corners bilinear resize (a
    RESIZE into 32 bits, then a NONE pool that rescales it)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(16, 16, 3, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)

    def forward(self, x):
        return self.up(self.conv(x))


@pytest.fixture(scope="module")
def fwd_resize_edge():
    return _lower(_FastConvResize(), (torch.randn(1, 16, 6, 6),))


def test_u85_mutated_streams_never_crash(add_edge, conv_edge, fwd_resize_edge):
    """Seeded mutations of real U85 payloads through the parser and the simulator. In process: a
    child would spend ~20 s importing the runtime for well under a second of fuzzing (a crash still
    fails the session; `nox -s runtime-fuzz` runs long fuzz runs in a child, `runtime-asan` runs
    this test on the ASan/UBSan build)."""
    seeds = [build_binstream(replace(parse_binstream(_payload(e)), extra={}))
             for e in (add_edge, conv_edge, fwd_resize_edge)]
    outcomes = {"ok": 0, "error": 0}
    fn = fuzz.entry_point("ethosu_command_stream")
    rng = random.Random(0)
    for i in range(1000):
        data = seeds[i] if i < len(seeds) else fuzz.mutate(rng.choice(seeds), rng)
        outcomes["ok" if fn(data, len(data)) == 0 else "error"] += 1
    assert outcomes["ok"] >= 1 and outcomes["error"] >= 1, outcomes  # the add seed runs; mutations get refused


KICK_OFFS = {
    # per-operand IFM/IFM2 scaling with natural rounding, then the OFM scale
    "u85_add": _binary(torch.add),
    "u85_sub": _binary(torch.sub, 0.3),
    "u85_mul": _binary(torch.mul, 2.0),
    "u85_add_broadcast": _binary(torch.add, 1.0, (1, 1, 5, 1)),  # IFM2 broadcast in H and C
    # rescales chained through the NPU's internal buffers into a MAX
    "u85_maximum": _binary(torch.maximum, 2.0),
    "u85_minimum": _binary(torch.minimum, 2.0),
}
POOL = {  # one channel: NCHW is NHWC, so regor writes no transposing copy before the pool
    "u85_max_pool": (nn.MaxPool2d(2), (torch.randn(1, 1, 8, 8),)),
    "u85_max_pool_padded": (nn.MaxPool2d(3, 2, 1), (torch.randn(1, 1, 9, 9),)),
    # several channels: regor's transposing copies (1x1 SUM pools into transposed OFMs) around it
    "u85_max_pool_channels": (nn.MaxPool2d(2), (torch.randn(1, 6, 8, 8),)),
    # an average pool with padding counted in the divisor: regor writes a DEPTHWISE
    "u85_avg_pool_padded": (nn.AvgPool2d(3, 2, 1), (torch.randn(1, 1, 9, 9),)),
}
KICK_OFFS.update(POOL)
# the mean of a global average pool: a REDUCE_SUM pool into a 32-bit chain buffer, then an
# elementwise SUB (of the zero points' sum) reading that chain, whose OFM scale divides
KICK_OFFS["u85_mean"] = (nn.AdaptiveAvgPool2d(1), (torch.randn(1, 8, 7, 7),))
# count_include_pad=False: a DEPTHWISE window sum into 32 bits, an elementwise MUL by the
# per-position reciprocals (broadcast over channels), then a NONE pool that rescales the 32-bit
# accumulator it loads from IFM2
KICK_OFFS["u85_avg_pool_exclude_pad"] = (nn.AvgPool2d(3, 1, 1, count_include_pad=False), (torch.randn(1, 4, 7, 7),))
RESIZE = {  # NPU_OP_RESIZE with TOSA's scale (n, d) and offset per axis
    "u85_resize_nearest": (nn.Upsample(scale_factor=2, mode="nearest"), (torch.randn(1, 3, 4, 5),)),
    "u85_resize_nearest_3x": (nn.Upsample(scale_factor=3, mode="nearest"), (torch.randn(1, 3, 4, 5),)),
    "u85_resize_bilinear": (nn.Upsample(scale_factor=2, mode="bilinear"), (torch.randn(1, 5, 4, 6),)),
    # n = 7: the resize writes its 32-bit sums and a NONE pool rescales them by 1/49
    "u85_resize_bilinear_align_corners": (nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True),
                                          (torch.randn(1, 3, 4, 4),)),
}
KICK_OFFS.update(RESIZE)


class _Residual(nn.Module):
    """y + conv1x1(y) after a depthwise convolution (MobileNetV2's block shape): regor keeps the
    1x1 convolution's OFM in a chain buffer that the ADD reads as its IFM2."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.conv = nn.Conv2d(16, 16, 1)

    def forward(self, x):
        y = torch.relu(self.depthwise(x))
        return y + self.conv(y)


KICK_OFFS["u85_conv_residual"] = (_Residual(), (torch.randn(1, 16, 6, 6),))


class _Flip(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.flip(x, [self.dim])


# a 1x1 pool into a reversed OFM (OFM_PRECISION's reverse field)
KICK_OFFS["u85_flip"] = (_Flip(3), (torch.randn(1, 4, 5, 6),))


def _conv(cin: int, cout: int, k: int, hw: int, **kw) -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    return nn.Conv2d(cin, cout, k, **kw), (torch.randn(1, cin, hw, hw),)


CONV = {  # regor's U85 weight stream (its traversal order, mlw-coded) and its scale stream
    # a multi-channel input: regor's NCHW-to-NHWC copy (a 1x1 SUM pool into a transposed OFM), the
    # convolution, and the NHWC-to-NCHW copy of its output
    "u85_conv": _conv(3, 4, 3, 8, padding=1),
    "u85_conv_sparse": _conv(1, 4, 3, 8, padding=1),  # weights regor stores 2:4-sparse
    "u85_conv_strided": _conv(8, 16, 3, 9, stride=2, padding=1),  # the kernel's stride phases
    "u85_conv_dilated": _conv(4, 8, 3, 10, padding=2, dilation=2),
    "u85_conv_deep": _conv(40, 70, 3, 6, padding=1),  # several IFM and OFM blocks
    "u85_conv_1x1_deep": _conv(130, 40, 1, 4),  # IFM blocks walked back and forth per OFM block
    "u85_conv_7x7": _conv(3, 8, 7, 12, stride=2, padding=3),  # part-kernel-first traversal
    "u85_depthwise": _conv(8, 8, 3, 8, padding=1, groups=8),
    "u85_depthwise_5x5_s2": _conv(16, 16, 5, 11, stride=2, padding=2, groups=16),
    "u85_linear": (nn.Linear(20, 12), (torch.randn(3, 20),)),  # a 1x1 convolution
}
A16W8 = {  # int16 activations: 48-bit accumulators and their scale-stream records
    "u85_conv_a16w8": _conv(3, 4, 3, 8, padding=1),
    "u85_depthwise_a16w8": _conv(8, 8, 3, 8, padding=1, groups=8),
}
LUT = {"u85_sigmoid": (nn.Sigmoid(), (torch.randn(1, 1, 4, 8) * 3,))}  # LUT_S8_S8: a slot DMAed in
# regor's MATMUL: B transposed by a 1x1 SUM pool into an HCW OFM, then per batch a convolution with its
# weights from IFM2 (NPU_OP_CONV param 1) and the global OFM scale
torch.manual_seed(0)
MATMUL = {"u85_bmm": (_Binary(torch.bmm), (torch.randn(2, 4, 8), torch.randn(2, 8, 5)))}
A16W8["u85_bmm_a16w8"] = MATMUL["u85_bmm"]  # int16 x int16 into a 48-bit accumulator
DMA = {  # regor's GATHER and SCATTER: a DMA whose source or destination rows follow an int32 index list
    # an embedding lookup: a 2-D DMA of one table row per index, the source indexed
    "u85_gather": (FnModule(lambda s, i: s.e(i), e=nn.Embedding(10, 8)), (torch.tensor([[3, 1, 7]]),)),
    # a KV-cache update: a 3-D DMA (one plane per head) into the cache rows the positions name
    "u85_scatter": (FnModule(lambda s, c, v, p: c.index_copy(2, p, v)),
                    (torch.randn(1, 2, 6, 4), torch.randn(1, 2, 2, 4), torch.tensor([4, 1]))),
}
KICK_OFFS.update(CONV)
KICK_OFFS.update(A16W8)
KICK_OFFS.update(MATMUL)
KICK_OFFS.update(DMA)
KICK_OFFS.update(LUT)
DEFAULT = ("u85_add", "u85_mul", "u85_maximum", "u85_max_pool_padded", "u85_conv",
           "u85_depthwise_5x5_s2", "u85_conv_a16w8", "u85_sigmoid", "u85_mean", "u85_conv_residual",
           "u85_avg_pool_exclude_pad", "u85_bmm", "u85_gather", "u85_scatter")


@pytest.mark.parametrize("name", [n if n in DEFAULT else pytest.param(n, marks=pytest.mark.slow)
                                  for n in KICK_OFFS])
def test_u85_kick_offs_bit_exact_against_the_reference_model(name):
    module, inputs = KICK_OFFS[name]
    outcome = sim.run_case(sim.SimCase(name, module, inputs, a16w8=name in A16W8), TARGET)
    assert outcome.kind == "exact", f"{name}: {outcome.kind} {outcome.detail}"


def test_u85_fast_weight_format_and_resize_bit_exact(fwd_resize_edge):
    """regor stores a plain 16->16 3x3 convolution's weights in the fast format (WEIGHT_FORMAT bit 0,
    FWD: a 32-byte header with a zero adjustment and a 16-entry table, then 2- or 4-bit table
    indices or raw bytes), which the simulator decodes in place of the mlw codec; the bilinear
    resize after it (align_corners: n = 7) writes 32-bit sums that a NONE pool rescales by 1/49."""
    commands = kick_offs(ethosu_commands(_payload(fwd_resize_edge))[1])
    (conv,) = [k for k in commands if k.op == "NPU_OP_CONV"]
    assert conv.registers["NPU_SET_WEIGHT_FORMAT"][0] & 1, conv.registers["NPU_SET_WEIGHT_FORMAT"]
    assert [k.op for k in commands].count("NPU_OP_RESIZE") >= 1
    x = torch.randn(1, 16, 6, 6)
    program = Runtime.get().load_program(progs.deployable_pte(fwd_resize_edge))  # a Method does not keep it alive
    (got,) = program.load_method("forward").execute([x])
    expected = run_on_reference_model(fwd_resize_edge, x)
    assert torch.equal(got, expected), f"max abs diff {(got - expected).abs().max().item()}"


# The in-repo models on ethos-u85-256 (input sizes as for U55/U65 in test_ethosu_simulator.py), and what the
# simulator did with each deployable .pte when last measured (2026-11-27, load 19-23): MobileNetV2 (residual
# ADDs reading chained convolution OFMs, the final mean as a 1x1 AVERAGE pool) and ResNet18 bit-exact;
# the DeiT-tiny and Llama blocks refused at load, "NPU_OP_CONV ...: a broadcast, scalar or chained matmul
# operand is not simulated" (attention's batched matmuls).
U85_MODELS = {"mobilenet_v2": 32, "resnet18": 32, "deit_tiny_block": 8, "llama_block": 8}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(U85_MODELS))
def test_u85_in_repo_models_bit_exact_or_refused_naming_the_command(name, capfd):
    """Each in-repo model's deployable .pte (no host graph) on ethos-u85-256: the simulator's outputs equal
    the reference model's bit for bit, or it refuses the stream at load naming the command and offset it
    does not simulate (never a wrong answer)."""
    model, inputs = get_example(name).build(seed=0, input_size=U85_MODELS[name])
    edge = progs.ethosu_lower(model, inputs, TARGET)
    program = Runtime.get().load_program(progs.deployable_pte(edge))  # a Method does not keep it alive
    try:
        method = program.load_method("forward")
    except RuntimeError:
        err = capfd.readouterr().err
        assert re.search(r"NPU_OP_\w+ at cmd_data offset \d+: .* not simulated for Ethos-U85", err), err
        return
    (got,) = method.execute(list(inputs))
    expected = run_on_reference_model(edge, *inputs)
    assert torch.equal(got, expected), f"max abs diff {(got - expected).abs().max().item()}"


@pytest.fixture(scope="module")
def min_edge():
    torch.manual_seed(0)
    return _lower(FnModule(lambda s, x: torch.amin(x, dim=(2, 3), keepdim=True)), (torch.randn(1, 4, 5, 6),))


def test_u85_kick_off_not_simulated_is_refused_naming_it_and_the_host_graph_runs(min_edge, capfd):
    """A minimum over H and W: regor writes a POOL in MIN mode, not simulated."""
    inputs = [torch.randn(1, 4, 5, 6)]
    stream = parse_binstream(_payload(min_edge))
    program = Runtime.get().load_program(progs.pte_with_payload(min_edge, build_binstream(replace(stream, extra={}))))
    with pytest.raises(RuntimeError, match="Failed to load method"):
        program.load_method("forward")
    err = capfd.readouterr().err
    assert re.search(r"NPU_OP_POOL at cmd_data offset \d+: this pooling mode .* is not simulated for Ethos-U85 yet", err)
    assert "--host-graph" in err
    # with its host graph the same payload runs that graph on the reference model
    program = Runtime.get().load_program(progs.pte(min_edge))
    (got,) = program.load_method("forward").execute(inputs)
    assert torch.equal(got, run_on_reference_model(min_edge, *inputs))
