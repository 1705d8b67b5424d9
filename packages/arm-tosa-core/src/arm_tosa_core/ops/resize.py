"""Resize: upsample_nearest2d, _upsample_nearest_exact2d and upsample_bilinear2d as one TOSA RESIZE in NHWC.

TOSA 1.0 RESIZE samples output row `oy` at input position (oy * d + offset) / n, per axis, with the
scale n/d, an offset and a border that fixes the output size:
    OH = ((IH - 1) * n - offset + border) / d + 1   (exact division)
NEAREST rounds that position half up, BILINEAR interpolates (clamping at the edges). Torch's modes map
onto it as follows (p/q = output/input ratio as a reduced fraction):
    nearest (floor(oy * q / p))                -> n = 2p, d = 2q, offset = -p (q - p when p/q is
                                                  an integer: the same samples, in vela's form)
    nearest-exact, bilinear (half-pixel)       -> n = 2p, d = 2q, offset = q - p
    bilinear, align_corners=True               -> n/d = (OH-1)/(IH-1), offset = 0
Rather than trusting that algebra for every size and float scale factor, the support rule computes each
axis' sampling weights both ways (torch's, by running the op on a one-hot basis; TOSA's, from the
pseudocode) and only claims the node when they agree and the parameters are within the spec's limits.

INT (int8): the output shares the input's qparams (a resize never leaves the input's range). NEAREST
runs on int8 as is. BILINEAR on int8 yields int32 sums of the four neighbours weighted in units of
1/(n_y * n_x); since those weights sum to n_y * n_x, the zero point rides along and one RESCALE by
1 / (n_y * n_x) (a pure shift when both numerators are powers of two, the form vela takes) gives the
int8 result.

vela 5.2 compiles no BILINEAR RESIZE for Ethos-U55/U65 (every scale, offset and shift form fails with
"Resize could not run on NPU"), and NEAREST only for power-of-two upscales 2x..8x in the half-pixel
form. So under the "u55" subset a k x half-pixel bilinear upscale (k = 2, 4, 8) is lowered as what it
equals: NEAREST k x (each input repeated k times, a box of k taps), k/2 edge rows replicated, then a
(k+1)x(k+1) DEPTHWISE_CONV2D with taps [1,2,...,2,1] per axis: box(k) convolved with [1,2,...,2,1] is
the half-pixel triangle [1,3,5,...,2k-1,2k-1,...,3,1] bilinear interpolation is, so the int32 sums are
the RESIZE's own, in the same units of 1/(2k)^2 (k=2: out[2i] = x[i-1]/4 + 3x[i]/4 and out[2i+1] =
3x[i]/4 + x[i+1]/4, exactly), and the same RESCALE gives int8. For k >= 4 the kernel runs separably by
default, a (k+1)x1 pass then a 1x(k+1) pass through an exact int16 intermediate (same integers, 2(k+1)
taps per output instead of (k+1)^2); `bilinear_form` picks either form (Ethos-U's --tune tries both).

Other integer factors 2 <= k <= `MAX_U55_UPSCALE` (DeepLabV3's 16x, 3x, 6x, ...) take the same road with
two changes. The NEAREST k x is a chain of vela's NEAREST RESIZEs for the power-of-two part (nearest k1 x
then k2 x is nearest k1*k2 x: floor(floor(o/k2)/k1) = floor(o/(k1*k2))), and for an odd factor m a
CONCAT of m copies along C reshaped to m x the width (NHWC memory: [H, W, m*C] is [H, m*W, C]), then the
rows the same way: pure data movement, exact. For odd k the triangle is box(k) convolved with box(k)
(k=3: [1,2,3,2,1] / 3), so the taps are [1]*k in units of 1/k per axis instead of [1,2,..,2,1] / 2k.
The same nearest chain runs a nearest k x upscale there. arm_ethosu's constraints keep other resizes on
the CPU on U55/U65.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from contextvars import ContextVar
from fractions import Fraction
from functools import lru_cache

import numpy as np
import torch
from torch.fx import Node

from .. import layout
from ..builder import DType, Op
from ..context import LoweringContext, Value
from ..helpers.intmath import lower_shared, output_qparams, rescale
from ..helpers.lowering_choice import choose
from ..helpers.shapes import pad_axis
from ..registry import Quant, aten_target, register_int_rule, register_op

aten = torch.ops.aten
NHWC = layout.NCHW_TO_NHWC

_NEAREST = {aten.upsample_nearest2d.vec, aten.upsample_nearest2d.default,
            aten._upsample_nearest_exact2d.vec, aten._upsample_nearest_exact2d.default}
_BILINEAR = {aten.upsample_bilinear2d.vec, aten.upsample_bilinear2d.default}
_MAX_SIZE = 16384  # TOSA: max(OH, OW, IH, IW) < 16384
_MAX_SCALE = 256  # TOSA level 8K: the reduced ratio n/d


def _args(node: Node) -> tuple[tuple[int, int] | None, bool, tuple[float, float] | None]:
    """(output_size, align_corners, scale_factors) of any overload."""
    target = aten_target(node.target)
    bilinear = target in _BILINEAR
    rest = list(node.args[1:])
    align = False
    if bilinear:
        align = bool(rest.pop(1) if len(rest) > 1 else node.kwargs.get("align_corners", False))
    size = rest[0] if rest else node.kwargs.get("output_size")
    if target._overloadname == "vec":
        scales = rest[1] if len(rest) > 1 else node.kwargs.get("scale_factors")
    else:  # .default: output_size is given; scales_h/scales_w may refine torch's index arithmetic
        sh = rest[1] if len(rest) > 1 else node.kwargs.get("scales_h")
        sw = rest[2] if len(rest) > 2 else node.kwargs.get("scales_w")
        scales = None if sh is None and sw is None else (sh, sw)
    return (None if size is None else tuple(size)), align, (None if scales is None else tuple(scales))


def _torch_weights(target, in_size: int, out_size: int, scale: float | None, align: bool) -> np.ndarray:
    """Torch's [out, in] sampling weights along one axis, from running the op on a one-hot basis."""
    basis = torch.eye(in_size, dtype=torch.float32).reshape(1, in_size, in_size, 1)
    if target._overloadname == "vec":
        args = [[out_size, 1], None] if scale is None else [None, [scale, 1.0]]
    else:
        args = [[out_size, 1], scale, None]
    if target in _BILINEAR:
        args.insert(1, align)
    out = target(basis, *args)
    return out[0, :, :, 0].T.double().numpy()


