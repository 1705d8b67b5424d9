"""A small seeded mutation fuzzer for runtime-cpp's payload parsers (no libFuzzer here: no clang).

    python -m runtime_cpp.fuzz vela_bin_stream --seed-file payload.bin --iterations 20000
    python -m runtime_cpp.fuzz tosa_graph --seed-file graph.tosa --seconds 60
    python -m runtime_cpp.fuzz ethosu_command_stream --seed-file payload.bin  # runs the NPU simulator

Each target is a C entry point `runtime_cpp_fuzz_<target>(data, size)` in a backend module; it must
return an ExecuTorch Error code and never crash. Before each call the input is written to
`--crash-file`, so an input that kills the process is left behind (turn it into a regression test).
Exit status 0 when every input returned; the summary line counts accepted and rejected inputs.
"""

from __future__ import annotations

import argparse
import ctypes
import random
import struct
import sys
import time
from pathlib import Path

from ._registry import module_handle

TARGETS = {"vela_bin_stream": "ethosu", "ethosu_command_stream": "ethosu", "tosa_graph": "tosa"}


def entry_point(target: str):
    """The ctypes function for `target` (ValueError naming the targets, or why it is missing)."""
    if target not in TARGETS:
        raise ValueError(f"unknown fuzz target {target!r}; targets: {', '.join(TARGETS)}")
    lib = module_handle(TARGETS[target])
    if lib is None:
        raise ValueError(f"fuzz target {target!r} lives in backend {TARGETS[target]!r}, which is not "
                         "registered (see runtime_cpp.backends())")
    fn = getattr(lib, f"runtime_cpp_fuzz_{target}")
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to four random edits: bit flips, byte writes, 32-bit size fields set to edge values,
    truncation, duplication or removal of a chunk."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not buf:
            buf.extend(rng.randbytes(rng.randint(1, 64)))
            continue
        kind = rng.randrange(6)
        pos = rng.randrange(len(buf))
        if kind == 0:
            buf[pos] ^= 1 << rng.randrange(8)
        elif kind == 1:
            buf[pos] = rng.randrange(256)
        elif kind == 2 and len(buf) >= 4:
            pos = rng.randrange(0, len(buf) - 3) & ~3
            value = rng.choice([0, 1, 15, 16, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, len(buf), len(buf) + 16])
            buf[pos:pos + 4] = struct.pack("<I", value)
        elif kind == 3:
            del buf[rng.randrange(len(buf)):]
        elif kind == 4:
            end = min(len(buf), pos + rng.randint(1, 64))
            buf[pos:pos] = buf[pos:end]
        else:
            end = min(len(buf), pos + rng.randint(1, 64))
            del buf[pos:end]
    return bytes(buf)


def run(target: str, seeds: list[bytes], iterations: int, seconds: float | None, seed: int,
        crash_file: Path | None) -> tuple[int, int]:
    """Fuzz `target`; return (accepted, rejected) counts. A crash ends the process."""
    fn = entry_point(target)
    rng = random.Random(seed)
    accepted = rejected = 0
    deadline = None if seconds is None else time.monotonic() + seconds
    for i in range(iterations):
        if deadline is not None and time.monotonic() > deadline:
            break
        data = seeds[i % len(seeds)] if i < len(seeds) else mutate(rng.choice(seeds), rng)
        if crash_file is not None:
            crash_file.write_bytes(data)
        if fn(data, len(data)) == 0:
            accepted += 1
        else:
            rejected += 1
    return accepted, rejected


def main(argv: list[str] | None = None) -> int:
    """Command-line entry (see the module docstring)."""
    p = argparse.ArgumentParser(prog="python -m runtime_cpp.fuzz", description=__doc__.split("\n")[0])
    p.add_argument("target", choices=sorted(TARGETS))
    p.add_argument("--seed-file", type=Path, action="append", required=True)
    p.add_argument("--iterations", type=int, default=10_000)
    p.add_argument("--seconds", type=float)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--crash-file", type=Path)
    args = p.parse_args(argv)
    seeds = [f.read_bytes() for f in args.seed_file]
    accepted, rejected = run(args.target, seeds, args.iterations, args.seconds, args.seed, args.crash_file)
    print(f"{args.target}: {accepted + rejected} inputs, {accepted} accepted, {rejected} rejected, no crash")
    return 0


if __name__ == "__main__":
    sys.exit(main())
