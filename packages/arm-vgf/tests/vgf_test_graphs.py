"""Small TOSA 1.0 graphs for the arm-vgf tests, built directly with `tosa_serializer`.

Each builder returns a `TestGraph`: the serialized flatbuffer, its input/output signature, and a
function making deterministic inputs. TOSA 1.0 conventions used here: CONV2D and RESCALE take zero
points (and RESCALE its multiplier/shift) as input tensors, not attributes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tosa_reference_model
import tosa_serializer as ts

DType = ts.DType
Op = ts.Op


@dataclass(frozen=True)
class TensorSig:
    """Name, shape and numpy dtype of one graph input or output."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass(frozen=True)
class TestGraph:
    """A serialized TOSA graph with its signature and an input generator."""

    tosa: bytes
    inputs: tuple[TensorSig, ...]
    outputs: tuple[TensorSig, ...]
    make_inputs: Callable[[int], list[np.ndarray]]


def _serializer() -> ts.TosaSerializer:
    # Stamp TOSA 1.0 (the serializer's default is 1.1 draft, which the converter may not accept).
    return ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)


def _scalar_const(ser: ts.TosaSerializer, dtype: DType, value: int, np_dtype: type) -> str:
    return ser.addConst([1], dtype, np.array([value], dtype=np_dtype)).name


def reference_outputs(graph: TestGraph, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run `graph` on the TOSA reference model; raise if the status is not TOSA_VALID."""
    outputs, status = tosa_reference_model.run(graph.tosa, inputs)
    if status != tosa_reference_model.GraphStatus.TOSA_VALID:
        raise RuntimeError(f"TOSA reference model returned {status}")
    return [np.asarray(o) for o in outputs]


def add_fp32(shape: tuple[int, ...] = (1, 4, 4, 8)) -> TestGraph:
    """out = a + b, fp32."""
    ser = _serializer()
    a = ts.TosaSerializerTensor("a", list(shape), DType.FP32)
    b = ts.TosaSerializerTensor("b", list(shape), DType.FP32)
    ser.addInputTensor(a)
    ser.addInputTensor(b)
    out = ser.addOutput(list(shape), DType.FP32)
    attr = ts.TosaSerializerAttribute()
    attr.AddAttribute()
    ser.addOperator(Op.ADD, ["a", "b"], [out.name], attr)

    def make(seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]

    f32 = np.dtype(np.float32)
    return TestGraph(
        ser.serialize(),
        (TensorSig("a", shape, f32), TensorSig("b", shape, f32)),
        (TensorSig(out.name, shape, f32),),
        make,
    )


def conv2d_fp32(
    n: int = 1, h: int = 8, w: int = 8, cin: int = 4, cout: int = 6, k: int = 3
) -> TestGraph:
    """NHWC fp32 CONV2D, stride 1, pad 1 (same size), with bias."""
    ser = _serializer()
    rng = np.random.default_rng(1234)
    x = ts.TosaSerializerTensor("x", [n, h, w, cin], DType.FP32)
    ser.addInputTensor(x)
    weight = ser.addConst(
        [cout, k, k, cin], DType.FP32, rng.standard_normal((cout, k, k, cin)).astype(np.float32)
    )
    bias = ser.addConst([cout], DType.FP32, rng.standard_normal(cout).astype(np.float32))
    in_zp = _scalar_const(ser, DType.FP32, 0, np.float32)
    w_zp = _scalar_const(ser, DType.FP32, 0, np.float32)
    out_shape = (n, h, w, cout)
    out = ser.addOutput(list(out_shape), DType.FP32)
    p = k // 2
    attr = ts.TosaSerializerAttribute()
    attr.Conv2dAttribute([p, p, p, p], [1, 1], [1, 1], False, DType.FP32)
    ser.addOperator(Op.CONV2D, ["x", weight.name, bias.name, in_zp, w_zp], [out.name], attr)

    def make(seed: int) -> list[np.ndarray]:
        return [np.random.default_rng(seed).standard_normal((n, h, w, cin)).astype(np.float32)]

    return TestGraph(
        ser.serialize(),
        (TensorSig("x", (n, h, w, cin), np.dtype(np.float32)),),
        (TensorSig(out.name, out_shape, np.dtype(np.float32)),),
        make,
    )


def conv2d_int8_rescale(
    n: int = 1, h: int = 8, w: int = 8, cin: int = 4, cout: int = 8, k: int = 3
) -> TestGraph:
    """int8 CONV2D (int32 accumulator) followed by a per-channel RESCALE back to int8.

    Non-zero input and output zero points exercise the zero-point input tensors.
    """
    ser = _serializer()
    rng = np.random.default_rng(4321)
    x = ts.TosaSerializerTensor("x", [n, h, w, cin], DType.INT8)
    ser.addInputTensor(x)
    weight = ser.addConst(
        [cout, k, k, cin], DType.INT8, rng.integers(-127, 128, (cout, k, k, cin), dtype=np.int8)
    )
    bias = ser.addConst([cout], DType.INT32, rng.integers(-500, 500, cout, dtype=np.int32))
    in_zp = _scalar_const(ser, DType.INT8, -3, np.int8)
    w_zp = _scalar_const(ser, DType.INT8, 0, np.int8)  # TOSA requires weight_zp == 0 for int8
    acc = ser.addIntermediate([n, h, w, cout], DType.INT32)
    p = k // 2
    conv_attr = ts.TosaSerializerAttribute()
    conv_attr.Conv2dAttribute([p, p, p, p], [1, 1], [1, 1], False, DType.INT32)
    ser.addOperator(Op.CONV2D, ["x", weight.name, bias.name, in_zp, w_zp], [acc.name], conv_attr)

    # Per-channel scale ~ 1/2000 .. 1/500 as multiplier * 2^-shift with a 31-bit multiplier.
    multipliers = rng.integers(1 << 30, (1 << 31) - 1, cout, dtype=np.int64).astype(np.int32)
    shifts = rng.integers(40, 42, cout, dtype=np.int64).astype(np.int8)
    mult = ser.addConst([cout], DType.INT32, multipliers)
    shift = ser.addConst([cout], DType.INT8, shifts)
    rs_in_zp = _scalar_const(ser, DType.INT32, 0, np.int32)
    rs_out_zp = _scalar_const(ser, DType.INT8, 5, np.int8)
    out_shape = (n, h, w, cout)
    out = ser.addOutput(list(out_shape), DType.INT8)
    rs_attr = ts.TosaSerializerAttribute()
    rs_attr.RescaleAttribute(True, ts.RoundingMode.SINGLE_ROUND, True, False, False)
    ser.addOperator(
        Op.RESCALE, [acc.name, mult.name, shift.name, rs_in_zp, rs_out_zp], [out.name], rs_attr
    )

    def make(seed: int) -> list[np.ndarray]:
        r = np.random.default_rng(seed)
        return [r.integers(-128, 128, (n, h, w, cin), dtype=np.int8)]

    return TestGraph(
        ser.serialize(),
        (TensorSig("x", (n, h, w, cin), np.dtype(np.int8)),),
        (TensorSig(out.name, out_shape, np.dtype(np.int8)),),
        make,
    )
