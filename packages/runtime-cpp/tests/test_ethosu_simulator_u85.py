"""EthosUBackend on Ethos-U85 payloads (regor's command stream, vela 5.x): the stream decodes into
named register state per kick-off, a mutated stream is an Error and never a crash, the kick-offs the
U85 simulator covers (elementwise arithmetic, compare and bitwise modes, pooling, convolution and depthwise with regor's weight streams
in the mlw or the fast format, convolutions accumulating onto IFM2 (regor's CONV3D), resize, int8 and int16 activations, transposed OFMs) run bit-exactly against the TOSA reference model on
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


@pytest.fixture(scope="module")
def where_edge():  # compares and bitwise modes: CMP_GT, AND, AND_NOT, OR
    return _lower(*COMPARE["u85_where_gt"])


@pytest.fixture(scope="module")
def conv3d_edge():  # the sweep's coverage:conv3d_depth3: convolutions accumulating onto IFM2, then a NONE pool
    torch.manual_seed(0)
    return _lower(nn.Conv3d(3, 4, 3, padding=1), (torch.randn(1, 3, 4, 5, 5),))


def test_u85_mutated_streams_never_crash(add_edge, conv_edge, fwd_resize_edge, where_edge, conv3d_edge):
    """Seeded mutations of real U85 payloads through the parser and the simulator. In process: a
    child would spend ~20 s importing the runtime for well under a second of fuzzing (a crash still
    fails the session; `nox -s runtime-fuzz` runs long fuzz runs in a child, `runtime-asan` runs
    this test on the ASan/UBSan build)."""
    seeds = [build_binstream(replace(parse_binstream(_payload(e)), extra={}))
             for e in (add_edge, conv_edge, fwd_resize_edge, where_edge, conv3d_edge)]
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
# a minimum over H and W: a POOL in MIN mode
KICK_OFFS["u85_amin"] = (FnModule(lambda s, x: torch.amin(x, dim=(2, 3), keepdim=True)), (torch.randn(1, 4, 5, 6),))


def _global_average(hw: tuple[int, int]) -> tuple[nn.Module, tuple]:
    """A convolution (NHWC output) into a global average pool: with the input's qparams (EthosUQuantizer
    on U85) one int8 AVG_POOL2D, which regor writes as a POOL in AVERAGE mode (kernels up to 8x8) that
    divides by the element count on the NPU (OFM_SCALE 1, shift 0)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.AdaptiveAvgPool2d(1)), (torch.randn(1, 3, *hw) * 2,)


