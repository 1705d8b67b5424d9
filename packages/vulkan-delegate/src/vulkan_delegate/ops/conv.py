"""Convolution (incl. depthwise/grouped, with a following batch norm, residual add and clamp activation
folded in), batch norm on its own, and 2-D pooling. Shaders `conv2d_gemm` (ungrouped: implicit GEMM),
`conv2d_wino` (fp32 3x3 stride 1: Winograd F(2x2, 3x3)), `conv2d_dw` (depthwise: 4 outputs per invocation),
`conv2d` (grouped: direct), `pool2d`, `binary`."""

from __future__ import annotations

import os

import torch
from torch.fx import Node

from ..graph import Tensor, numel
from ..lower import dim_of, shape_of
from ..opcodes import opcode
from ..registry import FLOATS, aten_key, float_tensors, register
from .elementwise import CLAMPS, INF, broadcast_strides, clamp_bounds

aten = torch.ops.aten
BN = aten._native_batch_norm_legit_no_training.default
#: "0" at lowering: depthwise convolutions take the generic direct loop (conv2d.comp), for timing the old path
DEPTHWISE_ENV = "VKDG_DEPTHWISE"
#: "0" at lowering: pointwise convs of few pixels take the GEMM tile instead of conv2d_1x1_small (the A/B)
POINTWISE_SMALL_ENV = "VKDG_CONV1X1_SMALL"
#: pointwise convs of at most this many output pixels per image (MobileNet's 14x14 and 7x7) split K inside
#: the workgroup (conv2d_1x1_small.comp); fp32 only (fp16 keeps the tensor-core tile)
POINTWISE_SMALL_MAX_PIXELS = 196
#: larger ones too where the GEMM tile gives fewer 64x64 output tiles than this (two per SM of a 132-SM H100):
#: MobileNetV2 b1's 56x56 and 28x28 layers, whose 16..32 output channels fill a quarter to a half of the tile's
#: 64 rows (features.3.conv.2, 144 -> 24 at 56x56: 49 workgroups of the 64x64 tile, 22.6 us on the H100)
POINTWISE_SMALL_BELOW_TILES = 264
#: "0" at lowering: only the pixel limit above (the rule before the tile count), for the A/B
POINTWISE_SMALL_TILES_ENV = "VKDG_CONV1X1_SMALL_TILES"


def _target(node: Node):
    return aten_key(node.target)


def only_user(node: Node, targets) -> Node | None:
    users = list(node.users)
    if len(users) == 1 and _target(users[0]) in targets:
        return users[0]
    return None


def _conv_support(node: Node) -> str | None:
    x = node.args[0].meta["val"]
    if x.dim() not in (3, 4):
        return f"convolution of a rank-{x.dim()} input (the Vulkan delegate runs 1-D and 2-D convolutions)"
    return float_tensors(node)


def _as_2d(v: list, fill: int) -> list:
    """A 1-D convolution's stride/padding/dilation as the 2-D ones of height 1."""
    return [fill, *v] if len(v) == 1 else list(v)


def _bn_params(ctx, bn: Node):
    """Batch norm as y = x * scale + shift, computed in fp32 whatever the parameters' dtype: a
    `model.half()` program's fp16 statistics folded in fp16 rounded scale, mean * scale and the shift
    each (the shift cancels: GoogLeNet's fp16 error was 1.6x eager fp16's); fp32, then one rounding
    when stored."""
    vals = [v.float() if v is not None else None for v in (ctx.const_value(a) for a in bn.args[1:5])]
    if vals[2] is None or vals[3] is None:
        return None
    c = vals[2].numel()
    gamma = vals[0] if vals[0] is not None else torch.ones(c)
    beta = vals[1] if vals[1] is not None else torch.zeros(c)
    scale = gamma / torch.sqrt(vals[3] + float(bn.args[6]))
    return scale, beta - vals[2] * scale


@register("conv2d", [aten.convolution.default],
          ["conv2d", "conv2d_1x1_small", "conv2d_dw", "conv2d_gemm", "conv2d_pack", "conv2d_splitk",
           "conv2d_wino", "conv_transpose2d"],
          support=_conv_support)
