"""Small TOSA 1.0 PRO-INT graphs built with ``tosa_serializer`` for the Ethos-U tests.

Every builder returns the serialized flatbuffer (bytes), stamped TOSA 1.0 (vela 5.2 reads
1.0 only). In TOSA 1.0 the conv zero points and the rescale multiplier/shift/zero points are
input tensors, so they are added as constants here.
"""

from __future__ import annotations

import numpy as np
import tosa_serializer as ts

DT = ts.DType


def _serializer() -> ts.TosaSerializer:
    return ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)


def _scalar(s: ts.TosaSerializer, dtype: ts.DType, value: int, np_dtype) -> str:
    return s.addConst([1], dtype, np.array([value], np_dtype)).name


def _rescale(
    s: ts.TosaSerializer,
    src: str,
    dst: str,
    in_dtype: ts.DType,
    out_dtype: ts.DType,
    multipliers: list[int],
    shifts: list[int],
    in_zp: int,
    out_zp: int,
) -> None:
    """RESCALE src -> dst (scale32, SINGLE_ROUND; per channel when several multipliers)."""
    n = len(multipliers)
    mult = s.addConst([n], DT.INT32, np.array(multipliers, np.int32)).name
    shift = s.addConst([n], DT.INT8, np.array(shifts, np.int8)).name
    in_np = np.int32 if in_dtype == DT.INT32 else np.int8
    out_np = np.int32 if out_dtype == DT.INT32 else np.int8
    izp = _scalar(s, in_dtype, in_zp, in_np)
    ozp = _scalar(s, out_dtype, out_zp, out_np)
    attr = ts.TosaSerializerAttribute()
    attr.RescaleAttribute(True, ts.RoundingMode.SINGLE_ROUND, n > 1, False, False)
    s.addOperator(ts.Op.RESCALE, [src, mult, shift, izp, ozp], [dst], attr)


def conv2d_rescale(
    h: int = 8, w: int = 8, cin: int = 4, cout: int = 8, k: int = 3, seed: int = 0
) -> bytes:
    """int8 NHWC [1,h,w,cin] -> CONV2D (k x k, pad k//2) -> int32 -> per-channel RESCALE -> int8."""
    rng = np.random.default_rng(seed)
    s = _serializer()
    s.addInputTensor(ts.TosaSerializerTensor("input_0", [1, h, w, cin], DT.INT8))
    weights = rng.integers(-127, 128, (cout, k, k, cin), dtype=np.int8)
    bias = rng.integers(-1000, 1000, (cout,), dtype=np.int32)
    wt = s.addConst([cout, k, k, cin], DT.INT8, weights).name
    bt = s.addConst([cout], DT.INT32, bias).name
    izp = _scalar(s, DT.INT8, -3, np.int8)
    wzp = _scalar(s, DT.INT8, 0, np.int8)
    acc = s.addIntermediate([1, h, w, cout], DT.INT32).name
    p = k // 2
    attr = ts.TosaSerializerAttribute()
    attr.Conv2dAttribute([p, p, p, p], [1, 1], [1, 1], False, DT.INT32)
    s.addOperator(ts.Op.CONV2D, ["input_0", wt, bt, izp, wzp], [acc], attr)
    out = s.addOutput([1, h, w, cout], DT.INT8).name
    mults = [int(1 << 30) + 977 * c for c in range(cout)]
    _rescale(s, acc, out, DT.INT32, DT.INT8, mults, [40] * cout, 0, 5)
    return s.serialize()


