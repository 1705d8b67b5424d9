"""Run ethos-u-vela in-process on a TOSA flatbuffer and collect everything it writes.

vela is called through ``ethosu.vela.vela.main(argv)`` with ``--output-format raw`` (so it writes
``<name>_vela.npz``), ``--verbose-performance`` (so it writes ``<name>_per-layer.csv``) and
``--enable-debug-db`` (so it writes ``<name>_debug.xml``, whose "queue" table says which per-layer
row each kick-off of the command stream belongs to); it always writes
``<name>_summary_<system_config>.csv``. Its console output is captured, including
what its C++ core (Regor) prints straight to file descriptors 1 and 2.
"""

from __future__ import annotations

import contextlib
import csv
import ctypes
import io
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from ethosu.vela import vela as _vela

from .vela_config import BUNDLED_CONFIG, MemoryLimits, validate

# Flags this module sets itself; passing them in extra_flags would make the result ambiguous.
_RESERVED_FLAGS = (
    "--output-dir",
    "--output-format",
    "--accelerator-config",
    "--system-config",
    "--memory-mode",
    "--config",
    "--list-configs",
    "--list-config-files",
    "--supported-ops-report",
    "--version",
    "--help",
    "--enable-debug-db",
)
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


class VelaCompileError(RuntimeError):
    """vela refused the graph or the options. ``command`` reproduces the run from a shell."""

    def __init__(self, reason: str, command: str, stdout: str = "", stderr: str = "") -> None:
        self.reason = reason
        self.command = command
        self.stdout = stdout
        self.stderr = stderr
        tail = "\n".join((stdout + stderr).strip().splitlines()[-15:])
        text = f"vela failed: {reason}\nReproduce with:\n  {command}"
        if tail:
            text += f"\nLast vela output:\n{tail}"
        super().__init__(text)


