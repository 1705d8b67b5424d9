"""Bad payloads and bad calls give an ExecuTorch Error and a log line naming the problem; the process
lives and keeps running good programs. Plus: two methods in two threads, and bounded fuzz runs."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import runtime_cpp_test_programs as progs
import torch
from executorch.runtime import Runtime

import runtime_cpp  # noqa: F401
from arm_ethosu import build_binstream, parse_binstream
from arm_tosa_core import run_on_reference_model

REGRESSIONS = Path(__file__).with_name("fuzz_regressions")


@pytest.fixture(scope="module")
def tosa_edge():
    return progs.tosa_fp_edge()


@pytest.fixture(scope="module")
def ethosu_edge():
    return progs.ethosu_edge()


def _payload(edge) -> bytes:
    (module,) = progs.lowered_modules(edge)
    return bytes(module.processed_bytes)


def _load_fails(pte: bytes, capfd, log: str) -> None:
    program = Runtime.get().load_program(pte)
    with pytest.raises(RuntimeError, match="Failed to load method"):
        program.load_method("forward")
    assert log in capfd.readouterr().err


def _method(pte: bytes):
    """(program, method): the caller keeps the program alive (the Method does not own it)."""
    program = Runtime.get().load_program(pte)
    return program, program.load_method("forward")


def _still_runs(edge) -> None:
    x = torch.randn(progs.INPUT)
    _program, method = _method(progs.pte(edge))
    (y,) = method.execute([x])
    assert torch.equal(y, run_on_reference_model(edge, x))


def test_tosa_truncated_wrong_magic_and_malformed_graphs(tosa_edge, capfd):
    good = _payload(tosa_edge)
    _load_fails(progs.pte_with_payload(tosa_edge, good[: len(good) // 2]), capfd, "TOSABackend")
    _load_fails(progs.pte_with_payload(tosa_edge, good[:4] + b"XOSA" + good[8:]), capfd,
                "is not a TOSA flatbuffer")
    # found by the fuzzer: the serialization library dereferences an absent field (SIGSEGV; under
    # UBSan the checked child exits instead of crashing, so "rejected" is the message there)
    crash = (REGRESSIONS / "tosa_graph_deserialize_segv.bin").read_bytes()
    _load_fails(progs.pte_with_payload(tosa_edge, crash), capfd, "TOSABackend: the TOSA reference model")
    _still_runs(tosa_edge)


def test_ethosu_stream_errors(ethosu_edge, capfd):
    good = _payload(ethosu_edge)
    cases = {
        "not a multiple of 16": good[:-16 - 8],
        "truncated bin stream": good[:64],
        "no NUL-terminated name": b"\xff" * 16 + good[16:],
        "but the firmware expects 'vela_bin_stream'": b"cmd_data".ljust(16, b"\0") + good[16:],
    }
    # cmd_data (2nd block, header at 32) declares more bytes than remain
    cases["declares"] = good[:48] + struct.pack("<I", len(good)) + good[52:]
    for log, payload in cases.items():
        _load_fails(progs.pte_with_payload(ethosu_edge, payload), capfd, log)
    _still_runs(ethosu_edge)


def test_ethosu_deployable_payload_runs_on_the_npu_simulator(ethosu_edge):
    # no host graph: the command stream itself runs (test_ethosu_simulator.py has the details)
    stream = parse_binstream(_payload(ethosu_edge))
    deployable = build_binstream(stream, {k: v for k, v in stream.extra.items() if k != "tosa_graph"})
    x = torch.randn(progs.INPUT)
    _program, method = _method(progs.pte_with_payload(ethosu_edge, deployable))
    (y,) = method.execute([x])
    assert torch.equal(y, run_on_reference_model(ethosu_edge, x))


def test_ethosu_io_mismatch(ethosu_edge, capfd):
    stream = parse_binstream(_payload(ethosu_edge))
    # the vela I/O table describes another input shape than the tensors the method passes
    wrong = replace(stream.inputs[0], shape=(1, 1, 1, 3, 9, 8))
    payload = build_binstream(replace(stream, inputs=[wrong]), stream.extra)
    _program, method = _method(progs.pte_with_payload(ethosu_edge, payload))
    with pytest.raises(RuntimeError):
        method.execute([torch.randn(progs.INPUT)])
    assert "the vela payload describes shape [1,1,1,3,9,8]" in capfd.readouterr().err
    # an I/O count that disagrees with the host graph is refused at load
    payload = build_binstream(replace(stream, inputs=[stream.inputs[0]] * 2), stream.extra)
    _load_fails(progs.pte_with_payload(ethosu_edge, payload), capfd, "assembled from different compiles")
    _still_runs(ethosu_edge)


def test_two_methods_in_two_threads(tosa_edge, ethosu_edge):
    jobs, programs = [], []
    for edge in (tosa_edge, ethosu_edge):
        program, method = _method(progs.pte(edge))
        programs.append(program)
        xs = [torch.randn(progs.INPUT) for _ in range(4)]
        jobs.append((method, xs, [run_on_reference_model(edge, x) for x in xs]))
    failures: list[str] = []

    def work(method, xs, expected):
        for _ in range(3):
            for x, want in zip(xs, expected, strict=True):
                (got,) = method.execute([x])
                if not torch.equal(got, want):
                    failures.append("mismatch")

    threads = [threading.Thread(target=work, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


@pytest.mark.parametrize(("target", "iterations"),
                         [("vela_bin_stream", 400), ("ethosu_command_stream", 150), ("tosa_graph", 25)])
def test_bounded_fuzz_run(target, iterations, ethosu_edge, tmp_path):
    """A short seeded run in the normal session (`nox -s runtime-fuzz` runs RUNTIME_CPP_FUZZ_SCALE
    times more; `nox -s runtime-asan` runs it against the ASan/UBSan build, with a longer time limit:
    there the 400 stream inputs took just over 600 s at load 20)."""
    iterations *= int(os.environ.get("RUNTIME_CPP_FUZZ_SCALE", "1"))
    limit_s = float(os.environ.get("RUNTIME_CPP_FUZZ_TIMEOUT_S", "600"))
    payload = _payload(ethosu_edge)
    seed = payload if target != "tosa_graph" else parse_binstream(payload).extra["tosa_graph"]
    (tmp_path / "seed.bin").write_bytes(seed)
    crash = tmp_path / "last_input.bin"
    done = subprocess.run([sys.executable, "-m", "runtime_cpp.fuzz", target, "--seed-file",
                           str(tmp_path / "seed.bin"), "--iterations", str(iterations), "--crash-file",
                           str(crash)], capture_output=True, text=True, timeout=limit_s)
    assert done.returncode == 0, f"crashed on {crash} (keep it in tests/fuzz_regressions):\n{done.stderr[-2000:]}"
    line = done.stdout.strip().splitlines()[-1]
    accepted, rejected = _counts(line)
    assert accepted >= 1 and rejected >= 1, line  # the seed parses; mutations get refused


def _counts(line: str) -> tuple[int, int]:
    words = line.replace(",", "").split()
    return int(words[words.index("accepted") - 1]), int(words[words.index("rejected") - 1])