def _tosa_weights(in_size: int, out_size: int, n: int, d: int, offset: int, bilinear: bool) -> np.ndarray | None:
    """TOSA RESIZE's [out, in] weights along one axis (pseudocode of the spec); None if it would read
    outside the input."""
    weights = np.zeros((out_size, in_size))
    for oy in range(out_size):
        y = oy * d + offset
        iy = y // n
        dy = (y - iy * n) / n
        if iy < -1 or iy >= in_size:
            return None
        iy0, iy1 = max(iy, 0), min(iy + 1, in_size - 1)
        if bilinear:
            weights[oy, iy0] += 1 - dy
            weights[oy, iy1] += dy
        else:
            weights[oy, iy1 if dy >= 0.5 else iy0] = 1.0
    return weights


def _candidates(mode: str, in_size: int, out_size: int, scale: float | None, align: bool):
    """(n, d, offset) triples worth trying for one axis."""
    ratios = []
    if align and in_size > 1 and out_size > 1:
        ratios.append(Fraction(out_size - 1, in_size - 1))
    elif not align:
        if scale is not None and scale > 0:
            ratios.append(Fraction(scale).limit_denominator(1 << 10))
        ratios.append(Fraction(out_size, in_size))
    for r in ratios:
        p, q = r.numerator, r.denominator
        if mode == "nearest":
            # for integer upscales torch's floor(oy * q / p) equals the half-pixel form (which vela
            # takes on every Ethos-U); the weights check below decides
            yield 2 * p, 2 * q, q - p
            yield 2 * p, 2 * q, -p
        elif align:
            yield p, q, 0
        else:
            yield 2 * p, 2 * q, q - p
    yield out_size, 1, 0  # replicate (right when in_size == 1)
    yield 1, 1, 0  # first row only (right when out_size == 1 with align_corners)


def _within_limits(n: int, d: int, offset: int, border: int) -> bool:
    reduced = Fraction(n, d)
    return (0 < n <= 2048 and 0 < d < 16 * n and -n <= offset < 16 * n and -16 * n <= border < n
            and reduced <= _MAX_SCALE)


