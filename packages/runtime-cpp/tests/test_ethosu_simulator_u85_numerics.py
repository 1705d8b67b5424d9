"""EthosUBackend on Ethos-U85 payloads, the numerics: the kick-offs the U85 simulator covers
(elementwise arithmetic, compare and bitwise modes, pooling, convolution and depthwise with regor's
weight streams, resize, matmul, gather and scatter DMAs, the LUTs, int8 and int16 activations,
transposed OFMs), pools, matmuls and convolutions after registers an earlier kick-off left set, the
in-repo models and the a16w8 fully connected layers run bit-exactly against the TOSA reference model
on ethos-u85-256. The stream's decoding, safety and refusals are in test_ethosu_simulator_u85.py.
"""

from __future__ import annotations

import pytest
import runtime_cpp_test_programs as progs
import torch
from executorch.runtime import Runtime
from runtime_cpp_ethosu_u85 import TARGET, sim, where_gt
from runtime_cpp_ethosu_u85 import Binary as _Binary
from runtime_cpp_ethosu_u85 import binary as _binary
from runtime_cpp_ethosu_u85 import lower as _lower
from runtime_cpp_ethosu_u85 import payload as _payload
from torch import nn

from arm_tosa_core import run_on_reference_model
from arm_tosa_core.example_models import get_example
from arm_tosa_core.testing import FnModule
from runtime_cpp.ethosu_commands import ethosu_commands, kick_offs

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
    "u85_where_gt": where_gt(),  # CMP_GT
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

def test_u85_where_sweep_cases_bit_exact():
    """The op sweep's three where.self cases (plain, broadcast, scalar), refused before the compare and
    bitwise modes were simulated, against the reference model bit for bit."""
    cases = sim.op_sweep_cases({"aten.where.self"})
    assert len(cases) == 3, [c.name for c in cases]
    for case in cases:
        outcome = sim.run_case(case, TARGET)
        assert outcome.kind == "exact", f"{case.name}: {outcome.kind} {outcome.detail}"
