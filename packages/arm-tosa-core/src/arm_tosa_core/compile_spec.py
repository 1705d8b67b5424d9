"""Compile specs: what the user asks of a TOSA compile, and how it travels to the backend.

ExecuTorch hands a backend only a list of `CompileSpec(key, bytes)`, and serializes that list into the
`.pte`; `to_list`/`from_list` are the one place that encoding lives. What only this machine means (the
artifact folder, its debug files, a target's own file paths) is kept out of the entries: it rides on
the list object (`CompileSpecList.host`) within this process, so the `.pte` does not depend on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from executorch.exir.backend.compile_spec_schema import CompileSpec

from .specification import TosaSpecification

_DEBUG_MODES = ("json", "none")
_KEY = "arm_compile_spec"


class CompileSpecList(list):
    """ExecuTorch's `list[CompileSpec]` plus `host`: settings that name things on the compiling machine.

    ExecuTorch passes this list object to the backend's `preprocess` and stores it on the lowered
    module; only its entries are serialized, so `host` reaches the backend and never the `.pte`. A copy
    made with `list(specs)` drops `host` (then no artifacts are written)."""

    def __init__(self, specs: list[CompileSpec] = (), host: dict[str, Any] | None = None) -> None:
        super().__init__(specs)
        self.host: dict[str, Any] = dict(host or {})


class TosaCompileSpec:
    """What to compile for: a TOSA specification plus output options.

    `TosaCompileSpec("TOSA-1.0+FP").dump_intermediate_artifacts_to("out/")` keeps each partition's
    `.tosa` file (and its debug map, see `dump_debug_info`) in `out/`.
    """

    output_format = "tosa"
    # output_format -> the spec class that writes it, for `from_list` (filled by __init_subclass__)
    _by_format: ClassVar[dict[str, type[TosaCompileSpec]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "output_format" in cls.__dict__:
            TosaCompileSpec._by_format[cls.output_format] = cls

    def __init__(self, tosa_spec: TosaSpecification | str) -> None:
        self.tosa_spec = TosaSpecification.coerce(tosa_spec)
        self._intermediate_path: str | None = None
        self._debug_mode: str | None = None
        # Integer tensors cross the delegate boundary when True (INT profile only).
        self.integer_io = False
        # Fold RESCALE(acc -> int8) -> RESCALE(int8 -> int32) pairs into one. Fewer RESCALEs, but the
        # skipped int8 rounding makes results differ from the quantized PyTorch model by a few LSBs.
        self.fold_rescales = False
        # An int16 product with constant weights RESCALEs its INT48 accumulator straight to its output with
        # a 16-bit multiplier (at most 1 LSB from the 32-bit form). Set by targets whose compiler keeps
        # only 15 bits of a fully connected layer's multiplier (Ethos-U85; ops/matmul.py says why).
        self.int16_fc_rescale16 = False

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
        """Target-specific settings for subclasses to add (JSON-serialisable; stored in the .pte)."""
        return {}

    def _host_specs(self) -> dict:
        """Target-specific settings that name things on this machine (file paths): they reach the
        backend in `CompileSpecList.host`, never the .pte. Subclasses add theirs."""
        return {}

    def to_list(self) -> CompileSpecList:
        """Encode as ExecuTorch `CompileSpec` entries for `BackendDetails.preprocess`.

        The entries hold what the compile computes from (stored in the .pte, identical wherever the
        artifacts go); the artifact folder and debug mode ride in the list's `host`."""
        payload = {
            "tosa_spec": str(self.tosa_spec),
            "output_format": self.get_output_format(),
            "integer_io": self.integer_io,
            "fold_rescales": self.fold_rescales,
            "int16_fc_rescale16": self.int16_fc_rescale16,
            **self._extra_specs(),
        }
        host = {"intermediate_path": self._intermediate_path, "debug_mode": self._debug_mode,
                **self._host_specs()}
        return CompileSpecList([CompileSpec(_KEY, json.dumps(payload).encode())], host)

    @staticmethod
    def settings_from_list(specs: list[CompileSpec]) -> dict:
        """Decode what `to_list` wrote: the stored settings, plus the host ones when `specs` carries
        them (`intermediate_path` and `debug_mode` are then None for a list read back from a .pte)."""
        for spec in specs:
            if spec.key == _KEY:
                settings = json.loads(bytes(spec.value).decode())
                host = getattr(specs, "host", None) or {"intermediate_path": None, "debug_mode": None}
                return {**settings, **host}
        raise ValueError("compile specs carry no 'arm_compile_spec' entry: build them with "
                         "TosaCompileSpec(...).to_list()")

    @classmethod
    def from_list(cls, specs: list[CompileSpec]) -> TosaCompileSpec:
        """The typed spec `to_list` encoded (a subclass's, e.g. EthosUCompileSpec, by its output
        format): `TosaCompileSpec.from_list(spec.to_list())` compiles as `spec` does."""
        settings = cls.settings_from_list(specs)
        fmt = settings.get("output_format", "tosa")
        kind = TosaCompileSpec._by_format.get(fmt)
        if kind is None:
            raise ValueError(f"compile specs of output format {fmt!r}: import the package whose compile "
                             f"spec writes it first (known: {sorted(TosaCompileSpec._by_format)})")
        if not issubclass(kind, cls):
            raise ValueError(f"these compile specs are a {kind.__name__}'s (output format {fmt!r}), not "
                             f"a {cls.__name__}'s: call {kind.__name__}.from_list or TosaCompileSpec.from_list")
        spec = kind._from_settings(settings)
        spec.integer_io = bool(settings.get("integer_io", False))
        spec.fold_rescales = bool(settings.get("fold_rescales", False))
        spec.int16_fc_rescale16 = bool(settings.get("int16_fc_rescale16", spec.int16_fc_rescale16))
        spec.dump_intermediate_artifacts_to(settings.get("intermediate_path"))
        return spec.dump_debug_info(settings.get("debug_mode") or "none")

    @classmethod
    def _from_settings(cls, settings: dict) -> TosaCompileSpec:
        """A spec of this class from decoded settings; subclasses read their `_extra_specs` back."""
        return cls(settings["tosa_spec"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.tosa_spec)!r})"


TosaCompileSpec._by_format[TosaCompileSpec.output_format] = TosaCompileSpec
