"""The model converter takes TOSA 1.0 int16-extension graphs (so VgfCompileSpec's default spec has
"+int16"): each graph converts and runs on Vulkan bit-exact against the TOSA reference model."""

import numpy as np
import pytest
import tosa_serializer as ts
import vgf_test_graphs as graphs

from arm_vgf import convert_tosa_to_vgf, run_vgf

DType, Op = ts.DType, ts.Op
SHAPE = [1, 6, 6, 8]


def _ser() -> ts.TosaSerializer:
    return ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)


def _const(ser, dtype, values, np_dtype) -> str:
    values = np.asarray(values, dtype=np_dtype)
    return ser.addConst(list(values.shape), dtype, values).name


def conv_int16_int48() -> tuple[bytes, list[np.ndarray]]:
    """int16 x int8 CONV2D with an INT48 accumulator, RESCALE (16-bit multiplier) back to int16."""
    rng = np.random.default_rng(0)
    ser, cout = _ser(), 5
    ser.addInputTensor(ts.TosaSerializerTensor("x", SHAPE, DType.INT16))
    w = _const(ser, DType.INT8, rng.integers(-127, 128, (cout, 3, 3, SHAPE[3])), np.int8)
    b = _const(ser, DType.INT48, rng.integers(-500, 500, cout), np.int64)
    acc = ser.addIntermediate([*SHAPE[:3], cout], DType.INT48)
    attr = ts.TosaSerializerAttribute()
    attr.Conv2dAttribute([1, 1, 1, 1], [1, 1], [1, 1], False, DType.INT48)
    ser.addOperator(Op.CONV2D, ["x", w, b, _const(ser, DType.INT16, [0], np.int16),
                                _const(ser, DType.INT8, [0], np.int8)], [acc.name], attr)
    out = ser.addOutput([*SHAPE[:3], cout], DType.INT16)
    rs = ts.TosaSerializerAttribute()
    rs.RescaleAttribute(False, ts.RoundingMode.SINGLE_ROUND, True, False, False)
    ser.addOperator(Op.RESCALE, [acc.name, _const(ser, DType.INT16, [1 << 14] * cout, np.int16),
                                 _const(ser, DType.INT8, [22] * cout, np.int8),
                                 _const(ser, DType.INT48, [0], np.int64),
                                 _const(ser, DType.INT16, [0], np.int16)], [out.name], rs)
    return ser.serialize(), [rng.integers(-30000, 30000, SHAPE).astype(np.int16)]


def add_int16_via_int32() -> tuple[bytes, list[np.ndarray]]:
    """int16 inputs RESCALEd to int32, ADD, RESCALE (halving) back to int16."""
    rng = np.random.default_rng(1)
    ser = _ser()
    wide = []
    for name in ("a", "b"):
        ser.addInputTensor(ts.TosaSerializerTensor(name, SHAPE, DType.INT16))
        t = ser.addIntermediate(SHAPE, DType.INT32)
        rs = ts.TosaSerializerAttribute()
        rs.RescaleAttribute(True, ts.RoundingMode.SINGLE_ROUND, False, False, False)
        ser.addOperator(Op.RESCALE, [name, _const(ser, DType.INT32, [1 << 30], np.int32),
                                     _const(ser, DType.INT8, [30], np.int8),
                                     _const(ser, DType.INT16, [0], np.int16),
                                     _const(ser, DType.INT32, [0], np.int32)], [t.name], rs)
        wide.append(t.name)
    total = ser.addIntermediate(SHAPE, DType.INT32)
    add = ts.TosaSerializerAttribute()
    add.AddAttribute()
    ser.addOperator(Op.ADD, wide, [total.name], add)
    out = ser.addOutput(SHAPE, DType.INT16)
    rs = ts.TosaSerializerAttribute()
    rs.RescaleAttribute(True, ts.RoundingMode.SINGLE_ROUND, False, False, False)
    ser.addOperator(Op.RESCALE, [total.name, _const(ser, DType.INT32, [1 << 30], np.int32),
                                 _const(ser, DType.INT8, [31], np.int8),
                                 _const(ser, DType.INT32, [0], np.int32),
                                 _const(ser, DType.INT16, [0], np.int16)], [out.name], rs)
    return ser.serialize(), [rng.integers(-30000, 30000, SHAPE).astype(np.int16) for _ in range(2)]


def table_int16() -> tuple[bytes, list[np.ndarray]]:
    """int16 TABLE (513 entries, interpolated) -> int32."""
    rng = np.random.default_rng(2)
    ser = _ser()
    ser.addInputTensor(ts.TosaSerializerTensor("x", SHAPE, DType.INT16))
    out = ser.addOutput(SHAPE, DType.INT32)
    attr = ts.TosaSerializerAttribute()
    attr.TableAttribute()
    ser.addOperator(Op.TABLE, ["x", _const(ser, DType.INT16, rng.integers(-1000, 1000, 513), np.int16)],
                    [out.name], attr)
    return ser.serialize(), [rng.integers(-32768, 32767, SHAPE).astype(np.int16)]


def max_pool_int16() -> tuple[bytes, list[np.ndarray]]:
    rng = np.random.default_rng(3)
    ser = _ser()
    ser.addInputTensor(ts.TosaSerializerTensor("x", SHAPE, DType.INT16))
    out = ser.addOutput([1, 3, 3, SHAPE[3]], DType.INT16)
    attr = ts.TosaSerializerAttribute()
    attr.MaxPool2dAttribute([2, 2], [2, 2], [0, 0, 0, 0], ts.NanPropagationMode.PROPAGATE)
    ser.addOperator(Op.MAX_POOL2D, ["x"], [out.name], attr)
    return ser.serialize(), [rng.integers(-32768, 32767, SHAPE).astype(np.int16)]


@pytest.mark.parametrize("build", [conv_int16_int48, add_int16_via_int32, table_int16, max_pool_int16],
                         ids=lambda f: f.__name__)
def test_int16_graph_converts_and_runs_bit_exact(build, tmp_path):
    tosa, inputs = build()
    (ref,) = graphs.reference_outputs(graphs.TestGraph(tosa, (), (), lambda seed: inputs), inputs)
    (out,) = run_vgf(convert_tosa_to_vgf(tosa, tmp_path), inputs)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    np.testing.assert_array_equal(out, ref)
    assert len(np.unique(out)) > 32  # not saturated or constant
