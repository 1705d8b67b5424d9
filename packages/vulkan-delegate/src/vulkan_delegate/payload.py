"""The delegate payload ("VKDG" format, version 3): what `VulkanBackend.preprocess` writes and the C++
runtime (packages/runtime-cpp/src/vulkan_delegate/payload.cpp) reads. Little-endian throughout.

    header   : magic "VKDG", u32 version, u32 flags (bit 0: fp16 compute)
    symbols  : u32 n; n x (u32 input_index, u32 dim, u32 max)      dynamic sizes read from the inputs
    shaders  : u32 n; n x (u32 len, bytes name)                     names the runtime must embed
    tensors  : u32 n; n x (u32 dtype, u32 kind, u64 offset, u64 nbytes_max, u32 rank, rank x EXPR)
    dispatch : u32 n; n x (u32 shader, u32 nb, nb x u32 tensor,
                           u32 np, np x (u32 tag, tag 0: EXPR | tag 1: f32), 3 x EXPR threads)
    io       : u32 n_in, n_in x (i32 tensor (-1: a non-tensor input), u32 host dtype);
               u32 n_out, n_out x (u32 tensor, u32 host dtype)
    memory   : u64 arena_bytes, u64 constant_bytes, constant bytes
    names    : (optional) "NAME", u32 n (= dispatch count), n x (u32 len, bytes): the PyTorch module
               and op each dispatch came from, for the per-dispatch GPU time profile. A runtime that
               predates it ignores the trailing bytes, so the version stays 2.

    EXPR     : u32 n_terms; n_terms x (i64 coefficient, u32 n_factors, n_factors x u32 symbol)
               (a polynomial in the symbols; a static size is one term without factors)

dtype: 0 f32, 1 f16, 2 u8 (packed quantized weights; bool input bytes before version 3), 3 i32 (int32,
int64 narrowed to int32, bool as 0/1). host dtype (the ExecuTorch tensor's, converted by the runtime at
upload and readback): 0 float32 (f32), 1 float16 (f16), 2 bool (u8 bytes or i32 words), 3 int32 (i32),
4 int64 (i32; an input value outside int32 is an error, never wrapped). kind: 0 arena (offset planned at compile
time; tensors whose lifetimes do not overlap share bytes), 1 constant (offset into the constant
bytes, each distinct constant stored once). Push-constant words a dispatch does not give are zero.

Versions (the runtime reads MIN_VERSION..VERSION and refuses others with a log line naming both):
    1  first format.
    2  4-bit quantized-linear weights packed two per byte (ops/quantized.py documents the layout); a
       `linear_q` dispatch gives the weight bits as its 8th push word. The layout is otherwise that of
       version 1, and a version 1 payload (weights one per byte, no 8th word = 0 = 8-bit) still runs.
    3  int32 tensors (dtype 3) and a host dtype after each input and output id (older payloads: a u8
       input is bool bytes, everything else float32). `copy` takes a 22nd push word (1: cast to bool)
       and `mask_bool` a 14th (1: the mask holds int32 words); both read 0 from older payloads.
"""

from __future__ import annotations

import struct

import sympy

from .graph import Graph

MAGIC = b"VKDG"
VERSION = 3
MIN_VERSION = 1  # the oldest version the runtime still reads
FLAG_FP16 = 1


class _Writer:
    def __init__(self, symbols: dict[sympy.Symbol, int]) -> None:
        self.out = bytearray()
        self.symbols = symbols

    def u32(self, v: int) -> None:
        self.out += struct.pack("<I", v)

    def i32(self, v: int) -> None:
        self.out += struct.pack("<i", v)

    def u64(self, v: int) -> None:
        self.out += struct.pack("<Q", v)

    def f32(self, v: float) -> None:
        self.out += struct.pack("<f", v)

    def expr(self, d) -> None:
        terms = polynomial_terms(d, self.symbols)
        self.u32(len(terms))
        for coef, factors in terms:
            self.out += struct.pack("<q", coef)
            self.u32(len(factors))
            for f in factors:
                self.u32(f)


def polynomial_terms(d, symbols: dict[sympy.Symbol, int]) -> list[tuple[int, list[int]]]:
    """`d` as [(coefficient, [symbol index per factor])]; raises ValueError when not a polynomial."""
    if isinstance(d, int):
        return [(d, [])]
    expr = sympy.expand(sympy.sympify(d))
    if expr.is_Integer:
        return [(int(expr), [])]
    gens = sorted(expr.free_symbols, key=str)
    unknown = [s for s in gens if s not in symbols]
    if unknown:
        raise ValueError(f"size {expr} uses {unknown}, which no delegate input dimension provides")
    poly = sympy.Poly(expr, *gens)
    if not all(c.is_Integer for c in poly.coeffs()):
        raise ValueError(f"size {expr} is not an integer polynomial of the dynamic dims")
    terms = []
    for monom, coef in poly.terms():
        factors = [symbols[g] for g, p in zip(gens, monom, strict=True) for _ in range(p)]
        terms.append((int(coef), factors))
    return terms


def serialize(g: Graph, version: int | None = None) -> bytes:
    """The payload of `g`; `version` < 3 writes the io section without host dtypes (tests of the
    runtime's reading of older payloads use it for float32 programs)."""
    version = VERSION if version is None else version
    w = _Writer({s: i for i, (s, _, _, _) in enumerate(g.symbols)})
    w.out += MAGIC
    w.u32(version)
    w.u32(FLAG_FP16 if g.compute_dtype == 1 else 0)
    w.u32(len(g.symbols))
    for _, inp, dim, mx in g.symbols:
        w.u32(inp), w.u32(dim), w.u32(mx)
    names = sorted({d.shader for d in g.dispatches})
    index = {n: i for i, n in enumerate(names)}
    w.u32(len(names))
    for n in names:
        b = n.encode()
        w.u32(len(b))
        w.out += b
    w.u32(len(g.tensors))
    for t in g.tensors:
        w.u32(t.dtype), w.u32(t.storage.kind), w.u64(t.storage.offset), w.u64(t.storage.nbytes_max)
        w.u32(t.rank)
        for d in t.shape:
            w.expr(d)
    w.u32(len(g.dispatches))
    for d in g.dispatches:
        w.u32(index[d.shader])
        w.u32(len(d.bindings))
        for t in d.bindings:
            w.u32(t.id)
        w.u32(len(d.push))
        for v in d.push:
            if isinstance(v, float):
                w.u32(1), w.f32(v)
            else:
                w.u32(0), w.expr(v)
        for n in d.threads:
            w.expr(n)
    w.u32(len(g.inputs))
    for i, host in zip(g.inputs, g.input_hosts, strict=True):
        w.i32(i)
        if version >= 3:
            w.u32(host)
    w.u32(len(g.outputs))
    for o, host in zip(g.outputs, g.output_hosts, strict=True):
        w.u32(o)
        if version >= 3:
            w.u32(host)
    w.u64(g.arena_bytes)
    w.u64(len(g.constants))
    w.out += g.constants
    w.out += b"NAME"
    w.u32(len(g.dispatches))
    for d in g.dispatches:
        b = d.name.encode()
        w.u32(len(b))
        w.out += b
    return bytes(w.out)
