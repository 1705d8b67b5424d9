"""The vela bin stream: round trip against vela's own npz, byte layout, corrupt inputs."""

import struct

import arm_ethosu_test_graphs as graphs
import numpy as np
import pytest

from arm_ethosu.binstream import (
    BinStreamError,
    append_block,
    build_binstream,
    parse_binstream,
)
from arm_ethosu.vela_runner import compile_with_vela

TARGETS = ("ethos-u55-128", "ethos-u65-256", "ethos-u85-256")


def _blocks(data: bytes) -> list[tuple[int, str, int]]:
    """(offset, name, size) of every block, decoded independently of the module under test."""
    out, pos = [], 0
    while pos < len(data):
        name = data[pos : pos + 16].rstrip(b"\x00").decode()
        (size,) = struct.unpack_from("<I", data, pos + 16)
        assert data[pos + 20 : pos + 32] == bytes(12)  # reserved bytes are zero
        out.append((pos, name, size))
        pos += 32 + size + (-size % 16)
    assert pos == len(data)
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("graph", ["conv2d_rescale", "add_rescaled", "depthwise_rescale"])
def test_round_trip_equals_vela_npz(tmp_path, graph, target):
    r = compile_with_vela(getattr(graphs, graph)(), target, work_dir=tmp_path)
    blob = build_binstream(r)
    s = parse_binstream(blob)
    with np.load(r.npz_path) as npz:  # vela's own numbers, read directly
        weights = npz["weight_data"]
        n_weights = (
            0 if weights.dtype.itemsize == 1 and weights.tobytes() == b"\0" else weights.nbytes
        )
        assert s.cmd_data == npz["cmd_data"].tobytes()
        assert len(s.weight_data) == n_weights
        assert s.scratch_size == int(npz["scratch_size"])
        assert s.scratch_fast_size == int(npz["scratch_fast_size"])
        assert (s.weight_region, s.scratch_region, s.scratch_fast_region) == (
            int(npz["weight_region"]), int(npz["scratch_region"]), int(npz["scratch_fast_region"]),
        )  # fmt: skip
        for kind, tensors in (("input", s.inputs), ("output", s.outputs)):
            assert [t.shape for t in tensors] == [tuple(x) for x in npz[f"{kind}_shape"].tolist()]
            assert [t.offset for t in tensors] == npz[f"{kind}_offset"].tolist()
            assert [t.elem_size for t in tensors] == npz[f"{kind}_elem_size"].tolist()
            assert [t.region for t in tensors] == npz[f"{kind}_region"].tolist()
    assert s.weight_data == r.weight_data and s.extra == {}
    assert build_binstream(s) == blob  # parse and build are inverses
    assert _rebuild(blob, "cmd_data", r.cmd_data) == blob  # the test's own encoder agrees


def test_byte_layout(compiled):
    r = compiled("add_rescaled", "ethos-u55-128")
    blob = build_binstream(r)
    blocks = _blocks(blob)
    names = [b[1] for b in blocks]
    assert names == ["vela_bin_stream", "cmd_data", "weight_data", "scratch_data", "inputs",
                     "outputs", "vela_end_stream"]  # fmt: skip
    assert blob[:16] == b"vela_bin_stream\x00" and blob[-32:-16] == b"vela_end_stream\x00"
    assert all(off % 16 == 0 for off, _, _ in blocks) and len(blob) % 16 == 0
    by_name = {name: (off, size) for off, name, size in blocks}
    assert by_name["cmd_data"][1] == len(r.cmd_data) and by_name["weight_data"][1] == 0
    off, size = by_name["scratch_data"]
    assert size == 20
    assert struct.unpack_from("<IIiii", blob, off + 32) == (256, 0, 0, 1, r.scratch_fast_region)
    off, size = by_name["inputs"]
    assert size == 4 + 2 * 36
    assert struct.unpack_from("<i", blob, off + 32) == (2,)
    second = struct.unpack_from("<9i", blob, off + 32 + 4 + 36)
    assert second == (1, 1, 1, 4, 4, 8, 1, r.inputs[1].offset, 1)


