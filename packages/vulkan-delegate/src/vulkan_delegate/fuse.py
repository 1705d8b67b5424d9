"""Elementwise fusion: a pass on the lowered `Graph` that merges trees of `unary` and `binary` dispatches into
one `ewise_expr` dispatch (shaders/ewise_expr.comp), so a chain such as an RMS norm's add, rsqrt, mul, mul or
a rotary embedding's mul, mul, add costs one dispatch and one pass over memory instead of one per op.

What it assumes (checked per candidate; a candidate that fails any check keeps its own dispatch):
- a `unary_<f>` dispatch computes y[i] = f(x[i]; alpha, beta) (push: op, n, alpha, beta) and a `binary_<f>`
  dispatch y[i] = op(a[ia], alpha * b[ib]) with ia, ib given by per-dimension sizes and strides (push: op, n,
  sizes[6], a strides[6], b strides[6], alpha); <f> is f32 or f16 (integer variants are never fused);
- every binding starts at its storage's first element, and a dispatch writes only its last binding.

What it guarantees:
- a producer P is inlined into its consumer D only when D is the one dispatch that reads P's result, nothing
  else writes P's result (it is no graph output), and no dispatch between P and D writes anything P reads: the
  tree computes, at D's place, exactly the values P would have computed at its own;
- each input of the fused tree is read at output index i as x[(i / div) % mod] (the same shape, a scalar, or a
  broadcast whose kept dimensions are one contiguous run); a read that is not of that form (a transposed or
  strided operand), or a composition of two broadcasts that cannot be proven to be one, is not fused;
- a one-element constant operand (a scalar) becomes an immediate program word, not an input;
- the tree is evaluated in postfix order with each binary's left operand first (sub, div, pow, fmod keep
  their operand order), in fp32 with one rounding at the store; the fp16 variants of `unary`/`binary` round
  some ops to fp16 between steps, so a fused fp16 chain is at least as close to fp32 as the unfused one.

VKDG_FUSE=0 at lowering turns the pass off (for A/B timing).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import sympy

from .graph import F16, F32, KIND_ARENA, KIND_CONST, Dim, Dispatch, Graph, Tensor, numel
from .opcodes import FUSED_MAX_WORDS, FUSED_PROGRAM_WORD, FUSED_STACK, opcode

FUSED_SHADER = "ewise_expr"
MAX_INPUTS = 4  # bindings 0..3 of ewise_expr.comp
MAX_PROGRAM_WORDS = FUSED_MAX_WORDS  # push words FUSED_PROGRAM_WORD..31
MAX_STACK = FUSED_STACK  # ewise_expr.comp's stack
KIND_LOAD, KIND_UNARY, KIND_BINARY, KIND_IMM = 0, 1, 2, 3
_FLOAT_VARIANTS = ("f32", "f16")

IndexMap = tuple[Dim, Dim] | None  # (div, mod): element (i / div) % mod of the input at output index i; None: i


@dataclass
class _Expr:
    """A postfix tree: ("load", tensor, map) | ("imm", value) | ("unary", op, alpha, beta, child) |
    ("binary", op, left, right)."""

    node: tuple
    start: int  # the earliest dispatch folded into it: its inputs must not be written from there on
    names: list[str] = field(default_factory=list)


def fusion_enabled() -> bool:
    return os.environ.get("VKDG_FUSE", "1") != "0"


def fuse_elementwise(g: Graph) -> None:
    """Merge trees of float unary/binary dispatches into `ewise_expr` dispatches (see the module docstring)."""
    reads: dict[int, int] = {}
    writers: dict[int, list[int]] = {}
    for step, d in enumerate(g.dispatches):
        for t in d.bindings[:-1]:
            reads[id(t.storage)] = reads.get(id(t.storage), 0) + 1
        writers.setdefault(id(d.bindings[-1].storage), []).append(step)
    exprs: dict[int, _Expr] = {}  # dispatch step -> its tree (elementwise dispatches only)
    inlined: set[int] = set()
    fused: dict[int, Dispatch] = {}
    for step, d in enumerate(g.dispatches):
        operands = _operands(d)
        if operands is None:
            continue
        children: list[tuple] = [_leaf(g, t, imap) for t, imap in operands]
        sources: list[int | None] = [None] * len(children)
        for k, (t, imap) in enumerate(operands):  # each producer folded in while the tree still fits
            child, from_step = _inline(g, t, imap, step, exprs, reads, writers, inlined)
            if from_step is None:
                continue
            trial = children[:k] + [child] + children[k + 1:]
            if _fits(_own_node(d, trial)[0]):
                children, sources[k] = trial, from_step
        node, names = _own_node(d, children)
        start = step
        for from_step in filter(lambda s: s is not None, sources):
            start = min(start, exprs[from_step].start)
            names = exprs[from_step].names + names
            inlined.add(from_step)
        exprs[step] = _Expr(node, start, names)
        if any(s is not None for s in sources):
            fused[step] = _dispatch(exprs[step], d)
    if not fused:
        return
    g.dispatches = [fused.get(s, d) for s, d in enumerate(g.dispatches) if s not in inlined]


def _operands(d: Dispatch) -> list[tuple[Tensor, IndexMap]] | None:
    """The inputs of a float unary/binary dispatch with their index maps; None for any other dispatch (or a
    binary operand read in a way no (div, mod) map expresses: then the dispatch is not fused at all)."""
    shader, _, variant = d.shader.rpartition("_")
    if variant not in _FLOAT_VARIANTS or d.bindings[-1].storage.kind != KIND_ARENA:
        return None
    if shader == "unary":
        return [(d.bindings[0], None)]
    if shader != "binary":
        return None
    n, sizes = d.push[1], d.push[2:8]
    maps = [_index_map(sizes, d.push[8:14], n), _index_map(sizes, d.push[14:20], n)]
    if any(m is False for m in maps):
        return None
    return [(d.bindings[0], maps[0]), (d.bindings[1], maps[1])]


def _leaf(g: Graph, t: Tensor, imap: IndexMap) -> tuple:
    """A load of `t`, or its value as an immediate where `t` is a one-element constant (a scalar operand)."""
    if t.storage.kind == KIND_CONST and isinstance(numel(t.shape), int) and numel(t.shape) == 1:
        dtype = {F32: np.float32, F16: np.float16}.get(t.dtype)
        if dtype is not None:
            return ("imm", float(np.frombuffer(g.constants, dtype, count=1, offset=t.storage.offset)[0]))
    return ("load", t, imap)


def _own_node(d: Dispatch, children: list[tuple]) -> tuple[tuple, list[str]]:
    """The tree of dispatch `d` over `children` (its operands' trees)."""
    op = int(d.push[0])
    if d.shader.startswith("unary_"):
        node = ("unary", op, float(d.push[2]), float(d.push[3]), children[0])
    else:
        left, right = children
        alpha = float(d.push[20])
        if alpha != 1.0:  # binary.comp: op(a, alpha * b); only add and sub use alpha
            right = ("unary", opcode("unary", "affine"), alpha, 0.0, right)
        node = ("binary", op, left, right)
    return node, [d.name] if d.name else []


def _inline(g: Graph, t: Tensor, imap: IndexMap, step: int, exprs: dict[int, _Expr], reads: dict[int, int],
            writers: dict[int, list[int]], inlined: set[int]) -> tuple[tuple, int | None]:
    """The tree that computes operand `t` of dispatch `step`: its producer's, re-indexed by `imap`, when the
    producer may be folded in; else a load. Returns (tree, producer step or None)."""
    leaf = _leaf(g, t, imap)
    s = t.storage
    ws = writers.get(id(s), [])
    if s.kind != KIND_ARENA or s.pinned or reads.get(id(s)) != 1 or len(ws) != 1 or ws[0] >= step:
        return leaf, None
    p = ws[0]
    if p not in exprs or p in inlined:
        return leaf, None
    expr = exprs[p]
    tree = _reindex(expr.node, imap)
    if tree is None:
        return leaf, None
    for _, leaf_t, _ in _loads(tree):  # nothing the tree reads is written between its first dispatch and here
        if any(expr.start < w < step for w in writers.get(id(leaf_t.storage), [])):
            return leaf, None
    return tree, p


def _reindex(node: tuple, outer: IndexMap) -> tuple | None:
    """`node` read at index map `outer` (every load's map composed with it); None if a composition is unproven."""
    if outer is None or node[0] == "imm":
        return node
    kind = node[0]
    if kind == "load":
        m = _compose(outer, node[2])
        return None if m is False else ("load", node[1], m)
    if kind == "unary":
        child = _reindex(node[4], outer)
        return None if child is None else (*node[:4], child)
    left, right = _reindex(node[2], outer), _reindex(node[3], outer)
    return None if left is None or right is None else ("binary", node[1], left, right)


def _compose(outer: IndexMap, inner: IndexMap) -> IndexMap | bool:
    """The map of reading through `inner` at the indices `outer` gives; False where it is not one (div, mod)."""
    if inner is None:
        return outer
    if outer is None:
        return inner
    (d2, m2), (d1, m1) = outer, inner
    if _eq(m1, 1) or _eq(m2, 1):
        return (1, 1)
    # ((i / d2) % m2 / d1) % m1 == (i / (d2 * d1)) % m1 when d1 * m1 divides m2
    if _eq(d1 * m1, m2) or (isinstance(m2, int) and isinstance(d1 * m1, int) and m2 % (d1 * m1) == 0):
        return (d2 * d1, m1)
    return False


def _index_map(sizes: list, strides: list, n: Dim) -> IndexMap | bool:
    """(div, mod) of an operand read with per-dim `sizes` and element `strides`; None for the identity; False
    when the kept (stride != 0) dims are not one contiguous run of contiguous strides."""
    dims = [k for k in range(6) if not _eq(sizes[k], 1)]
    kept = [k for k in dims if not _eq(strides[k], 0)]
    if not kept:
        return (1, 1)
    lo, hi = kept[0], kept[-1]
    if kept != [k for k in dims if lo <= k <= hi]:
        return False
    for k in kept:
        if not _eq(strides[k], numel([sizes[j] for j in range(k + 1, hi + 1)])):
            return False
    div, mod = numel(sizes[hi + 1:]), numel(sizes[lo:hi + 1])
    return None if _eq(div, 1) and _eq(mod, n) else (div, mod)


def _eq(a: Dim, b: Dim) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return sympy.expand(sympy.sympify(a) - sympy.sympify(b)) == 0


def _loads(node: tuple) -> list[tuple]:
    if node[0] == "imm":
        return []
    if node[0] == "load":
        return [node]
    if node[0] == "unary":
        return _loads(node[4])
    return _loads(node[2]) + _loads(node[3])


def _slots(node: tuple) -> list[tuple[Tensor, IndexMap]]:
    """The distinct (storage, map) inputs in first-use order."""
    out: list[tuple[Tensor, IndexMap]] = []
    for _, t, m in _loads(node):
        if not any(u.storage is t.storage and _same_map(um, m) for u, um in out):
            out.append((t, m))
    return out


def _same_map(a: IndexMap, b: IndexMap) -> bool:
    if a is None or b is None:
        return a is b
    return _eq(a[0], b[0]) and _eq(a[1], b[1])


def _depth(node: tuple) -> int:
    """Stack slots the postfix program needs (left operand first)."""
    if node[0] in ("load", "imm"):
        return 1
    if node[0] == "unary":
        return _depth(node[4])
    return max(_depth(node[2]), _depth(node[3]) + 1)


def _program(node: tuple, slots: list[tuple[Tensor, IndexMap]]) -> list:
    if node[0] == "imm":
        return [KIND_IMM | 1 << 4, node[1]]
    if node[0] == "load":
        k = next(i for i, (t, m) in enumerate(slots) if t.storage is node[1].storage and _same_map(m, node[2]))
        return [KIND_LOAD | k << 2]
    if node[0] == "unary":
        _, op, a, b, child = node
        floats = [a, b] if b != 0.0 else [a] if a != 0.0 else []
        return [*_program(child, slots), KIND_UNARY | len(floats) << 4 | op << 8, *floats]
    _, op, left, right = node
    return [*_program(left, slots), *_program(right, slots), KIND_BINARY | op << 8]


def _fits(node: tuple) -> bool:
    slots = _slots(node)
    return 1 <= len(slots) <= MAX_INPUTS and _depth(node) <= MAX_STACK and len(_program(node, slots)) <= MAX_PROGRAM_WORDS


def _dispatch(expr: _Expr, root: Dispatch) -> Dispatch:
    y = root.bindings[-1]
    n = numel(y.shape)
    slots = _slots(expr.node)
    maps = []
    for _, m in slots:
        maps += [1, n] if m is None else list(m)
    pad = MAX_INPUTS - len(slots)
    bindings = [t for t, _ in slots] + [slots[0][0]] * pad + [y]
    program = _program(expr.node, slots)
    push = [n, len(program), *maps, *[1, 1] * pad]
    assert len(push) == FUSED_PROGRAM_WORD, push  # the program starts where the shader and the runtime read it
    push += program
    variant = root.shader.rpartition("_")[2]
    names = list(dict.fromkeys(expr.names))
    return Dispatch(f"{FUSED_SHADER}_{variant}", bindings, push, (n, 1, 1), " + ".join(names))