@dataclass(frozen=True)
class VelaTensor:
    """One NPU input or output as vela placed it: 6-D shape, bytes per element, and where.

    ``offset`` is the byte offset inside the memory ``region`` (vela's region numbers: the
    command stream's base-pointer index; region 1 is the scratch arena here).
    """

    shape: tuple[int, ...]
    elem_size: int
    offset: int
    region: int

    @property
    def nbytes(self) -> int:
        """Size of the tensor in bytes."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.elem_size


@dataclass
class VelaResult:
    """Everything one vela compile produced. Sizes in bytes unless the name says otherwise."""

    target: str
    limits: MemoryLimits
    command: list[str]
    cmd_data: bytes
    weight_data: bytes
    weight_region: int
    scratch_size: int
    scratch_region: int
    scratch_fast_size: int
    scratch_fast_region: int
    inputs: list[VelaTensor]
    outputs: list[VelaTensor]
    summary: dict[str, int | float | str]
    per_layer: list[dict[str, int | float | str]]
    cpu_ops: int
    npu_ops: int
    # One per scheduled operation that vela emitted as kick-offs, in stream order (see layer_kickoffs)
    layer_kickoffs: list[dict[str, int]] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    npz_path: Path | None = None
    summary_csv_path: Path | None = None
    per_layer_csv_path: Path | None = None
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def system_config(self) -> str:
        return self.limits.system_config

    @property
    def memory_mode(self) -> str:
        return self.limits.memory_mode

    @property
    def command_line(self) -> str:
        """A shell line that reruns this compile (the TOSA path is the one given to vela)."""
        return shlex.join(["vela", *self.command])


def compile_with_vela(
    tosa_bytes: bytes,
    target: str,
    system_config: str | None = None,
    memory_mode: str | None = None,
    config_ini: str | Path | None = None,
    extra_flags: Sequence[str] = (),
    work_dir: str | Path | None = None,
    name: str = "model",
) -> VelaResult:
    """Compile a TOSA 1.0 PRO-INT flatbuffer with vela and return its outputs.

    ``system_config``/``memory_mode`` default per family (see ``vela_config``); ``config_ini``
    defaults to vela's bundled ``Arm/vela.ini``. With ``work_dir`` the input ``<name>.tosa``
    and vela's files stay there and their paths are set in the result; without it a temporary
    folder is used and removed on success (kept on failure, so the repro command works).
    Not thread-safe: console capture redirects the process's file descriptors 1 and 2.
    """
    limits = validate(target, system_config, memory_mode, config_ini)
    data = _check_tosa(tosa_bytes)
    flags = _check_extra_flags(extra_flags)
    if not _NAME_RE.match(name):
        raise ValueError(f"name {name!r} must match {_NAME_RE.pattern} (it becomes a file name)")

    own_dir = work_dir is None
    out_dir = Path(tempfile.mkdtemp(prefix="arm_ethosu_vela_")) if own_dir else Path(work_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    out_dir = out_dir.resolve()  # absolute, so the repro command works from any folder
    tosa_path = out_dir / f"{name}.tosa"
    tosa_path.write_bytes(data)
    # The bundled ini is named the way vela documents it; vela warns on its absolute path.
    config_arg = "Arm/vela.ini" if limits.config_path == BUNDLED_CONFIG else str(limits.config_path)
    options = {
        "--accelerator-config": target,
        "--system-config": limits.system_config,
        "--memory-mode": limits.memory_mode,
        "--config": config_arg,
        "--output-format": "raw",
        "--output-dir": str(out_dir),
    }
    argv = [str(tosa_path), *(x for kv in options.items() for x in kv), "--verbose-performance",
            "--enable-debug-db"]
    argv += flags
    command = shlex.join(["vela", *argv])

    with _captured() as cap:
        try:
            rc = _vela.main(argv)
            reason = None if rc == 0 else f"vela returned {rc}"
        except SystemExit as exc:  # argparse errors on bad extra_flags
            reason = f"vela rejected its arguments (exit {exc.code})"
        except Exception as exc:  # Regor raises RuntimeError("Compilation failed: ...")
            reason = f"{type(exc).__name__}: {str(exc).strip()}"
    if reason is not None:
        raise VelaCompileError(reason, command, cap.stdout, cap.stderr)

    npz_path = out_dir / f"{name}_vela.npz"
    summary_path = out_dir / f"{name}_summary_{limits.system_config}.csv"
    layers_path = out_dir / f"{name}_per-layer.csv"
    if not npz_path.is_file() or not summary_path.is_file():
        found = sorted(p.name for p in out_dir.iterdir())
        raise VelaCompileError(
            f"vela returned 0 but did not write {npz_path.name} and {summary_path.name} "
            f"(found: {found}); vela may have changed its output names",
            command,
            cap.stdout,
            cap.stderr,
        )
    try:
        result = _read_outputs(
            npz_path, summary_path, layers_path if layers_path.is_file() else None
        )
    except (KeyError, ValueError) as exc:
        raise VelaCompileError(
            f"could not read vela's outputs in {out_dir}: {exc}", command, cap.stdout, cap.stderr
        ) from exc
    debug_path = out_dir / f"{name}_debug.xml"
    if debug_path.is_file():
        result["layer_kickoffs"] = layer_kickoffs(debug_path.read_text())
    result.update(
        target=target,
        limits=limits,
        command=argv,
        stdout=cap.stdout,
        stderr=cap.stderr,
        cpu_ops=_count_ops("CPU", cap.stdout),
        npu_ops=_count_ops("NPU", cap.stdout),
    )
    if own_dir:
        shutil.rmtree(out_dir, ignore_errors=True)
    else:
        result.update(
            npz_path=npz_path,
            summary_csv_path=summary_path,
            per_layer_csv_path=layers_path if layers_path.is_file() else None,
            files={p.name: p for p in sorted(out_dir.iterdir()) if p.name.startswith(name)},
        )
    return VelaResult(**result)


def _check_tosa(tosa_bytes: bytes) -> bytes:
    if not isinstance(tosa_bytes, bytes | bytearray | memoryview):
        raise TypeError(
            f"tosa_bytes must be bytes (a serialized TOSA flatbuffer), got {type(tosa_bytes).__name__}"
        )
    data = bytes(tosa_bytes)
    if len(data) < 8 or data[4:8] != b"TOSA":
        raise ValueError(
            f"tosa_bytes is not a TOSA flatbuffer: bytes 4..8 are {data[4:8]!r}, expected b'TOSA'. "
            "Pass the output of TosaSerializer.serialize() for a TOSA 1.0 graph."
        )
    return data


def _check_extra_flags(extra_flags: Sequence[str]) -> list[str]:
    if isinstance(extra_flags, str):
        raise TypeError(f"extra_flags must be a list of strings, e.g. [{extra_flags!r}]")
    flags = [str(f) for f in extra_flags]
    for flag in flags:
        if flag.split("=", 1)[0] in _RESERVED_FLAGS:
            raise ValueError(
                f"extra_flags may not contain {flag!r}: compile_with_vela sets it itself; use the "
                "target/system_config/memory_mode/config_ini/work_dir arguments instead"
            )
    return flags


def _bytes_of(arr: np.ndarray) -> bytes:
    raw = arr.tobytes()
    # numpy stores b"" as a 1-byte |S1 scalar; a real stream is never a lone NUL byte.
    if arr.dtype.kind == "S" and arr.dtype.itemsize == 1 and raw == b"\x00":
        return b""
    return raw


def _tensors(npz, prefix: str) -> list[VelaTensor]:
    shapes = np.asarray(npz[f"{prefix}_shape"])
    count = len(shapes)
    fields = [
        np.asarray(npz[f"{prefix}_{k}"]).reshape(-1) for k in ("elem_size", "offset", "region")
    ]
    return [
        VelaTensor(
            shape=tuple(int(d) for d in np.asarray(shapes[i]).reshape(-1)),
            elem_size=int(fields[0][i]),
            offset=int(fields[1][i]),
            region=int(fields[2][i]),
        )
        for i in range(count)
    ]


def _read_outputs(npz_path: Path, summary_path: Path, layers_path: Path | None) -> dict:
    # allow_pickle=False: the object-typed quantization entries are never read (TOSA tensors
    # carry no quantization parameters), so no pickle is ever loaded.
    with np.load(npz_path, allow_pickle=False) as npz:
        out = {
            "cmd_data": _bytes_of(npz["cmd_data"]),
            "weight_data": _bytes_of(npz["weight_data"]),
            "weight_region": int(npz["weight_region"]),
            "scratch_size": int(npz["scratch_size"]),
            "scratch_region": int(npz["scratch_region"]),
            "scratch_fast_size": int(npz["scratch_fast_size"]),
            "scratch_fast_region": int(npz["scratch_fast_region"]),
            "inputs": _tensors(npz, "input"),
            "outputs": _tensors(npz, "output"),
        }
    rows = _read_csv(summary_path)
    if len(rows) != 1:
        raise ValueError(f"{summary_path.name} has {len(rows)} data rows, expected 1")
    out["summary"] = rows[0]
    out["per_layer"] = _read_csv(layers_path) if layers_path else []
    return out


def _debug_tables(xml_text: str) -> dict[str, list[dict[str, str]]]:
    """The CSV tables of vela's debug database (``<table name=...><![CDATA[csv]]></table>``)."""
    tables = {}
    for match in re.finditer(r'<table name="([^"]+)">\s*<!\[CDATA\[\n(.*?)\]\]>', xml_text, re.DOTALL):
        tables[match.group(1)] = list(csv.DictReader(io.StringIO(match.group(2))))
    return tables


