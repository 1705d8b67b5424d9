"""Compile specs: what the user asks of a TOSA compile, and how it travels to the backend.

ExecuTorch hands a backend only a list of `CompileSpec(key, bytes)`; `to_list`/`from_list` are the one
place that encoding lives.
"""

from __future__ import annotations

import json
from pathlib import Path

from executorch.exir.backend.compile_spec_schema import CompileSpec

from .specification import TosaSpecification

_DEBUG_MODES = ("json", "none")


class TosaCompileSpec:
    """What to compile for: a TOSA specification plus output options.

    `TosaCompileSpec("TOSA-1.0+FP").dump_intermediate_artifacts_to("out/")` keeps each partition's
    `.tosa` file (and its debug map, see `dump_debug_info`) in `out/`.
    """

    output_format = "tosa"

    def __init__(self, tosa_spec: TosaSpecification | str) -> None:
        self.tosa_spec = TosaSpecification.coerce(tosa_spec)
        self._intermediate_path: str | None = None
        self._debug_mode: str | None = None
        # Integer tensors cross the delegate boundary when True (INT profile only).
        self.integer_io = False
        # Fold RESCALE(acc -> int8) -> RESCALE(int8 -> int32) pairs into one. Fewer RESCALEs, but the
        # skipped int8 rounding makes results differ from the quantized PyTorch model by a few LSBs.
        self.fold_rescales = False

    def dump_intermediate_artifacts_to(self, path: str | Path | None) -> TosaCompileSpec:
        """Write each partition's TOSA flatbuffer (and reports) to `path`; returns self so calls chain."""
        self._intermediate_path = None if path is None else str(path)
        return self

    def get_intermediate_path(self) -> str | None:
        return self._intermediate_path

    def dump_debug_info(self, mode: str | None = "json") -> TosaCompileSpec:
        """Record, for each TOSA operator, the torch node and source stack it came from.

        Mode "json" writes `<partition>.debug.json` beside the `.tosa` file (needs an intermediate path).
        """
        if mode is not None and mode not in _DEBUG_MODES:
            raise ValueError(f"unknown debug mode {mode!r}; valid: {list(_DEBUG_MODES)}")
        self._debug_mode = None if mode == "none" else mode
        return self

    def get_debug_mode(self) -> str | None:
        return self._debug_mode

    def get_output_format(self) -> str:
        return self.output_format

    def _extra_specs(self) -> dict:
        """Target-specific settings for subclasses to add (JSON-serialisable)."""
        return {}

    def to_list(self) -> list[CompileSpec]:
        """Encode as ExecuTorch `CompileSpec` entries for `BackendDetails.preprocess`."""
        payload = {
            "tosa_spec": str(self.tosa_spec),
            "output_format": self.get_output_format(),
            "intermediate_path": self._intermediate_path,
            "debug_mode": self._debug_mode,
            "integer_io": self.integer_io,
            "fold_rescales": self.fold_rescales,
            **self._extra_specs(),
        }
        return [CompileSpec("arm_compile_spec", json.dumps(payload).encode())]

    @staticmethod
    def settings_from_list(specs: list[CompileSpec]) -> dict:
        """Decode what `to_list` wrote."""
        for spec in specs:
            if spec.key == "arm_compile_spec":
                return json.loads(bytes(spec.value).decode())
        raise ValueError("compile specs carry no 'arm_compile_spec' entry: build them with "
                         "TosaCompileSpec(...).to_list()")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.tosa_spec)!r})"
