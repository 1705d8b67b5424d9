"""EthosUBackend on Ethos-U85 payloads (regor's command stream, vela 5.x), the stream itself: it
decodes into named register state per kick-off, a malformed or mutated stream is an Error and never a
crash, regor's stream forms that only a stream reading shows (convolutions accumulating onto IFM2 for
a CONV3D, the fast weight format into a resize) run bit-exactly against the TOSA reference model on
ethos-u85-256, and a stream with a kick-off or mode the simulator does not cover is refused at load
naming the command (or runs its host graph when the payload has one). The bit-exact kick-offs, models
and layers are in test_ethosu_simulator_u85_numerics.py.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest
import runtime_cpp_test_programs as progs
import torch
from executorch.runtime import Runtime
from runtime_cpp_ethosu_u85 import TARGET, where_gt
from runtime_cpp_ethosu_u85 import binary as _binary
from runtime_cpp_ethosu_u85 import lower as _lower
from runtime_cpp_ethosu_u85 import payload as _payload
from torch import nn

import runtime_cpp
from arm_ethosu import build_binstream, parse_binstream
from arm_tosa_core import run_on_reference_model
from arm_tosa_core.testing import FnModule
from runtime_cpp import fuzz
from runtime_cpp.ethosu_commands import ethosu_commands, kick_offs


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
    return _lower(*where_gt())


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
