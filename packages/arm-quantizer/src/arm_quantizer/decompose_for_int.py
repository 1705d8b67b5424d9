"""Before INT annotation: composite ops with no integer rule become ops that have one.

softmax/log_softmax, layer_norm, group_norm, var/var_mean, division, glu, prelu, vector norms, addmm, GRU
(unrolled over its steps) and scaled_dot_product_attention are re-traced with make_fx into aten ops whose
families the INT lowering runs (amax, sub, exp and reciprocal/rsqrt/log as TABLE, sum/mean, mul, add, bmm,
data movement). torch's own decompositions (torch._decomp) do the work, steered by these overrides (and
`_vector_norm`, `_addmm`):
- a / b becomes a * reciprocal(b): reciprocal is a 256-entry int8 TABLE, TOSA INT has no division;
- var_mean becomes mean, x - mean, (x - mean)^2, mean: torch's goes to prims.var, which has no rule;
- scaled_dot_product_attention is decomposed here: torch's goes through _safe_softmax and a -inf
  additive mask, and an observer that sees -inf gives an infinite scale. A causal or boolean mask
  instead multiplies exp(s - max s) by a 0/1 keep mask before the row sum (same result as the -inf
  mask for every row with an unmasked entry). A row masked entirely gives 0, as torch's safe softmax
  does (its sum is 0: the reciprocal is replaced by 0), when the mask can have such a row (a runtime
  bool mask, or a constant one that has one). A constant additive mask counts entries at or below
  finfo.min / 2 as masked, so a row of only such finite entries also gives 0 (torch: the row average).
  A runtime mask built as `where(keep, bias, finfo.min)` (T5's position bias under its padding mask)
  is split the same way: `keep` masks the exps and only `where(keep, bias, 0)` is added, so no observer
  sees finfo.min (its scale, ~1e36, made every bias entry 0 and the INT lowering fail).
Every new node inherits the decomposed node's metadata (nn_module_stack, so set_module_name/type
still apply), so the annotator gives each intermediate its own Q/DQ. Constant sub-graphs left by a
decomposition (the causal mask) are folded into buffers by `fold_constants`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from functools import partial

import torch
from torch._decomp import get_decompositions
from torch.fx import GraphModule, Node
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.node import map_arg
from torch.fx.passes.dialect.common.cse_pass import CSEPass

from .const_fold import attr_value, fold_constants, fresh_attr_name

aten = torch.ops.aten

_SDPA = aten.scaled_dot_product_attention.default
_TORCH_DECOMPOSED = {  # traced through torch's decomposition tables
    aten.softmax.int, aten._softmax.default, aten.log_softmax.int, aten._log_softmax.default,
    aten.layer_norm.default, aten.native_layer_norm.default, aten.group_norm.default,
    aten.native_group_norm.default, aten.var.correction, aten.var_mean.correction, aten.var.dim,
    aten.var.default,
    aten.div.Tensor, aten.div.Scalar, aten.glu.default, aten.prelu.default, aten.linalg_vector_norm.default,
    aten.addmm.default, aten.gru.input,
}
# `t.div_(b)` on a value nothing else reads (`x.clone().div_(y)`, `y /= 2`): decomposed out of place
_INPLACE_DIV = {aten.div_.Tensor: aten.div.Tensor, aten.div_.Scalar: aten.div.Scalar}
DECOMPOSED = frozenset(_TORCH_DECOMPOSED | {_SDPA} | set(_INPLACE_DIV))


# -- overrides of torch's decompositions ---------------------------------------------------------
def _div(a, b, *, rounding_mode=None):
    if rounding_mode is not None:  # not reached: _wanted keeps these nodes whole
        raise ValueError("only true division is decomposed")
    if isinstance(b, torch.Tensor):
        return a * torch.reciprocal(b)
    return a * (1.0 / b)


def _var_mean(x, dim=None, *, correction=None, keepdim=False):
    dims = list(range(x.dim())) if dim is None or len(dim) == 0 else [d % x.dim() for d in dim]
    correction = 1 if correction is None else correction
    n = math.prod(x.shape[d] for d in dims)
    mean = torch.mean(x, dims, keepdim=True)
    centered = x - mean
    squares = centered * centered
    if correction == 0:
        var = torch.mean(squares, dims, keepdim=keepdim)
    else:
        var = torch.sum(squares, dims, keepdim=keepdim) * (1.0 / (n - correction))
    return var, (mean if keepdim else torch.squeeze(mean, dims))


def _var(x, dim=None, *, correction=None, keepdim=False):
    return _var_mean(x, dim, correction=correction, keepdim=keepdim)[0]


def _var_unbiased(x, dim=None, unbiased=True, keepdim=False):
    """var.dim / var.default (`x.var(1)`, `torch.var(x, unbiased=False)`): Bessel's correction or none."""
    if isinstance(dim, bool):  # var.default(x, unbiased)
        dim, unbiased = None, dim
    return _var(x, dim, correction=1 if unbiased else 0, keepdim=keepdim)


