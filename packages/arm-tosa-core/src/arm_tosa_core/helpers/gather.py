"""GATHER along one logical dim of a lowered value, and its INT32 index operand (TOSA GATHER has no
bounds checks and no 64-bit integers): shared by the indexing families and the bounded-integer
quantize lookup."""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import layout
from ..builder import DType, Op, T, tosa_dtype
from ..context import LoweringContext, Value
from ..errors import UnsupportedModelError


def gather_indices(ctx: LoweringContext, index: Value, size: int, rows: int, wrap_negative: bool = False) -> T:
    """`index` flattened to the [rows, W] INT32 operand of GATHER (repeated over `rows`).

    Constant indices are checked against `size` (and negative ones wrapped when `wrap_negative`)
    at compile time: TOSA GATHER has no bounds checks and no 64-bit integers.
    """
    width = max(1, index.const.numel() if index.is_const else math.prod(index.shape))
    if index.is_const:
        data = index.const.to(torch.int64).reshape(-1)
        if wrap_negative:
            data = torch.where(data < 0, data + size, data)
        bad = data[(data < 0) | (data >= size)]
        if bad.numel():
            raise UnsupportedModelError(f"index {int(bad[0])} is out of range for a dimension of size {size}; "
                                        "fix the constant indices in the model")
        return ctx.b.const(np.tile(data.numpy().astype(np.int32).reshape(1, width), (rows, 1)), DType.INT32)
    if index.tensor.shape == (1, width) and rows == 1:
        return index.tensor
    # RESHAPE/TILE of int32 belong to the INT profile; an FP-only graph moves the indices as fp32
    # (exact for any valid index: size <= 2^24) and casts back.
    carrier = DType.INT32 if ctx.spec.support_integer() or size > _FP32_EXACT else DType.FP32
    if index.tensor.dtype != carrier:
        moved = ctx.b.op(Op.CAST, [index.tensor], index.tensor.shape, carrier)
        index = Value(index.shape, index.dtype, tensor=moved, perm=index.perm)
    flat = ctx.tensor(ctx.reshape(index, (1, width)), layout.identity(2))
    if rows > 1:
        flat = ctx.b.op(Op.TILE, [flat, ctx.b.shape_const([rows, 1])], [rows, width], carrier)
    return flat if carrier == DType.INT32 else ctx.b.op(Op.CAST, [flat], flat.shape, DType.INT32)


_FP32_EXACT = 1 << 24  # every integer up to this is exact in fp32


def gather_dim(ctx: LoweringContext, x: Value, dim: int, index: Value, wrap_negative: bool = False) -> Value:
    """x with logical dim `dim` replaced by the entries `index` (flattened) picks: one GATHER.

    Works in x's physical layout: the dims stored before `dim` become GATHER's N, those after it C.
    """
    count = index.const.numel() if index.is_const else math.prod(index.shape)
    out_shape = list(x.shape)
    out_shape[dim] = count
    if x.is_const and index.is_const:
        rows = gather_indices(ctx, index, x.shape[dim], 1, wrap_negative)  # range check
        picks = torch.from_numpy(ctx.b.const_value(rows).reshape(-1).astype(np.int64))
        return ctx.constant(torch.index_select(x.const, dim, picks))
    perm = layout.identity(x.rank) if x.is_const else x.perm
    xt = ctx.tensor(x, perm, tosa_dtype(x.dtype) if x.is_const else None)
    axis = perm.index(dim)
    physical = list(xt.shape)
    n, k, c = math.prod(physical[:axis]), physical[axis], math.prod(physical[axis + 1:])
    values = ctx.b.reshape(xt, [n, k, c])
    picked = ctx.b.op(Op.GATHER, [values, gather_indices(ctx, index, k, n, wrap_negative)], [n, count, c], xt.dtype)
    physical[axis] = count
    return ctx.from_tensor(ctx.b.reshape(picked, physical), out_shape, x.dtype, perm)
