"""Cases for the few structured ops whose tensors must have related shapes (see op_sweep.py).

`recipe_cases(family, target)` returns (label, module, inputs) triples, or None to let op_sweep derive
the cases from the schema. Keyed by the aten op name, so a new overload of a known op is covered too.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

aten = torch.ops.aten


class _Fn(torch.nn.Module):
    def __init__(self, fn, **consts) -> None:
        super().__init__()
        self.fn = fn
        for k, v in consts.items():
            self.register_buffer(k, v)

    def forward(self, *xs):
        return self.fn(self, *xs)


def _r(*shape):
    return torch.randn(shape)


def _conv():
    out = []
    for groups, stride, pad, dil, mode in [(1, 1, 0, 1, "zeros"), (1, 2, 1, 1, "zeros"), (2, 1, 1, 2, "zeros"),
                                           (4, 1, 1, 1, "zeros"), (1, 1, 1, 1, "reflect"),
                                           (1, 1, 1, 1, "circular")]:
        conv = torch.nn.Conv2d(4, 8, 3, stride, pad, dil, groups, padding_mode=mode)
        out.append((f"conv2d g{groups} s{stride} p{pad} d{dil} {mode}", conv, (_r(1, 4, 9, 9),)))
    out.append(("conv1d", torch.nn.Conv1d(3, 5, 3, padding=1), (_r(2, 3, 10),)))
    out.append(("conv_transpose2d", torch.nn.ConvTranspose2d(4, 3, 2, stride=2), (_r(1, 4, 5, 5),)))
    return out


def _matmul():
    return [("mm", _Fn(lambda s, a, b: a @ b), (_r(3, 4), _r(4, 5))),
            ("bmm", _Fn(lambda s, a, b: torch.bmm(a, b)), (_r(2, 3, 4), _r(2, 4, 5))),
            ("matmul r4", _Fn(lambda s, a, b: a @ b), (_r(2, 2, 3, 4), _r(2, 2, 4, 5))),
            ("matmul broadcast", _Fn(lambda s, a, b: a @ b), (_r(2, 3, 4), _r(4, 5))),
            ("matmul const", _Fn(lambda s, a: a @ s.w, w=_r(4, 5)), (_r(3, 4),)),
            ("linear", torch.nn.Linear(6, 4), (_r(2, 3, 6),)),
            ("linear no bias", torch.nn.Linear(6, 4, bias=False), (_r(5, 6),)),
            ("addmm", _Fn(lambda s, x: torch.addmm(s.b, x, s.w, beta=0.5, alpha=2), b=_r(5), w=_r(4, 5)),
             (_r(3, 4),))]


def _norms():
    bn = torch.nn.BatchNorm2d(4).eval()
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    return [("batch_norm", bn, (_r(2, 4, 5, 5),)),
            ("batch_norm 1d", torch.nn.BatchNorm1d(4).eval(), (_r(3, 4, 6),)),
            ("batch_norm batch stats", _Fn(lambda s, x: F.batch_norm(x, None, None, training=True)),
             (_r(2, 4, 3, 3),)),
            ("layer_norm", torch.nn.LayerNorm(6), (_r(2, 3, 6),)),
            ("layer_norm 2d no affine", torch.nn.LayerNorm([5, 6], elementwise_affine=False), (_r(2, 5, 6),)),
            ("group_norm", torch.nn.GroupNorm(2, 4), (_r(2, 4, 3, 3),))]


def _attention():
    q, k, v = _r(1, 2, 8, 16), _r(1, 2, 8, 16), _r(1, 2, 8, 16)
    return [("sdpa", _Fn(lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v)), (q, k, v)),
            ("sdpa causal", _Fn(lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
             (q, k, v)),
            ("sdpa mask", _Fn(lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=s.m),
                              m=_r(8, 8)), (q, k, v))]


def _indexing():
    idx = torch.tensor([[0, 2], [1, 3]])
    return [("embedding", torch.nn.Embedding(10, 4), (torch.tensor([[1, 2], [3, 9]]),)),
            ("index_select", _Fn(lambda s, x: torch.index_select(x, 1, s.i), i=torch.tensor([0, 2])),
             (_r(3, 4),)),
            ("index_select runtime", _Fn(lambda s, x, i: torch.index_select(x, -1, i)),
             (_r(3, 4), torch.tensor([3, 0]))),
            ("index tensor", _Fn(lambda s, x: x[s.i], i=idx), (_r(4, 5),)),
            ("index tensor 2", _Fn(lambda s, x: x[:, s.i[0]]), (_r(4, 5),))]


def _where():
    return [("where", _Fn(lambda s, x, y: torch.where(x > 0, x, y)), (_r(2, 3), _r(2, 3))),
            ("where broadcast", _Fn(lambda s, x, y: torch.where(x > 0, x, y)), (_r(2, 3), _r(3))),
            ("where scalar", _Fn(lambda s, x: torch.where(x > 0, x, 0.5)), (_r(2, 3, 4),))]


def _slice_assign(s, x, y):
    z = x.clone()
    z[:, 1:3] = y  # slice + aten.copy + slice_scatter (Swin-T's shifted-window mask)
    return z


def _copy():
    return [("copy into a slice", _Fn(_slice_assign), (_r(2, 4), _r(2, 2))),
            ("copy broadcast", _Fn(_slice_assign), (_r(2, 4), _r(2, 1)))]


def _factories():
    return [("arange", _Fn(lambda s, x: x + torch.arange(4)), (_r(2, 4),)),
            ("full_like", _Fn(lambda s, x: x * torch.full_like(x, 2.0)), (_r(2, 4),)),
            ("ones zeros", _Fn(lambda s, x: x + torch.ones(4) - torch.zeros(2, 4)), (_r(2, 4),)),
            ("zeros_like", _Fn(lambda s, x: x + torch.zeros_like(x)), (_r(3),))]


def _resize():
    x = _r(1, 3, 4, 5)
    out = []
    for mode, corners in [("nearest", None), ("bilinear", False), ("bilinear", True), ("nearest-exact", None)]:
        for size in ((8, 10), (6, 7)):
            out.append((f"{mode} corners={corners} size={size}",
                        _Fn(lambda s, x, mode=mode, corners=corners, size=size:
                            F.interpolate(x, size=size, mode=mode, align_corners=corners)), (x,)))
    out.append(("scale 2", _Fn(lambda s, x: F.interpolate(x, scale_factor=2.0, mode="bilinear")), (x,)))
    return out


def _clamp():
    return [("clamp tensor bounds", _Fn(lambda s, x, lo, hi: torch.clamp(x, lo, hi)),
             (_r(2, 3), -_r(2, 3).abs(), _r(3).abs())),
            ("clamp min tensor", _Fn(lambda s, x, lo: torch.clamp(x, min=lo)), (_r(2, 3, 4), _r(4))),
            ("clamp scalars", _Fn(lambda s, x: torch.clamp(x, -0.5, 0.5)), (_r(2, 3),))]


def _unfold():
    return [("unfold", _Fn(lambda s, x: x.unfold(1, 2, 1)), (_r(2, 5, 3),)),
            ("unfold step 2, dim -1", _Fn(lambda s, x: x.unfold(-1, 3, 2)), (_r(2, 3, 7),))]


def _scatter():
    return [("slice_scatter", _Fn(lambda s, x, src: torch.slice_scatter(x, src, dim=1, start=1, end=3)),
             (_r(2, 5, 3), _r(2, 2, 3))),
            ("select_scatter", _Fn(lambda s, x, src: torch.select_scatter(x, src, 0, 1)), (_r(3, 4), _r(4)))]


def _cache_write():  # a KV cache's update: positions along dim 2 (constant or runtime)
    pos = torch.tensor([1, 3])
    return [("index_copy const", _Fn(lambda s, c, v: c.index_copy(2, s.p, v), p=pos), (_r(1, 2, 5, 3), _r(1, 2, 2, 3))),
            ("index_copy runtime", _Fn(lambda s, c, p, v: c.index_copy(2, p, v)), (_r(1, 2, 5, 3), pos, _r(1, 2, 2, 3))),
            ("index_put runtime", _Fn(lambda s, c, p, v: _set_positions(c, p, v)), (_r(1, 2, 5, 3), pos, _r(1, 2, 2, 3)))]


def _set_positions(cache, pos, new):
    out = cache.clone()
    out[:, :, pos] = new  # exports as index_put with (None, None, pos)
    return out


def _gather():
    return [("gather const index", _Fn(lambda s, x: torch.gather(x, 1, s.i), i=torch.tensor([[2, 0], [1, 1]])),
             (_r(2, 3),)),
            ("gather runtime index, dim -1", _Fn(lambda s, x, i: torch.gather(x, -1, i)),
             (_r(2, 3, 4), torch.tensor([[[3, 0]] * 3] * 2)))]


def _pixel_shuffle():
    return [("pixel_shuffle", torch.nn.PixelShuffle(2), (_r(1, 8, 3, 4),)),
            ("pixel_unshuffle", torch.nn.PixelUnshuffle(2), (_r(1, 2, 4, 6),)),
            ("pixel_shuffle rank 5", torch.nn.PixelShuffle(2), (_r(2, 1, 4, 2, 3),))]


def _rfft():  # the sweep's specs lack "+fft": these stay on the CPU naming it (op_tables' fft family lowers them)
    return [("rfft", _Fn(lambda s, x: torch.view_as_real(torch.fft.rfft(x))), (_r(2, 16),)),
            ("rfft2", _Fn(lambda s, x: torch.view_as_real(torch.fft.rfft2(x))), (_r(1, 8, 16),))]


def _shift():  # integer tensors: INT-profile families (the FP sweep keeps them on the CPU with the reason)
    x = torch.randint(-50, 50, (2, 3), dtype=torch.int32)
    return [("lshift scalar", _Fn(lambda s, a: a << 2), (x,)),
            ("rshift tensor", _Fn(lambda s, a, b: torch.bitwise_right_shift(a, b)),
             (x, torch.randint(0, 4, (3,), dtype=torch.int32)))]


_RECIPES = {"clamp": _clamp, "unfold": _unfold, "unfold_copy": _unfold, "slice_scatter": _scatter,
            "select_scatter": _scatter, "convolution": _conv, "conv2d": _conv, "conv1d": _conv, "conv_transpose2d": _conv,
            "mm": _matmul, "bmm": _matmul, "matmul": _matmul, "linear": _matmul, "addmm": _matmul,
            "_native_batch_norm_legit_no_training": _norms, "_native_batch_norm_legit": _norms,
            "native_layer_norm": _norms, "native_group_norm": _norms,
            "scaled_dot_product_attention": _attention, "embedding": _indexing, "index_select": _indexing,
            "index": _indexing, "where": _where, "arange": _factories, "full": _factories,
            "full_like": _factories, "ones": _factories, "ones_like": _factories, "zeros": _factories,
            "zeros_like": _factories, "scalar_tensor": _factories, "_upsample_nearest_exact2d": _resize,
            "upsample_bilinear2d": _resize, "upsample_nearest2d": _resize, "gather": _gather,
            "pixel_shuffle": _pixel_shuffle, "pixel_unshuffle": _pixel_shuffle, "_fft_r2c": _rfft,
            "view_as_real": _rfft, "view_as_real_copy": _rfft, "__lshift__": _shift, "__rshift__": _shift,
            "bitwise_left_shift": _shift, "bitwise_right_shift": _shift, "index_copy": _cache_write,
            "index_put": _cache_write, "copy": _copy}


def recipe_cases(family: str, target, done: set) -> list | None:
    """Recipe cases for `target`'s op, or None; `done` holds the recipes already used in this
    generation (overloads of one op share their recipe's cases)."""
    op = target._schema.name.split("::")[1]
    make = _RECIPES.get(op)
    if make is None:
        return None
    if (family, make) in done:
        return []
    done.add((family, make))
    torch.manual_seed(1)
    return make()