def _vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """Norms as ops with INT rules: sum |x| (1), sqrt(sum x*x) (2), amax |x| (inf), amin |x| (-inf);
    torch's goes through pow with a tensor exponent."""
    dims = list(range(x.dim())) if dim is None or (isinstance(dim, (list, tuple)) and not dim) else dim
    if ord == math.inf:
        return torch.amax(torch.abs(x), dims, keepdim)
    if ord == -math.inf:
        return torch.amin(torch.abs(x), dims, keepdim)
    if ord == 1:
        return torch.sum(torch.abs(x), dims, keepdim)
    if ord == 2:
        return torch.sqrt(torch.sum(x * x, dims, keepdim))
    return torch.sum(torch.abs(x) ** ord, dims, keepdim) ** (1.0 / ord)


def _addmm(bias, a, b, *, beta=1, alpha=1):
    """beta * bias + alpha * (a @ b): a matmul, two scalings and an add, each with an INT rule."""
    product = torch.mm(a, b)
    product = product if alpha == 1 else product * alpha
    return product + (bias if beta == 1 else bias * beta)


_TABLE = {
    aten.linalg_vector_norm.default: _vector_norm, aten.addmm.default: _addmm,
    **get_decompositions([aten._softmax, aten._log_softmax, aten.native_layer_norm, aten.native_group_norm,
                          aten.glu, aten.prelu, aten._prelu_kernel, aten.gru.input]),
    aten.div.Tensor: _div, aten.div.Scalar: _div,
    aten.var_mean.correction: _var_mean, aten.var.correction: _var, aten.var.dim: _var_unbiased,
    aten.var.default: _var_unbiased,
}


# -- scaled dot-product attention ----------------------------------------------------------------
def _mask_plan(gm: GraphModule, mask) -> str:
    """How a float attn_mask is applied: "add" (as given), "keep" (0/-inf: a 0/1 keep mask) or
    "keep+add" (masked entries plus finite biases); a runtime bool mask is "select". Only a constant
    mask can be inspected."""
    if not isinstance(mask, Node):
        return "none"
    value = attr_value(gm, mask.target) if mask.op == "get_attr" else None
    if mask.meta["val"].dtype == torch.bool:
        return "keep" if isinstance(value, torch.Tensor) else "select"
    if not isinstance(value, torch.Tensor):
        return "add"  # a runtime mask: added as is (its observer must see finite values)
    masked = value <= torch.finfo(value.dtype).min / 2
    if not bool(masked.any()):
        return "add"
    return "keep" if bool((value[~masked] == 0).all()) else "keep+add"


_PASS_THROUGH = (aten.contiguous.default, aten.clone.default, aten.alias.default)


def _masked_bias(gm: GraphModule, mask) -> tuple[Node, Node] | None:
    """(keep, bias) when a runtime float mask is `where(keep, bias, fill)` with fill <= finfo.min / 2
    (through contiguous/clone), else None."""
    if not isinstance(mask, Node) or mask.meta["val"].dtype == torch.bool or mask.op == "get_attr":
        return None
    while mask.op == "call_function" and mask.target in _PASS_THROUGH:
        mask = mask.args[0]
    if mask.op != "call_function" or mask.target not in (aten.where.ScalarOther, aten.where.self):
        return None
    keep, bias, fill = mask.args[:3]
    if isinstance(fill, Node):
        fill = attr_value(gm, fill.target) if fill.op == "get_attr" else None
        if not isinstance(fill, torch.Tensor) or fill.numel() == 0:
            return None
        fill = float(fill.max())
    if not isinstance(fill, (int, float)) or not isinstance(bias, Node) or not isinstance(keep, Node):
        return None
    floor = torch.finfo(mask.meta["val"].dtype).min / 2
    return (keep, bias) if fill <= floor and keep.meta["val"].dtype == torch.bool else None


