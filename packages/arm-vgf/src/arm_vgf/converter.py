"""TOSA flatbuffer -> VGF through the ML SDK `model-converter` binary."""

from __future__ import annotations

import logging
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

from arm_vgf.environment import find_model_converter

logger = logging.getLogger(__name__)

TOSA_FILE_NAME = "model.tosa"
VGF_FILE_NAME = "model.vgf"
_TOSA_IDENTIFIER = b"TOSA"  # flatbuffer file identifier, bytes 4..8


class VgfConversionError(RuntimeError):
    """`model-converter` failed. Carries its message, the command to reproduce it, and the kept
    TOSA file."""

    def __init__(self, message: str, command: Sequence[str], tosa_path: Path) -> None:
        self.converter_message = message
        self.command = list(command)
        self.tosa_path = tosa_path
        super().__init__(
            f"model-converter failed to convert {tosa_path} to VGF:\n{message}\n"
            f"Reproduce with:\n  {self.command_line}\n"
            f"The TOSA input is kept at {tosa_path}."
        )

    @property
    def command_line(self) -> str:
        """The failing command, shell-quoted."""
        return shlex.join(self.command)


def _decode(raw: bytes) -> str:
    # The converter echoes offending input (possibly binary) in its diagnostics.
    return raw.decode("utf-8", errors="replace").strip()


def convert_tosa_to_vgf(
    tosa_bytes: bytes, work_dir: str | Path, compiler_flags: Sequence[str] | None = None
) -> bytes:
    """Convert a TOSA flatbuffer to VGF and return the VGF bytes.

    Writes `model.tosa` and `model.vgf` into `work_dir` (created if needed) and leaves them there
    for inspection. `compiler_flags` are extra `model-converter` arguments, e.g.
    `["--type-narrowing", "full"]` or `["--require-static-shape"]`.
    Raises VgfConversionError (message, command, kept TOSA path) when the converter fails.
    """
    if not isinstance(tosa_bytes, bytes | bytearray | memoryview):
        raise TypeError(f"tosa_bytes must be bytes, got {type(tosa_bytes).__name__}")
    if isinstance(compiler_flags, str):
        raise TypeError(
            f"compiler_flags must be a list of arguments, not the string {compiler_flags!r}: "
            f"use {shlex.split(compiler_flags)!r}"
        )
    flags = [str(f) for f in compiler_flags or ()]
    work = Path(work_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    tosa_path = work / TOSA_FILE_NAME
    vgf_path = work / VGF_FILE_NAME
    tosa_path.write_bytes(bytes(tosa_bytes))
    vgf_path.unlink(missing_ok=True)  # a stale output must not pass for a fresh one

    command = [str(find_model_converter()), "-i", str(tosa_path), "-o", str(vgf_path), *flags]
    proc = subprocess.run(command, capture_output=True)
    output = "\n".join(s for s in (_decode(proc.stderr), _decode(proc.stdout)) if s)
    if proc.returncode != 0 or not vgf_path.is_file() or vgf_path.stat().st_size == 0:
        message = output or f"exit status {proc.returncode} and no VGF written"
        if bytes(tosa_bytes[4:8]) != _TOSA_IDENTIFIER:
            message += (
                "\nHint: the input has no 'TOSA' flatbuffer identifier at bytes 4..8, so it is not"
                " a TOSA flatbuffer (the converter then tries to parse it as TOSA MLIR text)."
            )
        raise VgfConversionError(message, command, tosa_path)
    logger.debug("model-converter: %s\n%s", shlex.join(command), output)
    return vgf_path.read_bytes()