def add_rescaled(
    h: int = 4,
    w: int = 4,
    c: int = 8,
    shape_a: list[int] | None = None,
    shape_b: list[int] | None = None,
) -> bytes:
    """Two int8 inputs, each RESCALEd to int32, ADD (broadcasting), RESCALE back to int8."""
    s = _serializer()
    shape_a = shape_a or [1, h, w, c]
    shape_b = shape_b or [1, h, w, c]
    shape = [max(x, y) for x, y in zip(shape_a, shape_b, strict=True)]
    s.addInputTensor(ts.TosaSerializerTensor("input_0", shape_a, DT.INT8))
    s.addInputTensor(ts.TosaSerializerTensor("input_1", shape_b, DT.INT8))
    a32 = s.addIntermediate(shape_a, DT.INT32).name
    b32 = s.addIntermediate(shape_b, DT.INT32).name
    _rescale(s, "input_0", a32, DT.INT8, DT.INT32, [1 << 30], [20], 2, 0)
    _rescale(s, "input_1", b32, DT.INT8, DT.INT32, [1 << 29], [20], -1, 0)
    sum32 = s.addIntermediate(shape, DT.INT32).name
    add_attr = ts.TosaSerializerAttribute()
    add_attr.AddAttribute()
    s.addOperator(ts.Op.ADD, [a32, b32], [sum32], add_attr)
    out = s.addOutput(shape, DT.INT8).name
    _rescale(s, sum32, out, DT.INT32, DT.INT8, [1 << 30], [40], 0, 1)
    return s.serialize()


def depthwise_rescale(h: int = 8, w: int = 8, c: int = 4, k: int = 3, seed: int = 1) -> bytes:
    """int8 [1,h,w,c] -> DEPTHWISE_CONV2D (multiplier 1, pad k//2) -> RESCALE -> int8."""
    rng = np.random.default_rng(seed)
    s = _serializer()
    s.addInputTensor(ts.TosaSerializerTensor("input_0", [1, h, w, c], DT.INT8))
    weights = rng.integers(-127, 128, (k, k, c, 1), dtype=np.int8)
    bias = rng.integers(-500, 500, (c,), dtype=np.int32)
    wt = s.addConst([k, k, c, 1], DT.INT8, weights).name
    bt = s.addConst([c], DT.INT32, bias).name
    izp = _scalar(s, DT.INT8, 0, np.int8)
    wzp = _scalar(s, DT.INT8, 0, np.int8)
    acc = s.addIntermediate([1, h, w, c], DT.INT32).name
    p = k // 2
    attr = ts.TosaSerializerAttribute()
    attr.DepthwiseConv2dAttribute([p, p, p, p], [1, 1], [1, 1], False, DT.INT32)
    s.addOperator(ts.Op.DEPTHWISE_CONV2D, ["input_0", wt, bt, izp, wzp], [acc], attr)
    out = s.addOutput([1, h, w, c], DT.INT8).name
    _rescale(s, acc, out, DT.INT32, DT.INT8, [1 << 30] * c, [38] * c, 0, 0)
    return s.serialize()


def float_add() -> bytes:
    """An FP32 ADD: valid TOSA (PRO-FP) that vela refuses (it only takes PRO-INT)."""
    s = _serializer()
    s.addInputTensor(ts.TosaSerializerTensor("input_0", [1, 4], DT.FP32))
    s.addInputTensor(ts.TosaSerializerTensor("input_1", [1, 4], DT.FP32))
    out = s.addOutput([1, 4], DT.FP32).name
    add_attr = ts.TosaSerializerAttribute()
    add_attr.AddAttribute()
    s.addOperator(ts.Op.ADD, ["input_0", "input_1"], [out], add_attr)
    return s.serialize()


# A small vela system config (My_Sys) for custom-.ini tests; each test appends its own memory modes.
TINY_SYSTEM_CONFIG = """
[System_Config.My_Sys]
core_clock=400e6
axi0_port=Sram
axi1_port=OffChipFlash
Sram_clock_scale=1.0
Sram_burst_length=32
Sram_read_latency=32
Sram_write_latency=32
OffChipFlash_clock_scale=0.125
OffChipFlash_burst_length=128
OffChipFlash_read_latency=64
OffChipFlash_write_latency=0
"""


def tiny_vela_ini(memory_modes: str) -> str:
    """The My_Sys system config followed by `memory_modes` (vela .ini sections)."""
    return TINY_SYSTEM_CONFIG + "\n" + memory_modes