def _erase_unread(gm: GraphModule, node: Node) -> None:
    """Erase `node`, then its input while nothing reads it (the where/contiguous chain of a split mask)."""
    while isinstance(node, Node) and node.op == "call_function" and not node.users:
        inputs = node.all_input_nodes
        gm.graph.erase_node(node)
        node = inputs[0] if len(inputs) == 1 or node.target in _PASS_THROUGH else None


def _rows(mask, hkv: int, groups: int, length: int, s: int):
    """A mask broadcastable to [B, Hq, L, S] as [B', Hkv', G*L, S] (query heads folded into rows)."""
    if groups == 1:
        return mask
    while mask.dim() < 4:
        mask = mask.unsqueeze(0)
    mb, mh = mask.shape[0], mask.shape[1]
    mask = mask.expand(mb, mh, length, s)
    if mh == 1:
        return mask.repeat(1, 1, groups, 1)
    return mask.reshape(mb, hkv, groups * length, s)


def _empty_rows(gm: GraphModule, mask, plan: str) -> bool:
    """Whether the keep mask of `plan` can have a row with no entry kept (always for a runtime one)."""
    if plan not in ("keep", "keep+add", "select"):
        return False
    value = attr_value(gm, mask.target) if mask.op == "get_attr" else None
    if not isinstance(value, torch.Tensor):
        return True
    keep = value if value.dtype == torch.bool else value > torch.finfo(value.dtype).min / 2
    return bool((~keep.any(-1)).any()) if value.dim() else not bool(keep)


def _sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False,
          plan="none", empty_rows=False, keep_mask=None, bias=None):
    """softmax(Q K^T * scale + mask) V with grouped query heads folded into the rows of one KV head.
    Plan "masked_bias": `attn_mask` is where(keep_mask, bias, finfo.min), given as its two parts."""
    b, hq, length, e = q.shape
    hkv, s = k.shape[1], k.shape[2]
    groups = hq // hkv
    scale = 1.0 / math.sqrt(e) if scale is None else scale
    if groups > 1:
        q = q.reshape(b, hkv, groups * length, e)
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    keep = None
    if is_causal:
        keep = torch.ones(length, s, dtype=torch.bool).tril()
    elif plan == "masked_bias":
        keep = keep_mask
        scores = scores + _rows(torch.where(keep, bias, 0.0), hkv, groups, length, s)
        # the row max over kept entries only (a masked entry is the row min): exp(0) = 1 is kept, the row
        # sum is at least 1 and its reciprocal's observed range stays [1/S, 1]
        scores = torch.where(_rows(keep, hkv, groups, length, s), scores, torch.amin(scores, -1, keepdim=True))
    elif plan in ("keep", "select") and attn_mask.dtype == torch.bool:
        keep = attn_mask
    elif plan in ("keep", "keep+add"):
        keep = attn_mask > torch.finfo(attn_mask.dtype).min / 2
        if plan == "keep+add":
            scores = scores + _rows(torch.where(keep, attn_mask, 0.0), hkv, groups, length, s)
    elif plan == "add":
        scores = scores + _rows(attn_mask, hkv, groups, length, s)
    if keep is None:
        probs = torch.softmax(scores, -1)
    elif plan == "select" or (plan == "masked_bias" and empty_rows):  # a runtime bool mask: SELECT on the exps
        exps = torch.exp(scores - torch.amax(scores, -1, keepdim=True))
        exps = torch.where(_rows(keep, hkv, groups, length, s), exps, 0.0)
        probs = exps * _row_scale(exps, empty_rows)
    else:
        keep = _rows(keep.to(scores.dtype), hkv, groups, length, s)
        exps = torch.exp(scores - torch.amax(scores, -1, keepdim=True)) * keep
        probs = exps * _row_scale(exps, empty_rows)
    out = torch.matmul(probs, v)
    return out.reshape(b, hq, length, v.shape[-1]) if groups > 1 else out