GLOBAL_AVERAGE = {f"u85_global_avg_pool_{h}x{w}": _global_average((h, w)) for h, w in ((7, 7), (2, 2), (3, 5), (6, 6), (8, 8))}
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
# int16 TABLEs (a16w8): regor fuses the TABLE and the RESCALE by 2^-7 after it into LUT_S16_S16, the
# whole 2 KiB LUT memory of 512 interpolated base/slope entries, after a 1x1 SUM pool
A16W8["u85_leaky_relu_a16w8"] = (nn.LeakyReLU(0.1), (torch.randn(1, 4, 5, 6),))
A16W8["u85_abs_a16w8"] = (FnModule(lambda s, a: torch.abs(a)), (torch.randn(1, 4, 5, 6),))
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
# regor's compares write a mask (-1 where it holds) that its TOSA SELECT and bool casts use bitwise:
# where(c, a, b) is (a AND mask) OR (b AND_NOT mask), a bool-to-int cast is mask AND 1
COMPARE = {
    "u85_where_gt": (FnModule(lambda s, a, b: torch.where(a > b, a, b)), _binary(torch.add)[1]),  # CMP_GT
    "u85_eq_cast": (FnModule(lambda s, a, b: (a == b).to(torch.float32) * a),  # CMP_EQ, then AND 1
                    (torch.randn(1, 4, 5, 6).round(), torch.randn(1, 4, 5, 6).round())),
    "u85_ge_select": (FnModule(lambda s, a, b: torch.where(a >= b, a, 0.5 * b)), _binary(torch.add)[1]),  # CMP_GE
    "u85_logical_and": (FnModule(lambda s, a, b: torch.where(torch.logical_and(a > 0, b > 0), a, b)),
                        _binary(torch.add)[1]),
    "u85_logical_not": (FnModule(lambda s, a, b: torch.where(torch.logical_not(a > 0), a, b)),  # NOT
                        _binary(torch.add)[1]),
    "u85_logical_or": (FnModule(lambda s, a, b: torch.where(torch.logical_or(a > 0, b > 0), a, b)),
                       _binary(torch.add)[1]),
    "u85_logical_xor": (FnModule(lambda s, a, b: torch.where(torch.logical_xor(a > 0, b > 0), a, b)),  # XOR
                        _binary(torch.add)[1]),
    # a bool input: its mask is CMP_NE against a scalar 0
    "u85_where_bool": (FnModule(lambda s, c, a, b: torch.where(c, a, b)),
                       (torch.randn(1, 4, 5, 6) > 0, *_binary(torch.add)[1])),
}
torch.manual_seed(0)
INTEGER = {  # integer tensors (not quantized): the bitwise modes and ABS on the values as stored
    "u85_bitwise_and_int8": (FnModule(lambda s, a, b: torch.bitwise_and(a, b)),
                             tuple(torch.randint(-128, 128, (1, 4, 5, 6), dtype=torch.int8) for _ in range(2))),
    "u85_bitwise_xor_int32": (FnModule(lambda s, a, b: torch.bitwise_xor(a, b)),
                              tuple(torch.randint(-2**31, 2**31 - 1, (1, 4, 5, 6), dtype=torch.int32) for _ in range(2))),
    "u85_abs_int32": (FnModule(lambda s, a: torch.abs(a)),
                      (torch.randint(-2**31 + 1, 2**31 - 1, (1, 4, 5, 6), dtype=torch.int32),)),
}
COMPARE.update(INTEGER)
KICK_OFFS.update(COMPARE)
KICK_OFFS.update(CONV)
KICK_OFFS.update(A16W8)
KICK_OFFS.update(MATMUL)
KICK_OFFS.update(DMA)
KICK_OFFS.update(LUT)
A16W8["u85_global_avg_pool_7x7_a16w8"] = KICK_OFFS["u85_global_avg_pool_7x7_a16w8"] = GLOBAL_AVERAGE["u85_global_avg_pool_7x7"]
DEFAULT = ("u85_add", "u85_mul", "u85_maximum", "u85_max_pool_padded", "u85_conv",
           "u85_depthwise_5x5_s2", "u85_conv_a16w8", "u85_sigmoid", "u85_mean", "u85_conv_residual",
           "u85_avg_pool_exclude_pad", "u85_bmm", "u85_gather", "u85_scatter", "u85_where_gt", "u85_eq_cast",
           "u85_logical_not", "u85_where_bool", "u85_bitwise_xor_int32", "u85_abs_int32", "u85_amin")
# u85_leaky_relu_a16w8 and u85_abs_a16w8 (the 16-bit LUT) take 14-41 s at load 20: slow


@pytest.mark.parametrize("name", [n if n in DEFAULT else pytest.param(n, marks=pytest.mark.slow)
                                  for n in KICK_OFFS])
def test_u85_kick_offs_bit_exact_against_the_reference_model(name):
    module, inputs = KICK_OFFS[name]
    outcome = sim.run_case(sim.SimCase(name, module, inputs, a16w8=name in A16W8), TARGET)
    assert outcome.kind == "exact", f"{name}: {outcome.kind} {outcome.detail}"


@pytest.mark.parametrize("name", [n if n == "u85_global_avg_pool_7x7" else pytest.param(n, marks=pytest.mark.slow)
                                  for n in GLOBAL_AVERAGE])
