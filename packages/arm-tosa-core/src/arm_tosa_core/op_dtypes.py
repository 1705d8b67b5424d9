"""Which data types each TOSA 1.0 operator takes, and the one legalization every rule gets for free.

The table is the union of the TOSA 1.0 specification's per-operator type tables over its profiles and
extensions (PRO-FP, PRO-INT, EXT-INT16, EXT-BF16), keyed by the operator's data operand (SELECT's is
its second input). Profile-specific limits (int32 arithmetic under PRO-FP only for index math) stay
in `registry.py`; this table answers "does any TOSA 1.0 target run this operator on this type", so a
rule that would emit a graph no target (nor the reference model, which aborts the process on one)
accepts fails to lower, and the partitioner leaves the node on the CPU with `illegal_reason`'s words.

Legalization (`narrow_integer_plan`): PRO-INT has ADD, SUB, MUL (to int8/int16), MAXIMUM, MINIMUM, ABS,
EQUAL, GREATER(_EQUAL), INTDIV, REDUCE_SUM and CLZ on int32 only, and CONCAT on int8/int32. For
plain (not quantized) int8/int16 tensors the builder CASTs operands to int32, runs the operator there and
CASTs the result back; TOSA's narrowing CAST wraps like torch's int8/int16 arithmetic, so results are
bit-exact.
"""

from __future__ import annotations

import tosa_serializer as ts

DType, Op = ts.DType, ts.Op

_FLOAT = frozenset({DType.FP16, DType.FP32, DType.BF16})
_INTS = frozenset({DType.INT8, DType.INT16, DType.INT32})
_NARROW = frozenset({DType.INT8, DType.INT16})
_DATA = _FLOAT | _INTS | {DType.BOOL}
_I32_OR_FLOAT = _FLOAT | {DType.INT32}

# Operator -> dtypes its data operand may have (any TOSA 1.0 profile or extension).
_DATA_DTYPES: dict[Op, frozenset] = {}
for _ops, _dtypes in (
    (("ARGMAX", "AVG_POOL2D", "MAX_POOL2D", "CLAMP", "CONV2D", "CONV3D", "DEPTHWISE_CONV2D",
      "TRANSPOSE_CONV2D", "MATMUL", "RESIZE"), _FLOAT | _NARROW),
    (("ERF", "SIGMOID", "TANH", "EXP", "LOG", "CEIL", "FLOOR", "COS", "SIN", "RECIPROCAL", "RSQRT",
      "POW", "REDUCE_PRODUCT"), _FLOAT),
    (("ADD", "SUB", "MAXIMUM", "MINIMUM", "ABS", "REDUCE_SUM", "EQUAL", "GREATER", "GREATER_EQUAL"),
     _I32_OR_FLOAT),
    (("INTDIV", "CLZ"), frozenset({DType.INT32})),
    (("MUL", "NEGATE", "REDUCE_MAX", "REDUCE_MIN", "GATHER", "SCATTER"), _FLOAT | _INTS),
    (("ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "BITWISE_NOT",
      "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT"), _INTS),
    (("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR", "LOGICAL_NOT", "REDUCE_ALL", "REDUCE_ANY"),
     frozenset({DType.BOOL})),
    (("TABLE",), _NARROW),
    (("SELECT", "CONCAT", "PAD", "RESHAPE", "REVERSE", "SLICE", "TILE", "TRANSPOSE", "IDENTITY"), _DATA),
):
    for _name in _ops:
        _DATA_DTYPES[getattr(Op, _name)] = _dtypes

# CAST: TOSA 1.0 converts between integers (and bool), and between integers and floats; bool <-> float
# and same-type casts are not in 1.0.
_CAST_TO: dict[DType, frozenset] = {
    DType.BOOL: _INTS,
    **{i: (_INTS - {i}) | {DType.BOOL} | _FLOAT for i in _INTS},
    **{f: _INTS | (_FLOAT - {f}) for f in _FLOAT},
}

# Operators PRO-INT runs on int32 only (MUL: int8/int16 operands give an int32 product; CONCAT: int8 or
# int32): narrow plain integers are widened around them (see module docstring).
_WIDENED = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.MAXIMUM, Op.MINIMUM, Op.ABS, Op.EQUAL, Op.GREATER,
                      Op.GREATER_EQUAL, Op.INTDIV, Op.REDUCE_SUM, Op.CLZ, Op.CONCAT})
_MUL_SHIFT = 2  # MUL's third operand is its int8 shift, never widened


def _data_index(op: Op) -> int:
    return 1 if op == Op.SELECT else 0


def narrow_integer_plan(op: Op, in_dtypes: list[DType], out_dtype: DType) -> tuple[list[bool], bool] | None:
    """For an operator PRO-INT has on int32 only, applied to int8/int16 tensors: (which operands to
    CAST to int32, whether to CAST the int32 result back to `out_dtype`). None: emit it as is."""
    if op not in _WIDENED or not in_dtypes:
        return None
    if op == Op.CONCAT and in_dtypes[0] == DType.INT8:
        return None
    if op == Op.MUL and out_dtype == DType.INT32:  # int8 x int8 -> int32 is a TOSA MUL already
        return None
    cast = [d in _NARROW and not (op == Op.MUL and i == _MUL_SHIFT) for i, d in enumerate(in_dtypes)]
    if not any(cast):
        return None
    return cast, out_dtype in _NARROW


# int16 forms that only EXT-INT16 has (PRO-INT has the rest of the int16 table).
_INT16_EXTENSION = frozenset({Op.ARGMAX, Op.AVG_POOL2D, Op.MAX_POOL2D, Op.CLAMP, Op.CONV2D, Op.CONV3D,
                              Op.DEPTHWISE_CONV2D, Op.TRANSPOSE_CONV2D, Op.MATMUL, Op.RESIZE, Op.TABLE})


def illegal_reason(op: Op, in_dtypes: list[DType], out_dtype: DType, int16_extension: bool = True) -> str | None:
    """Why no TOSA 1.0 target runs `op` on these types (None when some profile does); without
    `int16_extension`, the int16 forms of EXT-INT16 do not count."""
    if op == Op.CAST and in_dtypes:
        if out_dtype not in _CAST_TO.get(in_dtypes[0], frozenset()):
            return (f"TOSA 1.0 CAST has no {in_dtypes[0].name} -> {out_dtype.name} conversion "
                    "(bool <-> float casts are TOSA 1.1)")
        return None
    allowed = _DATA_DTYPES.get(op)
    index = _data_index(op)
    if allowed is None or len(in_dtypes) <= index:
        return None
    dtype = in_dtypes[index]
    if dtype not in allowed:
        names = "/".join(sorted(d.name for d in allowed))
        return f"TOSA 1.0 {op.name} has no {dtype.name} form (it takes {names})"
    if dtype == DType.INT16 and op in _INT16_EXTENSION and not int16_extension:
        return f"TOSA 1.0 {op.name} on INT16 needs the int16 extension (a spec with \"+int16\")"
    if op == Op.MUL and dtype in _NARROW and out_dtype != DType.INT32:
        return f"TOSA 1.0 MUL of {dtype.name} operands gives an INT32 product, not {out_dtype.name}"
    return None