def _row_scale(exps, empty_rows: bool):
    """1 / row sum; 0 for a row with nothing kept (sum 0) when there can be one, as torch gives 0 there."""
    total = torch.sum(exps, -1, keepdim=True)
    return torch.where(total > 0, torch.reciprocal(total), 0.0) if empty_rows else torch.reciprocal(total)


# -- the pass ------------------------------------------------------------------------------------
def _static_float(node: Node) -> bool:
    val = node.meta.get("val")
    vals = val if isinstance(val, (tuple, list)) else [val]
    tensors = [v for v in vals if isinstance(v, torch.Tensor)]
    return bool(tensors) and tensors[0].dtype.is_floating_point and all(
        isinstance(d, int) for t in tensors for d in t.shape)


def _wanted(node: Node) -> bool:
    if node.op != "call_function" or node.target not in DECOMPOSED or not _static_float(node):
        return False
    if node.target in (aten.div.Tensor, aten.div.Scalar, *_INPLACE_DIV) and node.kwargs.get("rounding_mode") is not None:
        return False
    if node.target in _INPLACE_DIV:  # out of place is the same only when nobody reads the mutated input
        mutated = node.args[0]
        return isinstance(mutated, Node) and list(mutated.users) == [node]
    if node.target is _SDPA:
        dropout = node.args[4] if len(node.args) > 4 else node.kwargs.get("dropout_p", 0.0)
        q, k = node.args[0].meta["val"], node.args[1].meta["val"]
        return not dropout and q.dim() == 4 and k.dim() == 4 and q.shape[1] % k.shape[1] == 0
    return True


def _implementation(gm: GraphModule, node: Node) -> tuple[Callable, dict[str, Node]]:
    """The function to trace for `node`, and the graph nodes it takes besides the node's arguments."""
    if node.target is _SDPA:
        mask = node.args[3] if len(node.args) > 3 else node.kwargs.get("attn_mask")
        split = _masked_bias(gm, mask)
        if split is not None:
            keep = split[0]
            empty = _empty_rows(gm, keep, "keep") if keep.op == "get_attr" else True
            return partial(_sdpa, plan="masked_bias", empty_rows=empty), {"keep_mask": split[0], "bias": split[1]}
        plan = _mask_plan(gm, mask)
        return partial(_sdpa, plan=plan, empty_rows=_empty_rows(gm, mask, plan)), {}
    return _INPLACE_DIV.get(node.target, node.target), {}  # decomposed by _TABLE while tracing


def _example(val: torch.Tensor) -> torch.Tensor:
    """A stand-in for a traced input with its shape, dtype and strides. The strides matter: torch's
    decompositions pick `view` for a contiguous input where a non-contiguous one (attention heads split
    by a permute) needs a copy, and a trace on a contiguous stand-in would not run on the real one."""
    shape, stride = tuple(val.shape), tuple(val.stride())
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True)) if all(shape) else 0
    return torch.zeros(extent, dtype=val.dtype).as_strided(shape, stride)


def _as_linear(node: Node) -> None:
    """addmm(b, x, t(w)) / mm(x, t(w)) (the GRU's decomposed linears) back as linear(x, w, b), which
    the quantizer annotates with a per-channel weight and an int32 bias."""
    mm = node.target is aten.mm.default
    if node.kwargs or not (mm or node.target is aten.addmm.default):
        return
    x, wt = node.args[-2:]
    if isinstance(wt, Node) and wt.target is aten.t.default:
        node.target, node.args = aten.linear.default, (x, wt.args[0], *(() if mm else (node.args[0],)))


def _out_of_place(traced: GraphModule) -> None:
    """In-place aten ops as their out-of-place forms, later readers of the mutated tensor reading the
    result instead. torch's GRU decomposition updates each gate chunk in place, once, and nothing reads
    the chunk's base afterwards, which is what makes this rewrite exact there."""
    order = {n: i for i, n in enumerate(traced.graph.nodes)}
    for node in list(traced.graph.nodes):
        name = getattr(node.target, "_schema", None) and node.target._schema.name
        if node.op != "call_function" or not name or not name.endswith("_") or not name.startswith("aten::"):
            continue
        packet = getattr(aten, name[len("aten::"):-1], None)
        functional = getattr(packet, node.target._overloadname, None) if packet is not None else None
        if functional is None:
            continue
        mutated = node.args[0]
        node.target = functional
        for user in list(mutated.users):
            if order[user] > order[node]:
                user.replace_input_with(mutated, node)
    traced.recompile()


