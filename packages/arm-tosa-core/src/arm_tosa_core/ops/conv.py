"""Convolutions: conv1d/conv2d (incl. depthwise and grouped, padding="same"), conv3d and
conv_transpose2d (incl. grouped), run channels-last (NHWC, NDHWC).

The rule decides the layout: input is asked for in NHWC (a TRANSPOSE only if it is not already there),
weights are permuted at compile time, and the output stays NHWC for the next op to use. Grouped
convolutions that TOSA has no operator for run one operator per group on channel slices, concatenated.
padding_mode reflect/replicate/circular reaches us as aten.pad before the convolution (ops/padding.py).
"""

from __future__ import annotations

import numpy as np
import torch
from torch.fx import Node

from .. import layout
from ..builder import DType, Op, T, tosa_dtype
from ..context import LoweringContext, Value
from ..helpers.convolution import CONVOLUTIONS, ConvArgs, conv_args
from ..helpers.intmath import acc_type, accumulator_value, bias_for_accumulator, weight_type
from ..helpers.qparams import activation_dtype
from ..registry import Quant, register_int_rule, register_op

aten = torch.ops.aten
NHWC = layout.NCHW_TO_NHWC


def _conv_support(node: Node, spec) -> str | None:
    args = conv_args(node)
    rank = args.input.meta["val"].dim()
    groups = args.groups
    if node.meta.get("arm_quantized") and (rank == 3 or groups not in (1, args.input.meta["val"].shape[1])):
        if activation_dtype(node) == torch.int16:
            return ("1-d or grouped convolution with int16 activations is not lowered (it would reshape or "
                    "concatenate the INT48 accumulator)")
    if rank not in (3, 4, 5):
        return f"{rank - 2}-d convolution is not lowered (only 1-d, 2-d and 3-d)"
    if rank == 5 and (groups != 1 or args.transposed):
        return "grouped or transposed 3-d convolution is not lowered (TOSA CONV3D has no groups)"
    if rank == 5 and node.meta.get("arm_quantized") and _activation_dtype_of(node) == torch.int16:
        return "3-d convolution with int16 activations is not lowered"
    if args.transposed:
        if rank != 4:
            return "only 2-d transposed convolution is lowered"
        if any(d != 1 for d in args.dilation):
            return "dilated transposed convolution is not lowered (TOSA TRANSPOSE_CONV2D has no dilation)"
    return None


def _activation_dtype_of(node: Node):

    return activation_dtype(node)


def fit_padding(size: int, kernel: int, stride: int, dilation: int, lo: int, hi: int) -> tuple[int, int, int]:
    """TOSA wants (size-1+lo+hi-(k-1)d) divisible by stride; torch floors. Trim the unused bottom/right
    padding, and report how many trailing input rows must be sliced off when padding is not enough.
    Returns (lo, hi, rows_to_drop)."""
    rem = (size - 1 + lo + hi - (kernel - 1) * dilation) % stride
    trim = min(rem, hi)
    return lo, hi - trim, rem - trim


def _nhwc_input(ctx: LoweringContext, x: Value, drop_h: int, drop_w: int) -> T:
    t = ctx.tensor(x, NHWC)
    if drop_h or drop_w:
        n, h, w, c = t.shape
        size = [n, h - drop_h, w - drop_w, c]
        t = ctx.b.op(Op.SLICE, [t, ctx.b.shape_const([0, 0, 0, 0]), ctx.b.shape_const(size)], size, t.dtype)
    return t


