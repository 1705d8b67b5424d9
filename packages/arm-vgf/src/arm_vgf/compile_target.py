"""The `arm-compile` targets of this package (registered under arm-tosa-core's "arm_toolkit.targets"
entry points): `vgf` (float, TOSA-1.0+FP) and `vgf-int8` (int8 through VgfQuantizer, TOSA-1.0+INT).
Each writes the VGF .pte and the extracted `.vgf` (with its JSON sidecar) beside it, and verifies the
.pte on Vulkan (runtime_cpp's VgfBackend, on lavapipe or a GPU)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from arm_tosa_core.compile_targets import CompileTarget, TargetFamily

_PROFILES = {"vgf": "TOSA-1.0+FP", "vgf-int8": "TOSA-1.0+INT"}
VGF_OWN_RESULT = ("per layer not measured; the model output's `target` SQNR is the .pte on Vulkan "
                  "(runtime_cpp's VgfBackend)")


def _spec(name: str, options: dict[str, Any]):
    from .compile_spec import VgfCompileSpec

    flags = options.get("vgf_converter_flags")
    return VgfCompileSpec(_PROFILES[name], flags.split() if flags else None)


def _quantizer(spec):
    if not spec.tosa_spec.support_integer():
        return None
    from arm_quantizer import Pt2eFlow, get_symmetric_quantization_config

    from .quantizer import VgfQuantizer

    return Pt2eFlow(VgfQuantizer(spec).set_global(get_symmetric_quantization_config()))


def _extract(pte: bytes, output: Path) -> str:
    from .extract import extract_vgf

    paths = extract_vgf(output, output.parent)
    return "extracted " + ", ".join(str(p) for p in paths)


def _run(pte: bytes, *inputs):
    from .host_runner import run_vgf_on_vulkan

    return run_vgf_on_vulkan(pte, *inputs)


def _target(name: str) -> CompileTarget | None:
    if name not in _PROFILES:
        return None
    from .partitioner import VgfPartitioner

    return CompileTarget(name, lambda options: _spec(name, options), VgfPartitioner, _quantizer,
                         own_result=VGF_OWN_RESULT, run_pte=_run,
                         runs_on="Vulkan (VgfBackend, ML SDK emulation layers)", after_write=_extract)


def _arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--vgf-converter-flags", metavar="FLAGS",
                       help='extra model-converter flags, given with "=": '
                            '--vgf-converter-flags="--type-narrowing=full"')


def vgf_family() -> TargetFamily:
    return TargetFamily("VGF (ML SDK for Vulkan)", tuple(_PROFILES), _target, _arguments,
                        ("vgf_converter_flags",))
