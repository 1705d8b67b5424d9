"""VgfBackend on bad payloads: each one is an ExecuTorch Error with a log line, and the process lives.

The payload parser is also fuzzed: a seeded mutation fuzzer feeds mutants of a real VGF to the
parser's C entry point (`runtime_cpp_fuzz_vgf`, the same code `init` runs before any Vulkan call).
RUNTIME_CPP_FUZZ_ITERATIONS sets the run length (default: a bounded run of a few seconds).
"""

from __future__ import annotations

import ctypes
import io
import os
import random

import pytest
import torch
import vgfpy
from torch import nn

import runtime_cpp
from runtime_cpp._registry import module_handle

INVALID_PROGRAM = 0x23  # executorch::runtime::Error::InvalidProgram
OK = 0
NOT_SUPPORTED = 0x10  # Error::NotSupported (e.g. a mutated VkFormat)
FUZZ_ITERATIONS = int(os.environ.get("RUNTIME_CPP_FUZZ_ITERATIONS", "3000"))

pytestmark = pytest.mark.skipif(
    not any(s.name == "vgf" and s.registered for s in runtime_cpp.backends()),
    reason="VgfBackend not built: " + "; ".join(str(s) for s in runtime_cpp.backends() if s.name == "vgf"),
)


def _parser():
    parse = module_handle("vgf").runtime_cpp_fuzz_vgf
    parse.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    parse.restype = ctypes.c_int
    return lambda data: parse(bytes(data), len(data))


class _ConvAdd(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.conv(x) + 1.0


@pytest.fixture(scope="module")
def small_pte() -> tuple[bytes, bytes]:
    """(.pte, its VGF payload) of a one-conv model lowered with VgfPartitioner."""
    from executorch.exir import to_edge_transform_and_lower

    from arm_vgf import VgfCompileSpec, VgfPartitioner

    torch.manual_seed(0)
    model, x = _ConvAdd().eval(), (torch.randn(1, 3, 8, 8),)
    edge = to_edge_transform_and_lower(torch.export.export(model, x),
                                       partitioner=[VgfPartitioner(VgfCompileSpec())])
    ep = edge.exported_program()
    (vgf,) = [bytes(getattr(ep.graph_module, n.target).processed_bytes) for n in ep.graph.nodes
              if n.op == "get_attr" and str(n.target).startswith("lowered_module")]
    return edge.to_executorch().buffer, vgf


def _empty_vgf() -> bytes:
    encoder = vgfpy.CreateEncoder(0)
    encoder.Finish()
    out = io.BytesIO()
    assert encoder.WriteTo(out)
    return out.getvalue()


def test_parser_accepts_the_real_payload(small_pte):
    assert _parser()(small_pte[1]) == OK


@pytest.mark.parametrize("case,message", [
    ("truncated", "truncated payload"),
    ("header_only", "past the end"),
    ("wrong_magic", "wrong magic"),
    ("no_graph", "has no graph"),
    ("empty", "shorter than a VGF header"),
])
def test_bad_payload_is_an_error_with_a_log_line(case, message, small_pte, capfd):
    vgf = small_pte[1]
    data = {
        "truncated": vgf[: len(vgf) // 2],
        "header_only": vgf[:vgfpy.HeaderSize()],
        "wrong_magic": b"XXXX" + vgf[4:],
        "no_graph": _empty_vgf(),
        "empty": b"",
    }[case]
    assert _parser()(data) == INVALID_PROGRAM
    assert message in capfd.readouterr().err


def test_corrupt_payload_in_a_pte_fails_load_method_and_the_process_lives(small_pte, capfd):
    from executorch.runtime import Runtime

    pte, vgf = small_pte
    at = pte.find(vgf)
    assert at >= 0
    broken = pte[:at] + b"BAD!" + pte[at + 4:]  # wrong magic, same length
    with pytest.raises(RuntimeError, match="Failed to load method"):
        Runtime.get().load_program(broken).load_method("forward")
    assert "not a VGF file" in capfd.readouterr().err


def _mutate(data: bytearray, rng: random.Random) -> bytearray:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(4)
        if op == 0 and out:  # flip bits
            i = rng.randrange(len(out))
            out[i] ^= 1 << rng.randrange(8)
        elif op == 1 and out:  # overwrite a 32-bit field with an interesting value
            i = rng.randrange(max(1, len(out) - 4))
            out[i:i + 4] = rng.choice([0, 1, 0x7FFFFFFF, 0xFFFFFFFF, len(out), 1 << 31]).to_bytes(4, "little")
        elif op == 2:  # truncate
            del out[rng.randrange(len(out) + 1):]
        else:  # splice random bytes
            i = rng.randrange(len(out) + 1)
            out[i:i] = rng.randbytes(rng.randint(1, 16))
    return out


def test_fuzz_the_vgf_parser_bounded(small_pte):
    """Mutants of a real VGF: the parser returns Ok or an Error code, never crashes."""
    parse = _parser()
    rng = random.Random(1234)
    seed = bytearray(small_pte[1])
    codes = set()
    for _ in range(FUZZ_ITERATIONS):
        code = parse(_mutate(seed, rng))
        assert code in (OK, INVALID_PROGRAM, NOT_SUPPORTED), hex(code)
        codes.add(code)
    assert INVALID_PROGRAM in codes  # the mutants reach the checks