def _cleanup(traced: GraphModule) -> GraphModule:
    """Dead code out, common sub-expressions merged (var_mean and layer_norm both compute x - mean),
    contiguous as_strided (group_norm's decomposition) as view, matrix products of a transposed weight
    as linear."""
    traced.graph.eliminate_dead_code()
    for node in traced.graph.nodes:
        _as_linear(node)
    traced.graph.eliminate_dead_code()  # the transposes the linears no longer read
    for node in traced.graph.nodes:
        if node.op == "call_function" and node.target is aten.as_strided.default:
            src, size, stride = node.args[0].meta["val"], list(node.args[1]), list(node.args[2])
            offset = node.args[3] if len(node.args) > 3 else 0
            if not offset and src.is_contiguous() and src.numel() == math.prod(size) and \
                    stride == list(torch.empty(size, device="meta").stride()):
                node.target, node.args = aten.view.default, (node.args[0], size)
    traced.recompile()
    return CSEPass()(traced).graph_module


def _splice(gm: GraphModule, node: Node, traced: GraphModule, inputs: list[Node]) -> None:
    """Insert `traced`'s nodes before `node` and route `node`'s users to their result."""
    graph = gm.graph
    env: dict[Node, Node] = {}
    inherited = {k: v for k, v in node.meta.items() if k not in ("val", "tensor_meta")}
    placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
    env.update(zip(placeholders, inputs, strict=True))
    result = None
    with graph.inserting_before(node):
        for tn in traced.graph.nodes:
            if tn.op == "placeholder":
                continue
            if tn.op == "output":
                result = map_arg(tn.args[0], env.__getitem__)
                break
            if tn.op == "get_attr":
                name = fresh_attr_name(gm, "_arm_decomposed")
                gm.register_buffer(name, attr_value(traced, tn.target).detach().clone())
                new = graph.get_attr(name)
                new.meta["val"] = getattr(gm, name)
            else:
                new = graph.call_function(tn.target, map_arg(tn.args, env.__getitem__),
                                          map_arg(tn.kwargs, env.__getitem__))
                new.meta = {**inherited, "val": tn.meta.get("val")}
            env[tn] = new
    if isinstance(result, (tuple, list)):
        for user in list(node.users):
            if user.target is not operator.getitem:
                raise ValueError(f"{node.name}: tuple result used by {user.name}, expected getitem")
            user.replace_all_uses_with(result[user.args[1]])
            graph.erase_node(user)
    else:
        node.replace_all_uses_with(result)
    graph.erase_node(node)


def decompose_for_int(gm: GraphModule, want: Callable[[Node], bool] = lambda n: True) -> int:
    """Decompose every node of DECOMPOSED (static float shapes, `want(node)` true) in place; returns
    how many were decomposed."""
    count = 0
    for node in list(gm.graph.nodes):
        if not _wanted(node) or not want(node):
            continue
        impl, extra = _implementation(gm, node)
        inputs = list(dict.fromkeys([*node.all_input_nodes, *extra.values()]))

        def fn(*tensors, node=node, inputs=inputs, impl=impl, extra=extra):
            lookup = dict(zip(inputs, tensors, strict=True))
            return impl(*map_arg(node.args, lookup.__getitem__), **map_arg(node.kwargs, lookup.__getitem__),
                        **{k: lookup[v] for k, v in extra.items()})

        traced = make_fx(fn, decomposition_table=_TABLE, tracing_mode="fake")(
            *(_example(n.meta["val"]) for n in inputs))
        if node.target is aten.gru.input:
            _out_of_place(traced)
        mask = node.args[3] if extra and len(node.args) > 3 else node.kwargs.get("attn_mask")
        _splice(gm, node, _cleanup(traced), inputs)
        if extra:
            _erase_unread(gm, mask)  # the finfo.min mask nothing reads any more
        count += 1
    if count:
        gm.graph.lint()
        gm.recompile()
    return count


def prepare_for_int(gm: GraphModule, want: Callable[[Node], bool] = lambda n: True) -> GraphModule:
    """Fold constants, decompose for INT, fold what the decompositions built from constants (masks)."""
    fold_constants(gm)
    if decompose_for_int(gm, want):
        fold_constants(gm)
    return gm