def absorb_zero_pad(b, xt: T, pads: list[int], kernel, stride, dilation, input_zp: T) -> tuple[T, list[int]]:
    """(input, pads) of a 2-d convolution whose NHWC input is a PAD of H/W by the input zero point (timm's
    "same" padding, an explicit F.pad): the PAD's input and the pads added to the convolution's own.

    TOSA's convolution reads its padding as the input zero point, so the integers are the same; vela then
    pads in hardware instead of copying the tensor into a padded one (its TOSA reader turns a PAD into
    elementwise copies). Only where the result stays an ordinary convolution: stride <= 3 and each side's
    padding below the dilated kernel extent."""
    producer = b.producer(xt)
    if producer is None or producer.op != Op.PAD:
        return xt, pads
    extra, value = b.const_value(producer.inputs[1]), b.const_value(producer.inputs[2])
    zp = b.const_value(input_zp)
    if extra is None or value is None or zp is None or len(extra) != 8 or any(extra[[0, 1, 6, 7]]):
        return xt, pads
    if float(np.asarray(value).reshape(-1)[0]) != float(np.asarray(zp).reshape(-1)[0]):
        return xt, pads
    total = [int(p) + int(e) for p, e in zip(pads, extra[2:6], strict=True)]
    extent = [(k - 1) * d for k, d in zip(kernel, dilation, strict=True)]
    if any(s > 3 for s in stride) or any(p > extent[i // 2] for i, p in enumerate(total)):
        return xt, pads
    return producer.inputs[0], total


def _live_taps(size: int, out: int, kernel: int, stride: int, dilation: int, lo: int) -> tuple[int, int]:
    """[first, last] kernel taps along one axis that read the input (not padding) for some output."""
    live = [t for t in range(kernel) if any(0 <= o * stride - lo + t * dilation < size for o in range(out))]
    return (live[0], live[-1]) if live else (0, kernel - 1)


def drop_padding_taps(ctx: LoweringContext, w: Value, pads: list[int], stride, dilation, size, out):
    """(weight, pads, dilation) without the kernel rows/columns that read only padding for every output.

    Such taps add w * 0 (FP) or w * (zp - zp) (INT): nothing. They appear where the dilation reaches past
    the input: DeepLabV3's ASPP has 3x3 convs of dilation 12/24/36 on an 8x8 map (at 128x128 input), all
    of whose off-centre taps read padding, and vela 5.2 runs a dilated kernel as a dense one ((k-1)d+1
    taps a side: 73x73 for d = 36), hundreds of millions of NPU cycles for what is a 1x1 convolution.
    The remaining taps read the very same input positions (the leading padding shrinks by first_tap * d)."""
    kernel = list(w.shape[2:])
    spans = [_live_taps(size[i], out[i], kernel[i], stride[i], dilation[i], pads[2 * i]) for i in (0, 1)]
    if all(first == 0 and last == kernel[i] - 1 for i, (first, last) in enumerate(spans)):
        return w, pads, dilation
    new_pads, new_dilation = [], []
    for i, (first, last) in enumerate(spans):
        k, d = last - first + 1, dilation[i] if last > first else 1
        lo = pads[2 * i] - first * dilation[i]
        hi = (out[i] - 1) * stride[i] + (k - 1) * d + 1 - size[i] - lo
        if lo < 0 or hi < 0:  # the live taps would need a crop of the input, not less padding: keep all
            return w, pads, dilation
        new_pads += [lo, hi]
        new_dilation.append(d)
    (h0, h1), (w0, w1) = spans
    return ctx.constant(w.const[:, :, h0:h1 + 1, w0:w1 + 1].contiguous()), new_pads, new_dilation


def _weight_axis(node: Node) -> int:
    """Per-channel axis of the weight: output channels are dim 1 of a transposed conv's weight."""
    return 1 if conv_args(node).transposed else 0


def bias_repeats(node: Node) -> int:
    """How often the weight's per-channel scales repeat along the output channels: a grouped
    transposed conv's weight [IC, OC/groups, ...] has OC/groups scales, shared by every group."""
    args = conv_args(node)
    return args.groups if args.transposed else 1


@register_op("convolution", CONVOLUTIONS,
             support=_conv_support, preserve=True, preserve_for_speed=True, quant=Quant.WEIGHTED,
             weight_axis=_weight_axis, int16=True, bias_repeats=bias_repeats)
def lower_convolution(ctx: LoweringContext, node: Node, weight: Value | None = None,
                      bias_value: Value | None = None) -> Value:
    """FP/INT convolution; `weight`/`bias_value` override the node's (used to fold a batch norm)."""
    args = conv_args(node)
    x, w, bias = ctx.val(args.input), weight or ctx.val(args.weight), args.bias
    stride, padding, dilation = args.stride, args.padding, args.dilation
    transposed, out_pad, groups = args.transposed, args.output_padding, args.groups
    out_shape, dtype = ctx.out_meta(node)
    if x.rank == 5:
        return _conv3d(ctx, node, args, x, w, bias_value)
    conv1d = x.rank == 3
    if conv1d:  # run as 2-d with H = 1
        x = ctx.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
        w = ctx.reshape(w, (*w.shape[:2], 1, w.shape[2]))
        stride, padding, dilation = [1, stride[0]], [0, padding[0]], [1, dilation[0]]
        out_pad = [0, out_pad[0] if out_pad else 0]
        out4 = (out_shape[0], out_shape[1], 1, out_shape[2])
    else:
        out4 = out_shape
    out_channels = out4[1]
    xdt = x.tensor.dtype if not x.is_const else tosa_dtype(x.dtype)
    wdt = weight_type(ctx, w, xdt)
    bias_v = bias_value if bias_value is not None else ctx.val(bias) if bias is not None else \
        ctx.constant(torch.zeros(out_channels, dtype=dtype))
    bdt = DType.INT32 if xdt == DType.INT8 else DType.INT48 if xdt == DType.INT16 else xdt
    bias_t = ctx.tensor(bias_v, None, bdt)
    zps = [ctx.b.zero_point(xdt, getattr(x.qparams, "zero_point", 0)), ctx.b.zero_point(wdt)]
    out_dt = acc_type(xdt) if xdt in (DType.INT8, DType.INT16) else xdt

    if transposed:
        # torch weight [IC, OC, KH, KW] -> TOSA [OC, KH, KW, IC]; out_pad = -padding (+ output_padding)
        pads = [-padding[0], -padding[0] + out_pad[0], -padding[1], -padding[1] + out_pad[1]]
        attr = (pads, list(stride), False, acc_type(xdt))
        xt = ctx.tensor(x, NHWC)
        if groups == 1:
            y = ctx.b.op(Op.TRANSPOSE_CONV2D, [xt, ctx.tensor(w, (1, 2, 3, 0), wdt), bias_t, *zps],
                         layout.apply(out4, NHWC), out_dt, *attr)
        else:
            y = _grouped(ctx, xt, w, bias_v, bdt, zps, groups, layout.apply(out4, NHWC), out_dt, wdt, attr,
                         transposed=True)
        return _finish(ctx, node, y, out4, conv1d, dtype)

    n, cin, h, wd = x.shape
    kh, kw = w.shape[2], w.shape[3]
    hi = args.pads[-2:] if not conv1d else [(0, 0), args.pads[0]]
    top, bottom, drop_h = fit_padding(h, kh, stride[0], dilation[0], hi[0][0], hi[0][1])
    left, right, drop_w = fit_padding(wd, kw, stride[1], dilation[1], hi[1][0], hi[1][1])
    pads = [top, bottom, left, right]
    xt = _nhwc_input(ctx, x, drop_h, drop_w)
    if not (drop_h or drop_w):
        xt, pads = absorb_zero_pad(ctx.b, xt, pads, (kh, kw), stride, dilation, zps[0])
    out_phys = layout.apply(out4, NHWC)
    if w.is_const:
        w, pads, dilation = drop_padding_taps(ctx, w, pads, stride, dilation, xt.shape[1:3], out_phys[1:3])
        kh, kw = w.shape[2], w.shape[3]
    attr = (pads, list(stride), list(dilation), False, acc_type(xdt))
    if groups == 1:
        y = ctx.b.op(Op.CONV2D, [xt, ctx.tensor(w, NHWC, wdt), bias_t, *zps], out_phys, out_dt, *attr)
    elif groups == cin:
        # depthwise: torch [C*M, 1, KH, KW] -> TOSA [KH, KW, C, M]
        mult = out_channels // cin
        wc = w.const.reshape(cin, mult, kh, kw).permute(2, 3, 0, 1) if w.is_const else None
        if wc is None:
            raise ValueError("depthwise convolution needs constant weights")
        y = ctx.b.op(Op.DEPTHWISE_CONV2D, [xt, ctx.b.const(wc, wdt), bias_t, *zps], out_phys, out_dt, *attr)
    else:
        y = _grouped(ctx, xt, w, bias_v, bdt, zps, groups, out_phys, out_dt, wdt, attr)
    return _finish(ctx, node, y, out4, conv1d, dtype)


def _grouped(ctx, xt: T, w: Value, bias: Value, bdt, zps, groups, out_phys, out_dt, wdt, attr,
             transposed: bool = False) -> T:
    """Grouped convolution as one CONV2D (TRANSPOSE_CONV2D) per group on channel slices, concatenated
    on C. A transposed conv's weight is [IC, OC/groups, KH, KW]: group g owns input rows g*IC/groups..."""
    cin_g = xt.shape[3] // groups
    cout_g = out_phys[3] // groups
    outs = []
    for g in range(groups):
        size = [*xt.shape[:3], cin_g]
        xs = ctx.b.op(Op.SLICE, [xt, ctx.b.shape_const([0, 0, 0, g * cin_g]), ctx.b.shape_const(size)],
                      size, xt.dtype)
        rows = slice(g * cin_g, (g + 1) * cin_g) if transposed else slice(g * cout_g, (g + 1) * cout_g)
        wg = ctx.constant(w.const[rows])
        bg = ctx.constant(bias.const[g * cout_g:(g + 1) * cout_g]) if bias.is_const else None
        if bg is None:
            raise ValueError("grouped convolution needs a constant bias")
        wt = ctx.tensor(wg, (1, 2, 3, 0) if transposed else NHWC, wdt)
        outs.append(ctx.b.op(Op.TRANSPOSE_CONV2D if transposed else Op.CONV2D,
                             [xs, wt, ctx.tensor(bg, None, bdt), *zps], [*out_phys[:3], cout_g], out_dt, *attr))
    return ctx.b.op(Op.CONCAT, outs, out_phys, out_dt, 3)


NDHWC = (0, 2, 3, 4, 1)


def _conv3d(ctx: LoweringContext, node: Node, args: ConvArgs, x: Value, w: Value, bias_value) -> Value:
    """CONV3D in NDHWC; torch weight [OC, IC, KD, KH, KW] -> TOSA [OC, KD, KH, KW, IC]."""
    out_shape, dtype = ctx.out_meta(node)
    xdt = x.tensor.dtype if not x.is_const else tosa_dtype(x.dtype)
    wdt = weight_type(ctx, w, xdt)
    bias_v = bias_value if bias_value is not None else ctx.val(args.bias) if args.bias is not None else \
        ctx.constant(torch.zeros(out_shape[1], dtype=dtype))
    bdt = DType.INT32 if xdt == DType.INT8 else xdt
    pads, drops = [], []
    for i, (lo, hi) in enumerate(args.pads):
        lo, hi, drop = fit_padding(x.shape[2 + i], w.shape[2 + i], args.stride[i], args.dilation[i], lo, hi)
        pads += [lo, hi]
        drops.append(drop)
    xt = ctx.tensor(x, NDHWC)
    if any(drops):
        size = [xt.shape[0], *(s - d for s, d in zip(xt.shape[1:4], drops, strict=True)), xt.shape[4]]
        xt = ctx.b.op(Op.SLICE, [xt, ctx.b.shape_const([0] * 5), ctx.b.shape_const(size)], size, xt.dtype)
    zps = [ctx.b.zero_point(xdt, getattr(x.qparams, "zero_point", 0)), ctx.b.zero_point(wdt)]
    out_dt = acc_type(xdt) if xdt == DType.INT8 else xdt
    y = ctx.b.op(Op.CONV3D, [xt, ctx.tensor(w, NDHWC, wdt), ctx.tensor(bias_v, None, bdt), *zps],
                 layout.apply(out_shape, NDHWC), out_dt, pads, list(args.stride), list(args.dilation), False,
                 acc_type(xdt))
    return Value(tuple(out_shape), dtype if out_dt != DType.INT32 else torch.int32, tensor=y, perm=NDHWC)


def _finish(ctx: LoweringContext, node: Node, y: T, out4, conv1d: bool, dtype) -> Value:
    value = Value(tuple(out4), dtype if y.dtype not in (DType.INT32, DType.INT48) else torch.int32,
                  tensor=y, perm=NHWC)
    if conv1d:
        value = ctx.reshape(value, (out4[0], out4[1], out4[3]))
    return value


@register_int_rule("convolution")
def lower_convolution_int(ctx: LoweringContext, node: Node) -> Value:
    """int8 x int8 -> int32 accumulator with scale in_scale * weight_scale (per output channel)."""
    args = conv_args(node)
    x, w = ctx.val(args.input), ctx.val(args.weight)
    if x.qparams is None or w.qparams is None or not w.is_const:
        raise ValueError("quantized convolution needs a quantized input and constant quantized weights")
    w_scale = np.asarray(w.qparams.scale, dtype=np.float64)
    # per-channel scales of a grouped transposed conv cover one group: tiled; a per-tensor one covers all
    scale = float(x.qparams.scale) * (np.tile(w_scale, bias_repeats(node)) if w_scale.size > 1 else w_scale)
    acc = lower_convolution(ctx, node, bias_value=bias_for_accumulator(ctx, args.bias, scale))
    return accumulator_value(acc.shape, torch.int32, acc.tensor, acc.perm, scale, axis=1)


