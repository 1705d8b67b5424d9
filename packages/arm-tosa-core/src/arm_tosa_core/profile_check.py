"""Check that a TOSA flatbuffer is valid for the profiles and extensions a specification names.

The reference model runs graphs that no conforming target has to accept (int32 arithmetic under a
float-only profile, for example), so passing it proves only the numerics. `validate_tosa` asks
`tosa-opt` (shipped in the tosa-tools wheel) to check each operator's data types, attributes and
level limits against exactly what the `TosaSpecification` implies::

    problems = validate_tosa(graph.flatbuffer, "TOSA-1.0+INT")
    assert not problems, "\\n".join(problems)
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from .errors import MissingToolError
from .specification import TosaSpecification

__all__ = ["target_env", "tosa_opt_path", "validate_tosa"]

_PROFILE_NAMES = {"FP": "pro_fp", "INT": "pro_int"}
# Our spec extensions that are TOSA 1.0 extensions too ("u55" is ours: a subset, not an extension).
_EXTENSION_NAMES = ("int16", "int4", "bf16", "fp8e4m3", "fp8e5m2", "fft", "variable", "controlflow",
                    "doubleround", "inexactround")
_INSTALL = "uv pip install tosa-tools==2026.8.0 (or `uv sync` in this workspace)"
_DIAGNOSTIC = re.compile(r"^(?P<where>.*?):\d+:\d+: (?P<kind>error|warning|note): (?P<text>.*)$")


def tosa_opt_path() -> Path:
    """The `tosa-opt` binary inside the installed tosa-tools wheel."""
    from importlib import metadata

    try:
        dist = metadata.distribution("tosa-tools")
    except metadata.PackageNotFoundError:
        raise MissingToolError(f"tosa-tools is not installed, so TOSA graphs cannot be validated: {_INSTALL}"
                               ) from None
    path = Path(dist.locate_file("bin/tosa-opt"))
    if not path.is_file():
        raise MissingToolError(f"tosa-opt is missing from the tosa-tools install (looked at {path}); "
                               f"reinstall it: {_INSTALL}")
    return path


def target_env(spec: TosaSpecification | str) -> str:
    """The `--tosa-attach-target` options for `spec` (version, profiles, extensions, level 8k)."""
    spec = TosaSpecification.coerce(spec)
    profiles = ",".join(_PROFILE_NAMES[p] for p in sorted(spec.profiles))
    extensions = ",".join(e for e in _EXTENSION_NAMES if spec.support_extension(e))
    options = [f"specification_version={spec.version[0]}.{spec.version[1]}", f"profiles={profiles}"]
    if extensions:
        options.append(f"extensions={extensions}")
    return " ".join([*options, "level=8k"])


def validate_tosa(tosa: bytes | bytearray | memoryview | str | Path, spec: TosaSpecification | str,
                  timeout: float = 120.0) -> list[str]:
    """Run `tosa-opt --tosa-validate=strict-op-spec-alignment` on a TOSA flatbuffer for `spec`.

    `tosa` is the flatbuffer's bytes or a path to a `.tosa` file. Returns one line per problem
    (the message and the offending operator); an empty list means valid for the spec.
    """
    spec = TosaSpecification.coerce(spec)
    binary = tosa_opt_path()
    with tempfile.TemporaryDirectory(prefix="tosa_validate_") as tmp:
        if isinstance(tosa, (str, Path)):
            path = Path(tosa).resolve()
            if not path.is_file():
                raise FileNotFoundError(f"no TOSA flatbuffer at {path}")
        else:
            path = Path(tmp) / "graph.tosa"
            path.write_bytes(bytes(tosa))
        cmd = [str(binary), f"--tosa-deserialize=tosa-flatbuffer-filename={path}",
               f"--tosa-attach-target={target_env(spec)}",
               "--tosa-validate=strict-op-spec-alignment", "-o", str(Path(tmp) / "out.mlir")]
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, check=False)
    problems = _diagnostics(proc.stderr)
    if proc.returncode != 0 and not problems:  # e.g. an unreadable flatbuffer: say what tosa-opt said
        said = (proc.stderr + proc.stdout).strip() or f"exit status {proc.returncode}"
        problems = [f"tosa-opt failed: {said}"]
    return problems


def _diagnostics(stderr: str) -> list[str]:
    """tosa-opt's errors, each joined with the `note:` naming its operator."""
    problems: list[str] = []
    for line in stderr.splitlines():
        match = _DIAGNOSTIC.match(line.strip())
        if match is None:
            continue
        if match["kind"] == "error":
            problems.append(match["text"])
        elif match["kind"] == "note" and problems:
            problems[-1] += f" [{match['text'].removeprefix('see current operation: ')}]"
    return problems
