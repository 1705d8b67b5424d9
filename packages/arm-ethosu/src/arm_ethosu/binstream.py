"""The Ethos-U delegate payload ("vela bin stream"): build it from a vela result, parse it back.

Layout (all integers little-endian; the package README has the byte-by-byte description):

    block  = name[16] (ASCII, NUL-padded, <= 15 chars) | u32 size | 12 reserved zero bytes
             | data[size] | zero padding to a multiple of 16
    stream = "vela_bin_stream" (size 0) | "cmd_data" | "weight_data" | "scratch_data"
             | "inputs" | "outputs" | "vela_end_stream" (size 0) | [extra blocks]

    scratch_data = u32 scratch_size, u32 scratch_fast_size,
                   i32 weight_region, i32 scratch_region, i32 scratch_fast_region     (20 bytes)
    inputs/outputs = i32 count, then per tensor
                   i32 shape[6], i32 elem_size, i32 offset, i32 region               (4 + 36 n bytes)

Extra blocks (e.g. "tosa_graph") go after "vela_end_stream" by default: a reader that stops at
the end marker never sees them, whatever it does with names it does not know.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from .vela_runner import VelaTensor

BLOCK_ALIGN = 16
NAME_LEN = 16
HEADER_SIZE = 32
IO_RANK = 6
START_BLOCK = "vela_bin_stream"
END_BLOCK = "vela_end_stream"
REQUIRED_BLOCKS = ("cmd_data", "weight_data", "scratch_data", "inputs", "outputs")

_HEADER = struct.Struct("<16sI12x")
_SCRATCH = struct.Struct("<IIiii")
_IO = struct.Struct(f"<{IO_RANK}iiii")
_I32_MAX = 2**31 - 1


class BinStreamError(ValueError):
    """A bin stream is truncated, corrupt, or cannot hold the given data."""


class _Compiled(Protocol):
    cmd_data: bytes
    weight_data: bytes
    weight_region: int
    scratch_size: int
    scratch_region: int
    scratch_fast_size: int
    scratch_fast_region: int
    inputs: list[VelaTensor]
    outputs: list[VelaTensor]


@dataclass
class BinStream:
    """A parsed bin stream. ``extra`` holds blocks other than the standard ones, by name."""

    cmd_data: bytes
    weight_data: bytes
    scratch_size: int
    scratch_fast_size: int
    weight_region: int
    scratch_region: int
    scratch_fast_region: int
    inputs: list[VelaTensor]
    outputs: list[VelaTensor]
    extra: dict[str, bytes] = field(default_factory=dict)
    extra_after_end: bool = True


def _block(name: str, data: bytes) -> bytes:
    if not (0 < len(name) < NAME_LEN and name.isascii() and name.isprintable()):
        raise BinStreamError(
            f"block name {name!r} must be 1..{NAME_LEN - 1} printable ASCII characters (the 16-byte field "
            "keeps a terminating NUL)"
        )
    if len(data) > 0xFFFFFFFF:
        raise BinStreamError(
            f"block {name!r} holds {len(data)} bytes; the u32 size field allows 4 GiB"
        )
    pad = -len(data) % BLOCK_ALIGN
    return _HEADER.pack(name.encode("ascii"), len(data)) + bytes(data) + b"\x00" * pad


def _i32(value: int, what: str) -> int:
    if not -(2**31) <= int(value) <= _I32_MAX:
        raise BinStreamError(f"{what} = {value} does not fit the stream's int32 field")
    return int(value)


def _pack_io(tensors: list[VelaTensor], what: str) -> bytes:
    out = [struct.pack("<i", len(tensors))]
    for i, t in enumerate(tensors):
        if len(t.shape) > IO_RANK:
            raise BinStreamError(
                f"{what}[{i}] has rank {len(t.shape)}; the stream holds {IO_RANK}-D shapes"
            )
        shape = (1,) * (IO_RANK - len(t.shape)) + tuple(t.shape)  # vela already gives 6-D
        fields = [_i32(d, f"{what}[{i}].shape") for d in shape]
        fields += [
            _i32(t.elem_size, f"{what}[{i}].elem_size"),
            _i32(t.offset, f"{what}[{i}].offset"),
        ]
        fields.append(_i32(t.region, f"{what}[{i}].region"))
        out.append(_IO.pack(*fields))
    return b"".join(out)


def build_binstream(
    compiled: _Compiled,
    extra_blocks: Mapping[str, bytes] | None = None,
    extra_placement: Literal["after_end", "before_end"] = "after_end",
) -> bytes:
    """Serialize a ``VelaResult`` (or a ``BinStream``) into the delegate payload.

    ``extra_blocks`` (name -> bytes) are written after ``vela_end_stream`` (default, ignored by
    readers that stop at the end marker) or just before it (``"before_end"``: only for readers
    that skip unknown block names).
    """
    extra = dict(extra_blocks or {})
    if extra_placement not in ("after_end", "before_end"):
        raise ValueError(
            f"extra_placement must be 'after_end' or 'before_end', not {extra_placement!r}"
        )
    clash = {START_BLOCK, END_BLOCK, *REQUIRED_BLOCKS} & set(extra)
    if clash:
        raise BinStreamError(f"extra block names {sorted(clash)} are reserved by the stream format")
    scratch = _SCRATCH.pack(
        _u32(compiled.scratch_size, "scratch_size"),
        _u32(compiled.scratch_fast_size, "scratch_fast_size"),
        _i32(compiled.weight_region, "weight_region"),
        _i32(compiled.scratch_region, "scratch_region"),
        _i32(compiled.scratch_fast_region, "scratch_fast_region"),
    )
    extras = b"".join(_block(name, bytes(data)) for name, data in extra.items())
    parts = [
        _block(START_BLOCK, b""),
        _block("cmd_data", bytes(compiled.cmd_data)),
        _block("weight_data", bytes(compiled.weight_data)),
        _block("scratch_data", scratch),
        _block("inputs", _pack_io(list(compiled.inputs), "inputs")),
        _block("outputs", _pack_io(list(compiled.outputs), "outputs")),
    ]
    if extra_placement == "before_end":
        parts.append(extras)
    parts.append(_block(END_BLOCK, b""))
    if extra_placement == "after_end":
        parts.append(extras)
    return b"".join(parts)


def append_block(stream: bytes, name: str, data: bytes) -> bytes:
    """Append one extra block after the end of an existing (valid) stream."""
    parse_binstream(stream)  # refuse to extend a corrupt stream
    return bytes(stream) + _block(name, bytes(data))


def _u32(value: int, what: str) -> int:
    if not 0 <= int(value) <= 0xFFFFFFFF:
        raise BinStreamError(f"{what} = {value} does not fit the stream's u32 field")
    return int(value)


def _read_blocks(data: bytes, start: int, stop_at_end: bool) -> tuple[list[tuple[str, bytes]], int]:
    """Blocks from ``start`` up to and including END_BLOCK (or to the end of data)."""
    blocks: list[tuple[str, bytes]] = []
    pos = start
    while pos < len(data):
        if len(data) - pos < HEADER_SIZE:
            raise BinStreamError(
                f"truncated bin stream: {len(data) - pos} bytes left at offset {pos}, a block "
                f"header needs {HEADER_SIZE}"
            )
        raw_name, size = _HEADER.unpack_from(data, pos)
        name_bytes = raw_name.split(b"\x00", 1)[0]
        if not name_bytes or not all(0x20 <= b < 0x7F for b in name_bytes):
            raise BinStreamError(
                f"corrupt bin stream: block header at offset {pos} has name {raw_name!r}, which "
                "is not NUL-padded printable ASCII"
            )
        name = name_bytes.decode("ascii")
        begin = pos + HEADER_SIZE
        if begin + size > len(data):
            raise BinStreamError(
                f"truncated bin stream: block {name!r} at offset {pos} declares {size} data bytes "
                f"but only {len(data) - begin} remain"
            )
        blocks.append((name, bytes(data[begin : begin + size])))
        pos = begin + size + (-size % BLOCK_ALIGN)
        if stop_at_end and name == END_BLOCK:
            return blocks, pos
    if stop_at_end:
        raise BinStreamError(
            f"truncated bin stream: no {END_BLOCK!r} block in {len(data)} bytes (the stream must end "
            "with it)"
        )
    return blocks, pos


def _unpack_io(name: str, payload: bytes) -> list[VelaTensor]:
    if len(payload) < 4:
        raise BinStreamError(
            f"corrupt {name!r} block: {len(payload)} bytes, needs at least 4 (count)"
        )
    (count,) = struct.unpack_from("<i", payload)
    want = 4 + count * _IO.size
    if count < 0 or len(payload) != want:
        raise BinStreamError(
            f"corrupt {name!r} block: count {count} needs {want} bytes, block has {len(payload)}"
        )
    tensors = []
    for i in range(count):
        *shape, elem_size, offset, region = _IO.unpack_from(payload, 4 + i * _IO.size)
        tensors.append(VelaTensor(tuple(shape), elem_size, offset, region))
    return tensors


def parse_binstream(data: bytes) -> BinStream:
    """Parse a bin stream; raise ``BinStreamError`` saying what is wrong and where."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"parse_binstream takes bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) % BLOCK_ALIGN:
        raise BinStreamError(
            f"bin stream length {len(data)} is not a multiple of {BLOCK_ALIGN}: truncated or "
            "trailing bytes"
        )
    blocks, end = _read_blocks(data, 0, stop_at_end=True)
    if blocks[0][0] != START_BLOCK:
        raise BinStreamError(
            f"not a vela bin stream: first block is {blocks[0][0]!r}, expected {START_BLOCK!r}"
        )
    found: dict[str, bytes] = {}
    extra: dict[str, bytes] = {}
    for name, payload in blocks[1:-1]:
        target = found if name in REQUIRED_BLOCKS else extra
        if name in found or name in extra or name == START_BLOCK:
            raise BinStreamError(f"corrupt bin stream: block {name!r} appears twice")
        target[name] = payload
    missing = [n for n in REQUIRED_BLOCKS if n not in found]
    if missing:
        raise BinStreamError(f"incomplete bin stream: missing block(s) {missing}")
    after, _ = _read_blocks(data, end, stop_at_end=False)
    for name, payload in after:
        if name in found or name in extra or name in (START_BLOCK, END_BLOCK):
            raise BinStreamError(
                f"corrupt bin stream: block {name!r} after the end marker repeats a name"
            )
        extra[name] = payload
    if len(found["scratch_data"]) != _SCRATCH.size:
        raise BinStreamError(
            f"corrupt 'scratch_data' block: {len(found['scratch_data'])} bytes, expected {_SCRATCH.size}"
        )
    s_size, sf_size, w_region, s_region, sf_region = _SCRATCH.unpack(found["scratch_data"])
    return BinStream(
        cmd_data=found["cmd_data"],
        weight_data=found["weight_data"],
        scratch_size=s_size,
        scratch_fast_size=sf_size,
        weight_region=w_region,
        scratch_region=s_region,
        scratch_fast_region=sf_region,
        inputs=_unpack_io("inputs", found["inputs"]),
        outputs=_unpack_io("outputs", found["outputs"]),
        extra=extra,
        extra_after_end=bool(after) or not extra,
    )