@lru_cache(maxsize=256)
def axis_params(target, in_size: int, out_size: int, scale: float | None, align: bool):
    """TOSA (n, d, offset, border) reproducing torch along one axis, or None when none does."""
    bilinear = target in _BILINEAR
    mode = "bilinear" if bilinear else "nearest" if "exact" not in str(target) else "exact"
    expected = _torch_weights(target, in_size, out_size, scale, align)
    if expected.shape != (out_size, in_size):  # the scale does not give the traced size
        return None
    for n, d, offset in _candidates(mode, in_size, out_size, scale, align):
        border = (out_size - 1) * d - (in_size - 1) * n + offset
        if not _within_limits(n, d, offset, border):
            continue
        got = _tosa_weights(in_size, out_size, n, d, offset, bilinear)
        if got is not None and np.abs(got - expected).max() <= 1e-5:
            return n, d, offset, border
    return None


def _plan(node: Node):
    """Per-axis parameters [(n, d, offset, border)] for H and W, or a reason string."""
    x = node.args[0].meta["val"]
    out = node.meta["val"]
    if x.dim() != 4:
        return f"resize of a rank-{x.dim()} tensor is not lowered (only 4-d NCHW)"
    if not x.dtype.is_floating_point:
        return f"resize of {x.dtype} is not lowered (float, or int8 in a quantized model)"
    _, align, scales = _args(node)
    target = aten_target(node.target)
    plans = []
    for axis in (0, 1):
        i, o = int(x.shape[2 + axis]), int(out.shape[2 + axis])
        if max(i, o) >= _MAX_SIZE:
            return f"resize size {max(i, o)} exceeds TOSA's limit of {_MAX_SIZE - 1}"
        scale = None if scales is None or scales[axis] is None else float(scales[axis])
        params = axis_params(target, i, o, scale, align)
        if params is None:
            which = "HW"[axis]
            return (f"{target.__name__} (align_corners={align}) from {which}={i} "
                    f"to {o} has no exact TOSA RESIZE parameters (TOSA needs scale numerator <= 2048, "
                    "a downscale of less than 16x and bounded offset/border)")
        plans.append(params)
    return plans


def _resize_support(node: Node, spec) -> str | None:
    plan = _plan(node)
    return plan if isinstance(plan, str) else None


# preserve: exir would otherwise decompose nearest-exact into index arithmetic and a gather
@register_op("resize", sorted(_NEAREST | _BILINEAR, key=str), support=_resize_support, preserve=True,
             quant=Quant.SHARED, int16=False)
def lower_resize(ctx: LoweringContext, node: Node, out_type: DType | None = None) -> Value:
    import tosa_serializer as ts

    (ny, dy, oy, by), (nx, dx, ox, bx) = _plan(node)
    x = ctx.val(node.args[0])
    shape, dtype = ctx.out_meta(node)
    mode = ts.ResizeMode.BILINEAR if aten_target(node.target) in _BILINEAR else ts.ResizeMode.NEAREST
    b = ctx.b
    operands = [ctx.tensor(x, NHWC), b.shape_const([ny, dy, nx, dx]), b.shape_const([oy, ox]),
                b.shape_const([by, bx])]
    return ctx.emit(Op.RESIZE, operands, shape, dtype, NHWC, mode, tosa_type=out_type)


@register_int_rule("resize")
def lower_resize_int(ctx: LoweringContext, node: Node) -> Value:
    """int8 RESIZE; bilinear sums come back as int32 in units of 1/(n_y*n_x) and are RESCALEd (see above)."""
    x = ctx.val(node.args[0])
    q = x.qparams
    if q is None or q.dtype != torch.int8:
        raise ValueError("quantized resize needs an int8 input")
    plan = _plan(node)
    if aten_target(node.target) not in _BILINEAR:
        k = upscale_factor(plan) if ctx.spec.is_u55_subset else None
        if k is None or k in VELA_NEAREST_FACTORS:
            return lower_shared(ctx, node, lower_resize)
        shape, _ = ctx.out_meta(node)  # the NEAREST chain vela takes on U55 (see the module docstring)
        return Value(shape, torch.int8, tensor=_nearest(ctx.b, ctx.tensor(x, NHWC), k), perm=NHWC, qparams=q)
    target = output_qparams(node)
    if ctx.spec.is_u55_subset and upscale_factor(plan):
        return _bilinear_as_depthwise(ctx, node, x, target, upscale_factor(plan))
    (ny, *_), (nx, *_) = plan
    node.meta["arm_storage_dtype"] = torch.int8
    acc = lower_resize(ctx, node, DType.INT32)
    # real = s_in * (acc / N - zp_in); out = real / s_out + zp_out. With s_out == s_in (shared qparams) the
    # zero points cancel: out = round(acc / N) + (zp_out - zp_in).
    if not np.isclose(float(target.scale), float(q.scale), rtol=0, atol=0) or target.dtype != torch.int8:
        raise ValueError("quantized bilinear resize expects its output to share the input's qparams")
    out = rescale(ctx.b, ctx.tensor(acc), 1.0 / (ny * nx), 0, target.zero_point - q.zero_point, DType.INT8)
    return Value(acc.shape, torch.int8, tensor=out, perm=acc.perm, qparams=target)


