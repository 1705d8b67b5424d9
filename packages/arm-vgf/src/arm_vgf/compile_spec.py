"""VgfCompileSpec: a TOSA compile spec for the VGF target, plus the model converter's flags."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from arm_tosa_core import TosaCompileSpec, TosaSpecification

# The ML SDK 0.11 model converter accepts TOSA 1.0 FP and INT graphs, including the int16
# extension (int16 x int8 CONV2D with INT48 accumulators, int16 RESCALE, TABLE and pooling were
# converted and ran bit-exact against the reference model: see tests/test_vgf_int16.py).
DEFAULT_TOSA_SPEC = "TOSA-1.0+FP+INT+int16"


class VgfCompileSpec(TosaCompileSpec):
    """What to compile for the VGF target (ML SDK for Vulkan).

    `VgfCompileSpec()` targets "TOSA-1.0+FP+INT+int16"; `compiler_flags` are extra
    `model-converter` arguments, e.g. `["--type-narrowing", "full"]` (fp32 -> fp16 inside the VGF,
    its inputs and outputs included: `run_vgf_on_vulkan` casts at the boundary).
    `dump_intermediate_artifacts_to(dir)` keeps each partition's `.tosa` and `.vgf` in `dir`.
    """

    output_format = "vgf"

    def __init__(self, tosa_spec: TosaSpecification | str | None = None,
                 compiler_flags: Sequence[str] | None = None) -> None:
        super().__init__(DEFAULT_TOSA_SPEC if tosa_spec is None else tosa_spec)
        self.compiler_flags = _check_flags(compiler_flags)

    @staticmethod
    def get_output_format() -> str:
        """The payload format this spec produces: "vgf"."""
        return "vgf"

    def _extra_specs(self) -> dict:
        return {"compiler_flags": list(self.compiler_flags)}

    @classmethod
    def _from_settings(cls, settings: dict) -> VgfCompileSpec:
        return cls(settings["tosa_spec"], settings.get("compiler_flags") or [])

    def __repr__(self) -> str:
        flags = f", compiler_flags={self.compiler_flags!r}" if self.compiler_flags else ""
        return f"{type(self).__name__}({str(self.tosa_spec)!r}{flags})"


def type_narrowing(compiler_flags: Sequence[str]) -> bool:
    """Whether the flags ask the converter to narrow fp32 to fp16 (which also narrows the VGF's
    inputs and outputs, so the delegate boundary in the .pte stays fp32 while the VGF's is fp16)."""
    flags = list(compiler_flags)
    for i, flag in enumerate(flags):
        if flag.startswith("--type-narrowing="):
            return flag.split("=", 1)[1] != "none"
        if flag == "--type-narrowing":
            return i + 1 < len(flags) and flags[i + 1] != "none"
    return False


def _check_flags(flags: Sequence[str] | None) -> list[str]:
    if flags is None:
        return []
    if isinstance(flags, str):
        raise TypeError(f"compiler_flags must be a list of arguments, not the string {flags!r}: "
                        f"use {shlex.split(flags)!r}")
    bad = [f for f in flags if not isinstance(f, str)]
    if bad:
        raise TypeError(f"compiler_flags must all be strings; got {bad!r} (write numbers as text, "
                        "e.g. ['--type-narrowing', 'full'])")
    return list(flags)