def lower_conv(ctx, node: Node) -> None:
    """2-D convolutions, and 1-D ones as 2-D of height 1 (views: no copy); transposed ones gather on
    their own shader."""
    x_node, w_node, b_node, stride, padding, dilation, transposed, _, groups = node.args
    w = ctx.const_value(w_node)
    b = ctx.const_value(b_node) if b_node is not None else None
    weight_const = w is not None and (b_node is None or b is not None)
    last = node
    bn = only_user(node, [BN])
    if weight_const and not transposed and bn is not None and _bn_params(ctx, bn) is not None:
        first = [u for u in bn.users if u.args[1] == 0]
        if len(bn.users) == 1 and first:
            scale, shift = _bn_params(ctx, bn)
            w = w.float() * scale.reshape(-1, *[1] * (w.dim() - 1))  # fp32, rounded once when stored
            b = (b.float() if b is not None else torch.zeros_like(shift)) * scale + shift
            ctx.fused.update([bn, first[0]])
            last = first[0]
    res = None
    # transposed convs have no residual epilogue (conv_transpose2d.comp): their add stays its own dispatch
    add = only_user(last, [aten.add.Tensor]) if groups == 1 and not transposed else None
    if add is not None and "alpha" not in add.kwargs and len(add.args) == 2:
        # conv (+ bn) + residual: the add becomes the GEMM epilogue when its other operand is already
        # computed (lowered earlier) and has the output's shape
        other = add.args[1] if add.args[0] is last else add.args[0]
        if (isinstance(other, Node) and other in ctx.values and isinstance(ctx.values[other], Tensor)
                and list(ctx.values[other].shape) == shape_of(add) == shape_of(node)):
            res = ctx.values[other]
            ctx.fused.add(add)
            last = add
    lo, hi = -INF, INF
    act = only_user(last, CLAMPS)
    if act is not None and isinstance(act.args[0], Node):
        lo, hi = clamp_bounds(act)
        ctx.fused.add(act)
        last = act
    x = ctx.inp(x_node)
    y = ctx.out(last, [*shape_of(node)])
    w_shape = list(w.shape) if weight_const else list(ctx.inp(w_node).shape)
    conv1d = len(x.shape) == 3
    if conv1d:  # [N, C, L] is [N, C, 1, L]
        x, y = (ctx.g.alias(t, [t.shape[0], t.shape[1], 1, t.shape[2]]) for t in (x, y))
        w_shape = [w_shape[0], w_shape[1], 1, w_shape[2]]
        stride, padding, dilation = _as_2d(stride, 1), _as_2d(padding, 0), _as_2d(dilation, 1)
    n, c, h, wd = x.shape
    _, _, kh, kw = w_shape
    _, oc, oh, ow = y.shape
    has_bias = int(b_node is not None or b is not None)
    push = [n, c, h, wd, oc, oh, ow, kh, kw, stride[0], stride[1], padding[0], padding[1],
            dilation[0], dilation[1], groups, has_bias, float(lo), float(hi)]
    pointwise = kh == kw == 1 and tuple(stride) == (1, 1) and tuple(padding) == (0, 0)
    sizes = [n, c, h, wd, oc, oh, ow]
    packed = (groups == 1 and not transposed and weight_const and packs_conv(ctx.sfx, sizes, kh * kw, pointwise))
    if (weight_const and not transposed and groups == 1 and not (packed and ctx.sfx == "f32")
            and _winograd(ctx.sfx, sizes, [kh, kw, *stride, *dilation])):  # (fp32 packs only under VKDG_F32_PACK=1)
        winograd_conv(ctx, x, w, b, res, y, push)
        return
    if packed:  # channel-last padded input, weights in (kh, kw, c) order (conv2d_pack.comp)
        x, wt, push = pack_conv_input(ctx, x, w, push)
    else:
        wt = ctx.g.constant(w.float()) if weight_const else ctx.inp(w_node)
        if conv1d:
            wt = ctx.g.alias(wt, w_shape)
    bt = ctx.g.constant(b.float()) if b is not None else (ctx.inp(b_node) if b_node is not None else wt)
    if transposed:
        ctx.dispatch("conv_transpose2d", [x, wt, bt, y], push, (oh * ow, oc, n))
        return
    if groups == 1 and pointwise and not transposed and not packed and _pointwise_small(ctx.sfx, n, oc, oh * ow):
        slices = pointwise_slices(c)
        channels = pointwise_channels(-(-(oh * ow) // (256 // slices)) * -(-oc // 4) * n)
        ctx.dispatch("conv2d_1x1_small", [x, wt, bt, res if res is not None else y, y],
                     [n, c, oh * ow, oc, has_bias, float(lo), float(hi), int(res is not None), slices, channels],
                     (-(-(oh * ow) // (256 // slices)) * 256, -(-oc // channels), n))
        return
    if groups == 1:
        # implicit GEMM (conv2d_gemm.comp; 1x1 convolutions read the input as the B matrix directly),
        # with bias, the residual and the clamp in its epilogue
        has_res = int(res is not None)
        # the 128x128 block for pointwise convolutions (on the H100 its tensor-core twin ran 1x1 convs 1.6x
        # faster than the 64x64 tile) and packed ones (im2col loads 128-bit; gathered element by element
        # from NCHW, 3x3 convs ran 1.3x slower on it than on the 64x64 tile)
        c = push[1]  # (packed: CP)
        variant = f"{ctx.sfx}big" if packed else gemm_variant(ctx.sfx, oc, oh * ow, n, c * kh * kw,
                                                          big=pointwise and ctx.sfx == "f16")
        tile = 16 if variant.endswith("small") else 128 if variant.endswith("big") else 64
        if packed:  # the batch folded into the GEMM's columns (conv2d_gemm.comp)
            splits = split_k(1, oc, n * push[5] * push[6], c * kh * kw, tile, BIG_MIN_K_SHARE)
        else:
            splits = split_k(n if isinstance(n, int) else None, oc, oh * ow, c * kh * kw, tile, MIN_K_SHARE)
        if packed:  # as many parts as K slices of 32 per part need (conv2d_gemm.comp's split of K)
            share = -(-(c * kh * kw) // splits)
            share = -(-share // 32) * 32
            splits = -(-(c * kh * kw) // share)
        # packed: push word 21 = 2, the batch folded into the GEMM's columns (conv2d_gemm.comp); at batch 1
        # 1 (one image per z: no division in the kernel's address math)
        columns, images, layout = (n * oh * ow, 1, 2 if n > 1 else 1) if packed else (oh * ow, n, 0)
        if splits == 1:
            ctx.dispatch("conv2d_gemm", [x, wt, bt, res if res is not None else y, y],
                         [*push, has_res, 1, layout], (columns, oc, images), variant)
            return
        part = ctx.g.new_tensor([splits, n, oc, oh, ow])
        ctx.dispatch("conv2d_gemm", [x, wt, bt, part, part], [*push, 0, splits, layout],
                     (columns, oc, images * splits), variant)
        total = n * oc * oh * ow
        ctx.dispatch("conv2d_splitk", [part, bt, res if res is not None else part, y],
                     [total, oc, oh * ow, splits, has_bias, float(lo), float(hi), has_res], (total,))
        return
    if groups == c == oc and isinstance(ow, int) and os.environ.get(DEPTHWISE_ENV) != "0":
        # depthwise: 4 adjacent outputs of a channel row per invocation (conv2d_dw.comp)
        owq = -(-ow // 4)
        ctx.dispatch("conv2d_dw", [x, wt, bt, y],
                     [n * c * oh * owq, c, h, wd, oh, ow, kh, kw, stride[0], stride[1], padding[0], padding[1],
                      dilation[0], dilation[1], has_bias, float(lo), float(hi), owq], (n * c * oh * owq,))
        return
    # grouped (and depthwise under VKDG_DEPTHWISE=0): the direct loop (a few taps per output, no reuse
    # for a GEMM tile)
    ctx.dispatch("conv2d", [x, wt, bt, y],
                 [n, c, h, wd, oc, oh, ow, kh, kw, stride[0], stride[1], padding[0], padding[1],
                  dilation[0], dilation[1], groups, has_bias, float(lo), float(hi)], (oh * ow, oc, n))


#: "8" at lowering: every conv2d_1x1_small workgroup splits K in 8 slices (the kernel before pointwise_slices),
#: for the A/B
POINTWISE_SLICES_ENV = "VKDG_CONV1X1_SLICES"


def pointwise_slices(k: int) -> int:
    """conv2d_1x1_small's K slices for a reduction of `k` channels: 8 (32 pixels per workgroup) below 256, 16
    below 512, else 32 (8 pixels): each invocation's loop of dependent loads stays at most 32 long."""
    if os.environ.get(POINTWISE_SLICES_ENV) == "8":
        return 8
    return 8 if k < 256 else 16 if k < 512 else 32


#: "4" or "8" at lowering: every conv2d_1x1_small workgroup computes that many output channels (the A/B)
POINTWISE_CHANNELS_ENV = "VKDG_CONV1X1_OCT"
#: conv2d_1x1_small computes 8 output channels per workgroup (each input value read for twice the channels, half
#: the workgroups) where 4 give at least this many workgroups. On the H100 (bench/results/gpu/README.md, 23:55):
#: MobileNetV2 b1's 24 -> 144 expansions at 56x56 (3528 workgroups at 4) 10.4 -> 8.3 us, 32 -> 192 at 28x28 (1200)
#: 6.2 -> 5.8, 96 -> 576 at 14x14 (1008) 8.1 -> 7.5; but its projections (112-600 workgroups) 0.4-3.5 us slower,
#: and the 160 -> 960 expansions at 7x7 (480) 7.1 -> 8.8 us
POINTWISE_WIDE_FROM = 1000


def pointwise_channels(groups: int) -> int:
    """conv2d_1x1_small's output channels per workgroup for a conv that gives `groups` workgroups at 4: 8 from
    POINTWISE_WIDE_FROM, else 4 (VKDG_CONV1X1_OCT=4 / 8 forces one)."""
    forced = os.environ.get(POINTWISE_CHANNELS_ENV)
    if forced in ("4", "8"):
        return int(forced)
    return 8 if groups >= POINTWISE_WIDE_FROM else 4


def _pointwise_small(sfx: str, n, oc: int, pixels) -> bool:
    """Whether a pointwise conv runs on conv2d_1x1_small (static sizes, fp32): few pixels per image, or an
    output the 64x64 GEMM tile covers with fewer than POINTWISE_SMALL_BELOW_TILES tiles."""
    if (sfx != "f32" or not isinstance(n, int) or not isinstance(pixels, int)
            or os.environ.get(POINTWISE_SMALL_ENV) == "0"):
        return False
    if pixels <= POINTWISE_SMALL_MAX_PIXELS:
        return True
    below = int(os.environ.get(POINTWISE_SMALL_TILES_ENV, POINTWISE_SMALL_BELOW_TILES))
    return -(-oc // 64) * -(-pixels // 64) * n < below


#: "0" at lowering: fp32 3x3 stride-1 convolutions keep the implicit GEMM (conv2d_gemm.comp), for the A/B
WINOGRAD_ENV = "VKDG_WINOGRAD"


def _winograd(sfx: str, sizes: list, kernel: list) -> bool:
    """Whether an ungrouped convolution (sizes N, C, H, W, OC, OH, OW; kernel KH, KW, SH, SW, DH, DW) runs by
    Winograd F(2x2, 3x3) (conv2d_wino.comp, fp32 arithmetic): 3x3, stride 1, no dilation, static sizes; fp32,
    or fp16 where it is one dispatch for three (_winograd_f16)."""
    return (sfx in ("f32", "f16") and kernel == [3, 3, 1, 1, 1, 1] and all(isinstance(v, int) for v in sizes)
            and os.environ.get(WINOGRAD_ENV) != "0" and (sfx == "f32" or _winograd_f16(sizes)))


def _winograd_f16(sizes: list) -> bool:
    """An fp16 3x3 convolution runs by Winograd only where the tensor-core path would split K (its packed output
    gives too few 128x128 blocks: pack, GEMM parts and their sum, three launch-bound dispatches) and Winograd
    fills TARGET_TILES // 2 workgroups unsplit (one dispatch). On the H100, ResNet-18 b1's 56x56 convs took
    34 us packed (5 + 23 + 5), 27 us by fp16 Winograd; its 28x28..7x7 ones split Winograd too and stay packed
    (24-30 us against fp32 Winograd's 28-31), as do batched ones (ResNet-50 b32's fill the tensor cores)."""
    n, c, _, _, oc, oh, ow = sizes
    if split_k(1, oc, n * oh * ow, c * 9, 128, BIG_MIN_K_SHARE) == 1:
        return False
    return _winograd_groups(n, oc, oh, ow) >= TARGET_TILES // 2


def _winograd_groups(n: int, oc: int, oh: int, ow: int) -> int:
    """conv2d_wino's workgroups before any split: 16 output channels x 16 2x2 tiles each."""
    return -(-(-(-oh // 2) * -(-ow // 2)) // WINO_BLOCK) * -(-oc // WINO_BLOCK) * n


def winograd_splits(n: int, c: int, oc: int, oh: int, ow: int) -> tuple[int, int]:
    """(parts, input channels per part) of conv2d_wino's split over input channels: 1 part where the output gives
    TARGET_TILES // 2 workgroups, else up to TARGET_TILES // workgroups parts of whole 16-channel steps."""
    cp = -(-c // WINO_BLOCK) * WINO_BLOCK
    groups = _winograd_groups(n, oc, oh, ow)
    splits = 1 if groups >= TARGET_TILES // 2 else max(1, min(-(-TARGET_TILES // groups), cp // (2 * WINO_BLOCK)))
    share = -(-cp // splits)
    share = -(-share // WINO_BLOCK) * WINO_BLOCK  # whole steps of 16 input channels per part
    return -(-cp // share), share


#: conv2d_wino.comp's block: 16 output channels x 16 tiles per workgroup, 16 input channels per step
WINO_BLOCK = 16


def winograd_conv(ctx, x: Tensor, w: torch.Tensor, b: torch.Tensor | None, res: Tensor | None, y: Tensor,
                  push: list) -> None:
    """One conv2d_wino dispatch (and a conv2d_splitk sum where the output gives too few workgroups: the
    input channels split, each part's output partial summed there)."""
    n, c, h, wd, oc, oh, ow = push[:7]
    cp, ocp = (-(-v // WINO_BLOCK) * WINO_BLOCK for v in (c, oc))
    tw = -(-ow // 2)
    tiles = -(-oh // 2) * tw
    splits, share = winograd_splits(n, c, oc, oh, ow)
    wt = ctx.g.constant(w.float())  # the plain [OC][C][3][3] weights: the shader transforms them (G g G^T)
    bt = ctx.g.constant(b.float()) if b is not None else wt
    has_bias, lo, hi, has_res = int(b is not None), push[17], push[18], int(res is not None)
    wpush = [n, c, h, wd, oc, oh, ow, push[11], push[12], tw, tiles, ocp, cp, splits, has_bias, lo, hi, has_res, share]
    threads = (-(-tiles // WINO_BLOCK) * 256, ocp // WINO_BLOCK, n * splits)
    if splits == 1:
        ctx.dispatch("conv2d_wino", [x, wt, bt, res if res is not None else y, y], wpush, threads)
        return
    part = ctx.g.new_tensor([splits, n, oc, oh, ow])
    ctx.dispatch("conv2d_wino", [x, wt, bt, part, part], wpush, threads)
    total = n * oc * oh * ow
    ctx.dispatch("conv2d_splitk", [part, bt, res if res is not None else part, y],
                 [total, oc, oh * ow, splits, has_bias, lo, hi, has_res], (total,))


#: workgroups (output tiles) a convolution should give the GPU; fewer (late layers at batch 1)
#: split K over more workgroups, each K share at least MIN_K_SHARE long
TARGET_TILES, MIN_K_SHARE = 256, 128
#: a GEMM whose output gives fewer 64x64 tiles than SMALL_BELOW, with K at most SMALL_MAX_K (a 16x16
#: tile walks K alone), runs on the 16x16 tile (`small` variants of matmul / conv2d_gemm): 16x the
#: workgroups. On the H100: MobileNetV2 b1's 1x1 convs at 28x28..7x7 (K <= 960) went from 21..28 us to
#: 7..19 us; ResNet-18's 3x3 convs at 28x28 (K = 1152) from 39 to 77 us, so those keep the 64x64 tile.
SMALL_BELOW, SMALL_MAX_K = 32, 1024
#: an fp16 GEMM (matmul, conv2d_gemm) whose output gives at least BIG_FROM 128x128 tiles (two per SM of a
#: 132-SM H100) runs on the 128x128 tile (`f16big`: 8 tensor-core subgroups where the device has
#: cooperative matrices, else the 64x64 tile over its quarters); split over K only when packed.
BIG_FROM = 264
#: an fp32 matmul whose output gives at least F32_BIG_FROM 128x128 blocks (three waves of two per SM on a
#: 132-SM H100) runs on matmul's `f32big` (an 8x8 register block per invocation): on the H100 GEMM 4096^3
#: 6.14 -> 4.15 ms (22.4 -> 33.1 TFLOP/s), but 2100x1000x2056 (289 blocks, a second wave of 25) 449 -> 531 us
F32_BIG_FROM = 792
#: "0" at lowering: fp32 matmuls keep the 64x64 tile (for timing it)
F32_BIG_ENV = "VKDG_F32_BIG"


def gemm_variant(sfx: str, m, n, batch, k, big: bool = False) -> str:
    """The matmul / conv2d_gemm variant of an M x N (x batch) output summed over K: `sfx` (the compute
    dtype's), its `small` twin, or with `big` (the caller's shader has the 128x128 tile in that dtype:
    matmul's f16big / f32big, conv2d_gemm's f16big) its `big` twin; symbolic shapes keep the 64x64 tile."""
    if not all(isinstance(v, int) for v in (m, n, batch, k)):
        return sfx
    blocks = -(-m // 128) * -(-n // 128) * batch
    if big and (sfx == "f16" and blocks >= BIG_FROM or
                sfx == "f32" and blocks >= F32_BIG_FROM and os.environ.get(F32_BIG_ENV) != "0"):
        return f"{sfx}big"
    tiles = -(-m // 64) * -(-n // 64) * batch
    return f"{sfx}small" if tiles < SMALL_BELOW and k <= SMALL_MAX_K else sfx


def split_k(n: int | None, oc: int, pixels, k: int, tile: int = 64, min_share: int = MIN_K_SHARE) -> int:
    """How many parts conv2d_gemm splits K into (1: none) with `tile` x `tile` output blocks, each part
    at least `min_share` of K: static shapes only."""
    if n is None or not isinstance(pixels, int):
        return 1
    tiles = -(-pixels // tile) * -(-oc // tile) * n
    if tiles >= TARGET_TILES // 2:
        return 1
    return max(1, min(-(-TARGET_TILES // tiles), k // min_share, 32))


#: "0" at lowering: fp16 convolutions keep the NCHW implicit GEMM (no conv2d_pack), for timing the old path
CONV_PACK_ENV = "VKDG_CONV_PACK"
#: "1" at lowering: fp32 convolutions run packed as fp16 ones do, on the fp32 128x128 block (`f32big`). Not
#: the default: ResNet-18 b1 on the H100 took 791 us of dispatches packed against 776 us on the 64x64 tile
F32_PACK_ENV = "VKDG_F32_PACK"
#: K share of one split of a packed (128x128-tile) convolution: two K slices of 32
BIG_MIN_K_SHARE = 64


def packs_conv(sfx: str, sizes: list, taps: int, pointwise: bool = False) -> bool:
    """Whether an ungrouped fp16 convolution (sizes N, C, H, W, OC, OH, OW: static only; 1x1 ones as
    _packs_1x1 says, `pointwise`: stride 1, no padding) runs packed: its input
    copied channel-last with the padding inside (conv2d_pack.comp), then the 128x128 tile (`f16big`: on
    tensor cores `f16bigcoop`, whose im2col loads are then 128-bit, 8 channels of one tap), split over K
    where the output gives too few blocks. Fewer than 8 channels (a stem, padded to 8) only where the
    output gives BIG_FROM blocks: on the H100, ResNet-18 b1's 7x7 stem took 60 us packed (pack, 3 K
    splits, their sum) against 35 us on the 64x64 tile."""
    if sfx not in ("f16", "f32") or not all(isinstance(v, int) for v in sizes):
        return False
    if os.environ.get(CONV_PACK_ENV) == "0" or sfx == "f32" and os.environ.get(F32_PACK_ENV) != "1":
        return False
    n, c, _, _, oc, oh, ow = sizes
    if taps == 1:
        return _packs_1x1(n, c, oc, oh * ow, pointwise)
    return c >= 8 or -(-oc // 128) * -(-(oh * ow) // 128) * n >= BIG_FROM


#: the 64x64 output tiles from which a batched 1x1 convolution may run packed (_packs_1x1)
PACK_1X1_MIN_TILES = TARGET_TILES // 2


def _packs_1x1(n: int, c: int, oc: int, pixels: int, pointwise: bool) -> bool:
    """A batched 1x1 convolution (ResNet-50 b32's) of at least 64 channels and PACK_1X1_MIN_TILES 64x64 tiles
    runs packed where that gains: strided or padded ones (else gathered element by element on the 64x64
    tile; the pack samples only the pixels read), and pointwise ones whose output gives fewer than
    BIG_FROM 128x128 blocks or wastes over a fifth of them on the per-image pixel count (7x7 = 49 pixels
    in a 128-wide block; packed, the batch fills the columns). At batch 1 they keep NCHW, where the pack
    would be one more launch-bound dispatch."""
    if n == 1 or c < 64 or -(-oc // 64) * -(-pixels // 64) * n < PACK_1X1_MIN_TILES:
        return False
    per_image = -(-pixels // 128) * 128
    return not pointwise or -(-oc // 128) * (per_image // 128) * n < BIG_FROM or per_image * 4 > pixels * 5


def pack_conv_input(ctx, x: Tensor, w: torch.Tensor, push: list) -> tuple[Tensor, Tensor, list]:
    """The packed input (one conv2d_pack dispatch), the weights re-ordered to [OC, KH, KW, CP] (CP: C
    rounded up to 8, zero rows past C) and conv2d_gemm's push with the packed sizes (C = CP, H, W with the
    padding, no padding left)."""
    n, c, h, wd, ph, pw = push[0], push[1], push[2], push[3], push[11], push[12]
    cp, hp, wp, sh, sw = -(-c // 8) * 8, h + 2 * ph, wd + 2 * pw, 1, 1
    if push[7] == push[8] == 1:  # 1x1: only the sampled pixels (OH x OW), then a 1x1 stride-1 GEMM
        hp, wp, sh, sw = push[5], push[6], push[9], push[10]
    packed = ctx.g.new_tensor([n, hp, wp, cp])
    total = n * hp * wp * cp
    ctx.dispatch("conv2d_pack", [x, packed], [total, c, h, wd, cp, hp, wp, ph, pw, sh, sw], (total,))
    w = w.reshape(w.shape[0], c, push[7], push[8])
    wk = torch.nn.functional.pad(w.float(), (0, 0, 0, 0, 0, cp - c)).permute(0, 2, 3, 1).contiguous()
    push = list(push)
    push[1:4], push[11:13] = [cp, hp, wp], [0, 0]
    if sh != 1 or sw != 1:
        push[9:11] = [1, 1]
    return packed, ctx.g.constant(wk), push


def _bn_support(node: Node) -> str | None:
    if any(a is not None and not isinstance(a, Node) for a in node.args[1:5]):
        return "batch norm with non-tensor statistics"
    return float_tensors(node)


@register("batch_norm", [BN], ["binary"], support=_bn_support)
def lower_batch_norm(ctx, node: Node) -> None:
    params = _bn_params(ctx, node)
    if params is None:
        raise ValueError("batch norm statistics must be constants")
    x = ctx.inp(node.args[0])
    c = x.shape[1]
    view = [1, c] + [1] * (len(x.shape) - 2)
    scale = ctx.g.constant(params[0].reshape(view).float())
    shift = ctx.g.constant(params[1].reshape(view).float())
    tmp = ctx.g.new_tensor(x.shape)
    y = ctx.g.new_tensor(x.shape)
    sizes = [1] * (6 - len(x.shape)) + list(x.shape)
    n = numel(x.shape)
    for op, a, b, o in (("mul", x, scale, tmp), ("add", tmp, shift, y)):
        ctx.dispatch("binary", [a, b, o], [opcode("binary", op), n, *sizes, *broadcast_strides(a.shape, x.shape),
                                          *broadcast_strides(b.shape, x.shape), 1.0], (n,))
    ctx.values[node] = [y, None, None]


MAXPOOL = aten.max_pool2d_with_indices.default
POOLS = [MAXPOOL, aten.avg_pool2d.default, aten._adaptive_avg_pool2d.default]  # the forms exir's graphs hold


def _pool_support(node: Node) -> str | None:
    """ceil_mode needs nothing of its own: the output size comes from the node, pool2d.comp skips window
    taps outside the input, and its average divisor is torch's (window clipped to the padded input)."""
    x = node.args[0].meta["val"]
    if x.dim() != 4:
        return f"pooling of a rank-{x.dim()} input"
    t = _target(node)
    if t == MAXPOOL and any(u.args[1] != 0 for u in node.users):
        return "max pool indices are used"
    if t == aten._adaptive_avg_pool2d.default:
        h, w = x.shape[2:]
        oh, ow = node.args[1]
        if not all(isinstance(v, int) for v in (h, w)) or h % oh or w % ow:
            return "adaptive pool whose output does not divide the input"
    if x.dtype not in FLOATS:  # (max pool's int64 indices output is unused: checked above)
        return f"dtype {x.dtype} (the Vulkan delegate pools float32/float16 tensors)"
    return None


def _pair(v, default):
    if v is None or (isinstance(v, list | tuple) and len(v) == 0):
        v = default
    return list(v) * 2 if isinstance(v, list | tuple) and len(v) == 1 else (list(v) if isinstance(v, list | tuple) else [v, v])


@register("pool2d", POOLS, ["pool2d"], support=_pool_support)
def lower_pool(ctx, node: Node) -> None:
    t = _target(node)
    x = ctx.inp(node.args[0])
    n, c, h, w = x.shape
    a = list(node.args) + [None] * 8
    mode, include_pad, divisor = 0, 1, 0
    if t == aten._adaptive_avg_pool2d.default:
        oh, ow = node.args[1]
        k = [h // oh, w // ow]
        s, p, d, mode = k, [0, 0], [1, 1], 1
    else:
        k = _pair(a[1], None)
        s = _pair(a[2], k)
        p = _pair(a[3], [0, 0])
        if t == aten.avg_pool2d.default:
            d, mode = [1, 1], 1
            include_pad = 1 if a[5] is None else int(a[5])
            divisor = 0 if a[6] is None else int(a[6])
        else:
            d = _pair(a[4], [1, 1])
    y = ctx.g.new_tensor(shape_of(node) if t != MAXPOOL else ctx_shape_first(node))
    ctx.values[node] = [y, None] if t == MAXPOOL else y
    _, _, oh, ow = y.shape
    ctx.dispatch("pool2d", [x, y], [n * c, h, w, oh, ow, k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1],
                                    mode, include_pad, divisor], (oh * ow, n * c, 1))


def ctx_shape_first(node: Node) -> list:
    return [dim_of(v) for v in node.meta["val"][0].shape]