def test_u85_average_pool_divides_on_the_npu_as_tosa_does(name):
    """regor writes the global average as one POOL in AVERAGE mode over the whole plane with OFM_SCALE
    1, shift 0, natural rounding: the NPU divides by the element count itself. The simulator divides
    as TOSA AVG_POOL2D does (the multiplier ((2^30 + 1) << k) / n, shift 30 + k, rounded half up),
    the arithmetic regor assumes where it divides with the OFM scale instead; bit-exact for odd, even
    (ties) and non-square counts."""
    module, inputs = GLOBAL_AVERAGE[name]
    edge = _lower(module, inputs)
    pools = [k for k in kick_offs(ethosu_commands(_payload(edge))[1]) if k.op == "NPU_OP_POOL" and k.param & 7 == 1]
    (pool,) = pools  # AVERAGE
    h, w = inputs[0].shape[-2:]
    assert (pool.registers["NPU_SET_KERNEL_HEIGHT_M1"][0] + 1, pool.registers["NPU_SET_KERNEL_WIDTH_M1"][0] + 1) == (h, w)
    scale, shift = pool.registers["NPU_SET_OFM_SCALE"][1], pool.registers["NPU_SET_OFM_SCALE"][0] & 0x3F
    assert (scale, shift) == (1, 0), pool.registers["NPU_SET_OFM_SCALE"]
    outcome = sim.run_case(sim.SimCase(name, module, inputs), TARGET)
    assert outcome.kind == "exact", f"{name}: {outcome.kind} {outcome.detail}"


STALE_REGISTERS = {  # pools that regor writes after registers it leaves as an earlier kick-off set them
    # the op sweep's group_norm of _native_batch_norm_legit_no_training: a 1x1 SUM pool after
    # elementwise operations that broadcast their IFM in W; regor writes IFM_BROADCAST for elementwise
    # operations only, and the pool reads its IFM unbroadcast
    "u85_group_norm": "IFM_BROADCAST",
    # conv_transpose2d: a NONE pool in the per-channel mode (OFM_PRECISION bit 8 clear) rescales the
    # 32-bit accumulators it loads from IFM2 with each channel's bias and scale from the scale stream
    "u85_conv_transpose2d": "per-channel NONE",
}


def _stale_register_case(name: str) -> tuple[nn.Module, tuple]:
    if name == "u85_group_norm":
        (case,) = [c for c in sim.op_sweep_cases({"aten._native_batch_norm_legit_no_training.default"})
                   if c.name.endswith(" group_norm")]
        return case.module, case.inputs
    torch.manual_seed(0)
    return nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1), (torch.randn(1, 4, 5, 5),)


@pytest.mark.parametrize("name", list(STALE_REGISTERS))
def test_u85_pools_after_other_kick_offs_bit_exact(name):
    module, inputs = _stale_register_case(name)
    what = STALE_REGISTERS[name]
    edge = _lower(module, inputs)
    pools = [k for k in kick_offs(ethosu_commands(_payload(edge))[1]) if k.op == "NPU_OP_POOL"]
    if what == "IFM_BROADCAST":
        assert any(k.registers.get("NPU_SET_IFM_BROADCAST", (0,))[0] & 0xF for k in pools), what
    else:
        assert any(k.param & 7 == 4 and not k.registers["NPU_SET_OFM_PRECISION"][0] >> 8 & 1 for k in pools), what
    outcome = sim.run_case(sim.SimCase(name, module, inputs), TARGET)
    assert outcome.kind == "exact", f"{name}: {outcome.kind} {outcome.detail}"


SDPA = ("sdpa", "sdpa causal", "sdpa mask")


@pytest.mark.parametrize("label", [lb if lb == "sdpa" else pytest.param(lb, marks=pytest.mark.slow) for lb in SDPA])
def test_u85_attention_matmuls_ignore_stale_broadcast_registers(label):
    """The op sweep's scaled_dot_product_attention cases: regor's second matmul (probabilities @ V)
    follows elementwise operations that broadcast IFM2 over channels, and regor writes the broadcast
    registers for elementwise operations only, so the matmul reads both operands unbroadcast."""
    (case,) = [c for c in sim.op_sweep_cases({"aten.scaled_dot_product_attention.default"})
               if c.name.endswith(f".default {label}")]
    edge = sim.lower(case, TARGET)
    matmuls = [k for k in kick_offs(ethosu_commands(_payload(edge))[1]) if k.op == "NPU_OP_CONV" and k.param & 1]
    assert any(k.registers.get("NPU_SET_IFM2_BROADCAST", (0,))[0] & 0xF for k in matmuls)
    outcome = sim.run_case(case, TARGET)
    assert outcome.kind == "exact", f"{case.name}: {outcome.kind} {outcome.detail}"