#: The power-of-two upscales vela 5.2 takes as one NEAREST RESIZE on Ethos-U55/U65.
VELA_NEAREST_FACTORS = (2, 4, 8)
#: The largest integer upscale lowered under the "u55" subset (NEAREST chain + DEPTHWISE_CONV2D): it keeps
#: the separable form's first-pass sums (at most 2k * 128 for even k) exact in int16.
MAX_U55_UPSCALE = 32


def upscale_factor(plan) -> int | None:
    """k when a resize plan is the same k x half-pixel integer upscale on both axes, 2 <= k <=
    MAX_U55_UPSCALE (torch's integer-scale nearest and bilinear(align_corners=False) both plan this way)."""
    if isinstance(plan, str):
        return None
    k = plan[0][0] // 2
    if 2 <= k <= MAX_U55_UPSCALE and all(tuple(axis) == (2 * k, 2, 1 - k, k - 1) for axis in plan):
        return k
    return None


#: How `_bilinear_as_depthwise` filters: "separable" ((k+1)x1 then 1x(k+1), through an exact int16
#: intermediate) or "full" (one (k+1)x(k+1) kernel). Both give the same int32 sums; see `bilinear_form`.
BILINEAR_FORMS = ("separable", "full")
_bilinear_form: ContextVar[str | None] = ContextVar("arm_tosa_core_bilinear_form", default=None)


def bilinear_form(form: str | None) -> AbstractContextManager[None]:
    """Lower the U55 k x bilinear upscales inside this block in `form` (one of `BILINEAR_FORMS`; None: the
    default rule of `depthwise_form`). Ethos-U's `--tune` compiles a partition in each form."""
    return choose(_bilinear_form, form, (*BILINEAR_FORMS, None), "bilinear form")


def depthwise_form(k: int) -> str:
    """The form a k x upscale takes: the one set by `bilinear_form`, else "full" for k = 2 and "separable"
    above. vela 5.2, U55-128, NPU cycles full/separable: 8x8x128 -> 2x 137,592/156,904 (the int16
    pass is slow), 8x8x16 -> 4x 79,584/77,640, 16x16x21 -> 8x (LRASPP's) 2,919,662/1,758,038."""
    return _bilinear_form.get() or ("full" if k == 2 else "separable")


def _depthwise(b, t, taps: torch.Tensor, kh: int, kw: int, in_zp: int) -> object:
    """DEPTHWISE_CONV2D of `t` (NHWC, int8 or int16) with the same int8 `taps` [kh, kw] on every channel,
    no padding; the int32 (int8 input) or int48 (int16) accumulator."""
    channels = t.shape[3]
    acc = DType.INT48 if t.dtype == DType.INT16 else DType.INT32
    weight = taps.reshape(kh, kw, 1, 1).expand(kh, kw, channels, 1)
    shape = [t.shape[0], t.shape[1] - kh + 1, t.shape[2] - kw + 1, channels]
    operands = [t, b.const(weight.to(torch.int8).contiguous(), DType.INT8),
                b.const(torch.zeros(channels, dtype=torch.int64 if acc == DType.INT48 else torch.int32), acc),
                b.zero_point(t.dtype, in_zp), b.zero_point(DType.INT8)]
    return b.op(Op.DEPTHWISE_CONV2D, operands, shape, acc, [0, 0, 0, 0], [1, 1], [1, 1], False, acc)


def _nearest_resize(b, t, k: int):
    """NEAREST k x (k in VELA_NEAREST_FACTORS) of NHWC `t` in the half-pixel form vela takes on U55."""
    import tosa_serializer as ts

    n, d, offset, border = 2 * k, 2, 1 - k, k - 1
    shape = [t.shape[0], k * t.shape[1], k * t.shape[2], t.shape[3]]
    return b.op(Op.RESIZE, [t, b.shape_const([n, d, n, d]), b.shape_const([offset, offset]),
                            b.shape_const([border, border])], shape, t.dtype, ts.ResizeMode.NEAREST)