def test_extra_block_after_end(compiled):
    r = compiled("conv2d_rescale", "ethos-u85-256")
    tosa = graphs.conv2d_rescale()
    plain = build_binstream(r)
    blob = build_binstream(r, {"tosa_graph": tosa})
    assert blob.startswith(plain)  # the standard stream is untouched, extra data follows it
    assert _blocks(blob)[-1][1:] == ("tosa_graph", len(tosa))
    s = parse_binstream(blob)
    assert s.extra == {"tosa_graph": tosa} and s.extra_after_end
    assert append_block(plain, "tosa_graph", tosa) == blob


def test_extra_block_before_end(compiled):
    r = compiled("conv2d_rescale", "ethos-u55-128")
    blob = build_binstream(r, {"tosa_graph": b"abc"}, extra_placement="before_end")
    names = [b[1] for b in _blocks(blob)]
    assert names[-2:] == ["tosa_graph", "vela_end_stream"]
    s = parse_binstream(blob)
    assert s.extra == {"tosa_graph": b"abc"} and not s.extra_after_end
    assert build_binstream(s, s.extra, extra_placement="before_end") == blob


def test_build_refuses_bad_names(compiled):
    r = compiled("conv2d_rescale", "ethos-u55-128")
    with pytest.raises(BinStreamError, match="reserved"):
        build_binstream(r, {"cmd_data": b""})
    with pytest.raises(BinStreamError, match="1..15 printable ASCII"):
        build_binstream(r, {"a_name_that_is_too_long": b""})
    with pytest.raises(ValueError, match="extra_placement"):
        build_binstream(r, {"x": b""}, extra_placement="middle")


@pytest.fixture
def blob(compiled):
    return build_binstream(compiled("add_rescaled", "ethos-u55-128"))


def _rebuild(data: bytes, name: str, payload: bytes) -> bytes:
    """The same stream with block ``name`` holding ``payload`` (well-formed framing)."""
    out = b""
    for off, block, size in _blocks(data):
        body = payload if block == name else data[off + 32 : off + 32 + size]
        out += block.encode().ljust(16, b"\0") + struct.pack("<I", len(body)) + bytes(12)
        out += body + bytes(-len(body) % 16)
    return out


def _patch(data: bytes, offset: int, new: bytes) -> bytes:
    return data[:offset] + new + data[offset + len(new) :]


def test_corrupt_streams(blob):
    offsets = {name: off for off, name, _ in _blocks(blob)}
    cases = [
        (blob[:-5], "not a multiple of 16"),
        (blob[:-16], "16 bytes left at offset"),
        (blob[:-32], "no 'vela_end_stream' block"),
        (blob[: offsets["inputs"] + 48], "declares 76 data bytes but only 16 remain"),
        (blob[:16], "a block header needs 32"),
        (_patch(blob, 0, b"not_a_stream\x00\x00\x00\x00"), "first block is 'not_a_stream'"),
        (_patch(blob, offsets["cmd_data"], b"\xff\xfe"), "not NUL-padded printable ASCII"),
        (_patch(blob, offsets["inputs"] + 32, struct.pack("<i", 3)), "count 3 needs 112 bytes"),
        (_patch(blob, offsets["outputs"], b"inputs\x00\x00"), "'inputs' appears twice"),
        (_patch(blob, offsets["weight_data"], b"weight_dat_\x00"), r"missing block\(s\) \['weight_data'\]"),
        (_rebuild(blob, "scratch_data", bytes(4)), "'scratch_data' block: 4 bytes, expected 20"),
        (_rebuild(blob, "outputs", b"\1\0"), "'outputs' block: 2 bytes, needs at least 4"),
    ]  # fmt: skip
    for data, message in cases:
        with pytest.raises(BinStreamError, match=message):
            parse_binstream(data)
    with pytest.raises(TypeError, match="takes bytes"):
        parse_binstream("vela_bin_stream")
    with pytest.raises(BinStreamError):
        append_block(blob[:-32], "tosa_graph", b"x")  # never extend a broken stream