def test_u85_convolution_ignores_a_stale_ifm_broadcast():
    """An RMS norm as transformers' Llama writes it (the weight first: `w * normed`), then a linear:
    regor's elementwise MUL broadcasts its IFM (the weight) in W, and the 1x1 convolution of the
    projection after it runs with IFM_BROADCAST still set, since regor writes the broadcast registers
    for elementwise operations only. The convolution reads its IFM unbroadcast (before, the
    simulator refused it, and with it the StaticCache Llama's prefill)."""
    torch.manual_seed(0)
    weight = torch.rand(32) + 0.5
    module = FnModule(lambda s, x: s.lin(s.w * (x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6))),
                      w=nn.Parameter(weight), lin=nn.Linear(32, 16))
    case = sim.SimCase("u85_rms_norm_linear", module, (torch.randn(1, 6, 32),))
    convs = [k for k in kick_offs(ethosu_commands(_payload(sim.lower(case, TARGET)))[1]) if k.op == "NPU_OP_CONV"]
    assert any(k.registers.get("NPU_SET_IFM_BROADCAST", (0,))[0] & 0xF for k in convs)
    outcome = sim.run_case(case, TARGET)
    assert outcome.kind == "exact", f"{case.name}: {outcome.kind} {outcome.detail}"


def _with_acc_format(cmd_data: bytes, value: int, new: int) -> tuple[bytes, int]:
    """The stream with its first NPU_SET_ACC_FORMAT of `value` set to `new`, and the offset of the
    kick-off that reads it."""
    words = bytearray(cmd_data)
    offset = words.index((0x0124 | value << 16).to_bytes(4, "little"))  # cmd0 opcode 0x124: NPU_SET_ACC_FORMAT
    assert offset % 4 == 0
    words[offset:offset + 4] = (0x0124 | new << 16).to_bytes(4, "little")
    return bytes(words), offset


def test_u85_conv3d_accumulates_convolutions_onto_ifm2_bit_exact(conv3d_edge, capfd):
    """regor writes a CONV3D (3x3x3, padding 1) as one 2-D convolution per kernel plane for each OFM
    plane: the first from a reset accumulator (ACC_FORMAT 0x300) into a 32-bit OFM, each next one
    loading its accumulators from that 32-bit tensor as IFM2 (0x320: acc_input IFM2), the last adding
    the bias; then a NONE pool (0x120) rescales the 32-bit planes to int8. The simulated deployable
    .pte equals the reference model bit for bit (it was refused before). An ACC_FORMAT the simulator
    cannot check against a real stream (acc_input KEEP, acc_output DISABLE) is refused naming the
    command and its offset."""
    commands = kick_offs(ethosu_commands(_payload(conv3d_edge))[1])
    convs = [k for k in commands if k.op == "NPU_OP_CONV"]
    formats = [k.registers["NPU_SET_ACC_FORMAT"][0] for k in convs]
    assert formats.count(0x300) == 4 and formats.count(0x320) == 6, [hex(f) for f in formats]  # 4 planes: 2+3+3+2
    # the accumulator input: a 32-bit signed IFM2 (precision 9), the OFM of the convolution before
    assert all((k.registers["NPU_SET_IFM2_PRECISION"][0] & 0xF) == 9 for k in convs if k.registers["NPU_SET_ACC_FORMAT"][0] == 0x320)
    (pool,) = [k for k in commands if k.op == "NPU_OP_POOL" and k.param & 7 == 4]
    assert pool.registers["NPU_SET_ACC_FORMAT"][0] == 0x120
    torch.manual_seed(1)
    x = torch.randn(1, 3, 4, 5, 5)
    program = Runtime.get().load_program(progs.deployable_pte(conv3d_edge))
    (got,) = program.load_method("forward").execute([x])
    expected = run_on_reference_model(conv3d_edge, x)
    assert torch.equal(got, expected), f"max abs diff {(got - expected).abs().max().item()}"
    stream = parse_binstream(_payload(conv3d_edge))
    for new in (0x310, 0x360):  # acc_input KEEP; acc_input IFM2 with acc_output DISABLE
        cmd_data, at = _with_acc_format(stream.cmd_data, 0x320, new)
        conv = next(k for k in convs if k.offset > at)
        program = Runtime.get().load_program(progs.pte_with_payload(conv3d_edge, build_binstream(
            replace(stream, cmd_data=cmd_data, extra={}))))
        with pytest.raises(RuntimeError, match="Failed to load method"):
            program.load_method("forward")
        assert re.search(rf"NPU_OP_CONV at cmd_data offset {conv.offset}: an accumulator kept inside the NPU",
                         capfd.readouterr().err)


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