def _nearest_by_copies(b, t, m: int):
    """NEAREST m x of NHWC `t` by data movement: m copies along C are m x the width in NHWC memory, then
    m copies of each row (as one [N, H, 1, m*W*C] slab) are m x the height."""
    n, h, w, c = t.shape
    wide = b.reshape(b.op(Op.CONCAT, [t] * m, [n, h, w, m * c], t.dtype, 3), [n, h, 1, m * w * c])
    tall = b.op(Op.CONCAT, [wide] * m, [n, h, m, m * w * c], t.dtype, 2)
    return b.reshape(tall, [n, m * h, m * w, c])


def _nearest(b, t, k: int):
    """NEAREST k x of NHWC `t` in forms vela takes on U55: RESIZEs for the power-of-two part of k (largest
    factors first), copies for the odd part (see the module docstring)."""
    odd = k
    while odd % 2 == 0:
        odd //= 2
    power = k // odd
    for factor in sorted(VELA_NEAREST_FACTORS, reverse=True):
        while power % factor == 0 and power > 1:
            t, power = _nearest_resize(b, t, factor), power // factor
    return _nearest_by_copies(b, t, odd) if odd > 1 else t


def _upscale_taps(k: int) -> tuple[torch.Tensor, int]:
    """(per-axis taps, first row of the padded upsample they read): box(k) convolved with these is the
    half-pixel bilinear triangle, in units of 1 / taps.sum() = 1/(2k) (even k) or 1/k (odd k)."""
    if k % 2 == 0:
        return torch.tensor([1] + [2] * (k - 1) + [1], dtype=torch.int32), k // 2
    return torch.ones(k, dtype=torch.int32), (k + 1) // 2


def _bilinear_as_depthwise(ctx: LoweringContext, node: Node, x: Value, target, k: int) -> Value:
    """int8 k x bilinear as NEAREST k x, replicated edges and `_upscale_taps(k)` per axis (see above), in
    the form `depthwise_form(k)` picks.

    "full": one KxK DEPTHWISE_CONV2D (K taps per axis). "separable": a Kx1 pass whose int32 sums (at most
    2k * 128 <= 8192 in magnitude for k <= MAX_U55_UPSCALE) are stored exactly as int16 (RESCALE x 1),
    then a 1xK pass on them: the same integers, in 2K taps per output."""
    b = ctx.b
    t = ctx.tensor(x, NHWC)
    taps, start = _upscale_taps(k)
    kt = len(taps)
    # the input's edge rows/columns replicated once (a small copy), NEAREST k x, then a SLICE keeping the
    # replicated rows the taps read: the k x upsample with replicated edges, without copying the large
    # tensor (vela 5.2 reads the SLICE as the depthwise conv's input window; two CONCATs after the upsample
    # cost ~0.8M of the 3.7M NPU cycles of 16x16x21 -> 8x on U55-128)
    edged = pad_axis(ctx, pad_axis(ctx, t, 1, 1, 1, "replicate"), 2, 1, 1, "replicate")
    up = _nearest(b, edged, k)
    size = [t.shape[0], k * t.shape[1] + kt - 1, k * t.shape[2] + kt - 1, t.shape[3]]
    padded = b.op(Op.SLICE, [up, b.shape_const([0, start, start, 0]), b.shape_const(size)], size, t.dtype)
    units = int(taps.sum())
    if depthwise_form(k) == "full":
        acc = _depthwise(b, padded, taps[:, None] * taps[None, :], kt, kt, 0)
    else:
        columns = rescale(b, _depthwise(b, padded, taps, kt, 1, 0), 1.0, 0, 0, DType.INT16)
        acc = _depthwise(b, columns, taps, 1, kt, 0)
        if units & (units - 1):
            # int48 rescales get a 16-bit multiplier, which rounds 1/units^2 differently from the RESIZE
            # form's 32-bit one: widen exactly to int32 first (a power of two is a pure shift either way)
            acc = rescale(b, acc, 1.0, 0, 0, DType.INT32)
    # acc = units^2 * bilinear (raw int8 codes, zero point included), in the RESIZE form's very rounding:
    # out = round(acc / units^2) + (zp_out - zp_in) (TOSA's RESIZE counts in (2k)^2, for odd k 4 units^2:
    # the same 32-bit multiplier with a shift 2 larger, so the same integers)
    if not np.isclose(float(target.scale), float(x.qparams.scale), rtol=0, atol=0) or target.dtype != torch.int8:
        raise ValueError("quantized bilinear resize expects its output to share the input's qparams")
    out = rescale(b, acc, 1.0 / units**2, 0, target.zero_point - x.qparams.zero_point, DType.INT8)
    shape, _ = ctx.out_meta(node)
    return Value(shape, torch.int8, tensor=out, perm=NHWC, qparams=target)