def layer_kickoffs(xml_text: str) -> list[dict[str, int]]:
    """Where each per-layer row's work ends in the command stream, from vela's debug database.

    One dict per row of the "queue" table (a scheduled operation that became kick-offs), in stream
    order: ``offset`` (byte offset of its last kick-off in the register command stream, after the
    driver header), ``layer`` (index of its row in the per-layer CSV: the "perf" table has the same
    rows in the same order), and from "perf_debug" its OFM width and kernel size, which tell its
    kick-offs from those of an operation cascaded with it.
    """
    tables = _debug_tables(xml_text)
    row_of = {r["id"]: i for i, r in enumerate(tables.get("perf", []))}
    shapes = {r["id"]: r for r in tables.get("perf_debug", [])}
    out = []
    for q in tables.get("queue", []):
        sid = q.get("scheduled_id", "")
        if sid not in row_of:
            continue
        d = shapes.get(sid, {})
        out.append({"offset": int(q["offset"]), "layer": row_of[sid],
                    **{k: int(d[c]) if d.get(c, "").isdigit() else 0
                       for k, c in (("ofm_w", "ofm_shape_w"), ("kernel_w", "kernel_size_x"),
                                    ("kernel_h", "kernel_size_y"))}})
    return out


def _number(text: str) -> int | float | str:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def read_vela_csv(path: str | Path) -> list[dict[str, int | float | str]]:
    """Rows of a vela CSV (summary or per-layer) with vela's column names, numbers parsed."""
    return _read_csv(Path(path))


def _read_csv(path: Path) -> list[dict[str, int | float | str]]:
    with open(path, newline="") as f:
        return [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(f)]


def _count_ops(kind: str, stdout: str) -> int:
    # vela prints "CPU operators = 0 (0.0%)" / "NPU operators = 1 (100.0%)" in its summary.
    match = re.search(rf"^{kind} operators = (\d+)", stdout, re.MULTILINE)
    return int(match.group(1)) if match else 0


class _Captured:
    stdout = ""
    stderr = ""


@contextlib.contextmanager
def _captured() -> Iterator[_Captured]:
    """Capture Python-level and fd-level stdout/stderr (Regor's C++ prints to the fds)."""
    cap = _Captured()
    py_out, py_err = io.StringIO(), io.StringIO()
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as fd_out, tempfile.TemporaryFile() as fd_err:
        saved = (os.dup(1), os.dup(2))
        try:
            os.dup2(fd_out.fileno(), 1)
            os.dup2(fd_err.fileno(), 2)
            with contextlib.redirect_stdout(py_out), contextlib.redirect_stderr(py_err):
                yield cap
        finally:
            libc.fflush(None)  # push C stdio buffers into the temp files before restoring
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            fd_out.seek(0)
            fd_err.seek(0)
            cap.stdout = py_out.getvalue() + fd_out.read().decode("utf-8", "replace")
            cap.stderr = py_err.getvalue() + fd_err.read().decode("utf-8", "replace")