# The in-repo models on ethos-u85-256 (input sizes as for U55/U65 in test_ethosu_simulator.py), every one
# bit-exact on the simulator (2026-11-27 22:08, load about 3): MobileNetV2 (residual ADDs reading chained
# convolution OFMs, the final mean as a 1x1 AVERAGE pool), ResNet18, and the DeiT-tiny and Llama blocks,
# whose attention matmuls were refused until the simulator stopped applying the broadcast registers regor
# leaves set by an earlier elementwise operation.
U85_MODELS = {"mobilenet_v2": 32, "resnet18": 32, "deit_tiny_block": 8, "llama_block": 8}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(U85_MODELS))
def test_u85_in_repo_models_bit_exact(name):
    """Each in-repo model's deployable .pte (no host graph) on ethos-u85-256: the simulator runs the
    whole stream and its outputs equal the reference model's bit for bit."""
    model, inputs = get_example(name).build(seed=0, input_size=U85_MODELS[name])
    edge = progs.ethosu_lower(model, inputs, TARGET)
    program = Runtime.get().load_program(progs.deployable_pte(edge))  # a Method does not keep it alive
    (got,) = program.load_method("forward").execute(list(inputs))
    expected = run_on_reference_model(edge, *inputs)
    assert torch.equal(got, expected), f"max abs diff {(got - expected).abs().max().item()}"


def _a16w8_fc_cases() -> dict[str, tuple[nn.Module, tuple]]:
    torch.manual_seed(0)
    return {"k8_permuted": (FnModule(lambda s, x: s.m(x.permute(0, 2, 3, 1)), m=nn.Linear(8, 12)),
                            (torch.randn(1, 8, 8, 8) * 2,)),  # test_ethosu_a16w8.OPS["linear"]
            "k512": (nn.Linear(512, 16), (torch.randn(4, 512) * 2,))}


@pytest.mark.parametrize("name", ["k8_permuted", "k512"])
def test_u85_a16w8_fully_connected_bit_exact_and_within_1_lsb_of_fake_quant(name):
    """An int16 x int8 linear on ethos-u85-256: its INT48 accumulator RESCALEd straight to int16 with a
    16-bit multiplier (`EthosUCompileSpec.int16_fc_rescale16`), which regor's 48-bit scale records hold
    exactly. With the 32-bit form regor kept the multiplier's low 15 bits (1.71 off in float for
    k8_permuted), so these layers stayed on the CPU. The command stream equals the reference model, and
    both are within 1 output LSB of the fake-quant model (K = 512: where an int32 intermediate once
    needed a 2^-k RESCALE)."""
    from arm_quantizer import get_symmetric_a16w8_quantization_config, run_exactly

    module, inputs = _a16w8_fc_cases()[name]
    converted, edge = progs.ethosu_quantize_and_lower(module, inputs, TARGET, get_symmetric_a16w8_quantization_config())
    assert len(progs.lowered_modules(edge)) == 1
    program = Runtime.get().load_program(progs.deployable_pte(edge))  # a Method does not keep it alive
    (got,) = program.load_method("forward").execute(list(inputs))
    expected = run_on_reference_model(edge, *inputs)
    assert torch.equal(got, expected), f"max abs diff {(got - expected).abs().max().item()}"
    (out,) = [n for n in converted.graph.nodes if n.op == "output"]
    dequantize = out.args[0][0] if isinstance(out.args[0], (tuple, list)) else out.args[0]
    lsb = (got - run_exactly(converted, *inputs)).abs().max().item() / float(dequantize.args[1])
    print(f"{name}: {lsb:.3f} LSB from fake-quant")
    assert lsb <= 1.001, lsb  # a float32 output of ~2^15 codes carries ~0.001 LSB of its own rounding


@pytest.fixture(scope="module")
def min_edge():
    torch.manual_seed(0)
    return _lower(FnModule(lambda s, x: torch.amin(x, dim=(2, 3), keepdim=True)), (torch.randn(1, 4, 5, 6),))


def _with_pool_mode(cmd_data: bytes, offset: int, mode: int) -> bytes:
    """The stream with the POOL kick-off at `offset` given another pooling mode (the cmd0 parameter,
    bits 16-31 of its word)."""
    words = bytearray(cmd_data)
    words[offset + 2:offset + 4] = mode.to_bytes(2, "little")
    return bytes(words)


def test_u85_kick_off_not_simulated_is_refused_naming_it_and_the_host_graph_runs(min_edge, capfd):
    """A minimum over H and W (a POOL in MIN mode) with its mode changed to ARGMAX_X, which regor writes
    only for an argmax and the simulator does not cover: refused at load naming the command, and with
    its host graph the payload runs that graph on the reference model."""
    inputs = [torch.randn(1, 4, 5, 6)]
    stream = parse_binstream(_payload(min_edge))
    pool = next(k for k in kick_offs(ethosu_commands(_payload(min_edge))[1]) if k.op == "NPU_OP_POOL" and k.param & 7 == 5)
    argmax = _with_pool_mode(stream.cmd_data, pool.offset, 6)
    program = Runtime.get().load_program(progs.pte_with_payload(min_edge, build_binstream(replace(stream, cmd_data=argmax, extra={}))))
    with pytest.raises(RuntimeError, match="Failed to load method"):
        program.load_method("forward")
    err = capfd.readouterr().err
    assert re.search(rf"NPU_OP_POOL at cmd_data offset {pool.offset}: this pooling mode .* is not simulated for Ethos-U85 yet", err)
    assert "--host-graph" in err
    # with its host graph the same stream runs that graph on the reference model
    program = Runtime.get().load_program(progs.pte_with_payload(min_edge, build_binstream(replace(stream, cmd_data=argmax), stream.extra)))
    (got,) = program.load_method("forward").execute(inputs)
    assert torch.equal(got, run_on_reference_model(min_edge, *inputs))


def test_u85_elementwise_mode_not_simulated_is_refused_naming_it(where_edge, capfd):
    """The where stream's CMP_GT turned into elementwise mode 63, which no register map defines:
    refused at load naming the command and its offset, never run (as LRELU, CLZ, the shifts and DIV
    are, which regor writes for none of our graphs)."""
    modes = {k.param & 0x3F for k in kick_offs(ethosu_commands(_payload(where_edge))[1]) if k.op == "NPU_OP_ELEMENTWISE"}
    assert {19, 33, 34, 42} <= modes, modes  # CMP_GT, AND, OR, AND_NOT: the stream the sweep cases below run
    stream = parse_binstream(_payload(where_edge))
    words = bytearray(stream.cmd_data)
    cmp_gt = (0x0013_0006).to_bytes(4, "little")  # NPU_OP_ELEMENTWISE, mode 19 (CMP_GT)
    offset = words.index(cmp_gt)
    words[offset:offset + 4] = (0x003F_0006).to_bytes(4, "little")
    program = Runtime.get().load_program(progs.pte_with_payload(where_edge, build_binstream(
        replace(stream, cmd_data=bytes(words), extra={}))))
    with pytest.raises(RuntimeError, match="Failed to load method"):
        program.load_method("forward")
    assert re.search(rf"NPU_OP_ELEMENTWISE at cmd_data offset {offset}: this elementwise mode .* is not simulated",
                     capfd.readouterr().err)


def test_u85_where_sweep_cases_bit_exact():
    """The op sweep's three where.self cases (plain, broadcast, scalar), refused before the compare and
    bitwise modes were simulated, against the reference model bit for bit."""
    cases = sim.op_sweep_cases({"aten.where.self"})
    assert len(cases) == 3, [c.name for c in cases]
    for case in cases:
        outcome = sim.run_case(case, TARGET)
        assert outcome.kind == "exact", f"{case.name}: {outcome.kind} {outcome.detail}"
