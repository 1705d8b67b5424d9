"""Compile targets for the `arm-compile` CLI, found through the "arm_toolkit.targets" entry points.

A target package adds its targets by declaring, in its pyproject.toml,

    [project.entry-points."arm_toolkit.targets"]
    my-npu = "my_package.targets:FAMILY"

where FAMILY is a `TargetFamily` (or a callable returning one). arm-ethosu registers the Ethos-U
family and the plain TOSA specifications the same way.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENTRY_POINT_GROUP = "arm_toolkit.targets"


@dataclass(frozen=True)
class CompileTarget:
    """How to compile for one target name.

    `compile_spec(options)` builds the spec (options: the CLI's target options that were given, by
    name; raise ValueError for ones the target does not take); `partitioner(spec)` and
    `quantizer(spec)` (returning None for float specs) follow. `report(pte_bytes, out_dir)` writes
    the target's report files and returns the text to print (None: the partition report only).
    `own_result`: what the accuracy report's target column holds for this target (its own result,
    or why there is none on this machine).
    """

    name: str
    compile_spec: Callable[[dict[str, Any]], Any]
    partitioner: Callable[[Any], Any]
    quantizer: Callable[[Any], Any] | None = None
    report: Callable[[Any, Path], str] | None = None
    own_result: str = "not measured: no runner for this target's own result on this machine"


@dataclass(frozen=True)
class TargetFamily:
    """A set of targets: `resolve(name)` returns a CompileTarget, or None when the name is not one of
    this family's. `names` are what `arm-compile --list-targets` shows."""

    family: str
    names: tuple[str, ...]
    resolve: Callable[[str], CompileTarget | None]


def load_families() -> list[TargetFamily]:
    """Every family registered under the entry-point group, in a stable order (by entry-point name)."""
    families = []
    for ep in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            obj = ep.load()
        except Exception as exc:  # a broken plugin must not hide the others
            raise RuntimeError(f"target entry point {ep.name!r} ({ep.value}) failed to load: {exc}. "
                               "Reinstall or remove the package that declares it") from exc
        family = obj() if callable(obj) and not isinstance(obj, TargetFamily) else obj
        if not isinstance(family, TargetFamily):
            raise RuntimeError(f"target entry point {ep.name!r} ({ep.value}) gave "
                               f"{type(family).__name__}, not a TargetFamily")
        families.append(family)
    return families


def resolve_target(name: str, families: list[TargetFamily] | None = None) -> CompileTarget:
    """The CompileTarget for `name`; ValueError listing the known targets when none claims it."""
    families = load_families() if families is None else families
    for family in families:
        target = family.resolve(name)
        if target is not None:
            return target
    known = "; ".join(f"{f.family}: {', '.join(f.names)}" for f in families) or "none installed"
    raise ValueError(f"unknown target {name!r}. Known targets - {known}")


# -- Ethos-U ------------------------------------------------------------------------------------
def _ethosu_spec(name: str, options: dict[str, Any]):
    from .compile_spec import EthosUCompileSpec

    spec = EthosUCompileSpec(name, options.get("system_config"), options.get("memory_mode"),
                             options.get("vela_flags"), options.get("vela_config") or "Arm/vela.ini")
    if options.get("sram_limit"):
        spec.set_memory_limit(sram_bytes=int(options["sram_limit"]))
    # lowered with the host graph, which verify runs; arm-compile writes the deployable .pte without it
    return spec.include_host_graph()


def _sram_limit_of(report) -> int | None:
    """The SRAM limit of the system config/memory mode the first partition was compiled for."""
    from .vela_config import validate

    if not report.partitions:
        return None
    p = report.partitions[0]
    try:
        return validate(p.target, p.system_config, p.memory_mode).sram_limit
    except Exception:  # a custom .ini the report cannot see: draw no line
        return None


def _ethosu_report(pte: bytes, out_dir: Path) -> str:
    from .program_report import REPORT_FILE, ethosu_report

    report = ethosu_report(pte)
    (out_dir / REPORT_FILE).write_text(report.to_json())
    report.plot_layers_png(out_dir / "layers.png")
    report.write_layers_csv(out_dir / "layers.csv")
    report.plot_sram_png(out_dir / "sram.png", _sram_limit_of(report))
    return report.format_table()


def _ethosu_target(name: str) -> CompileTarget | None:
    from .vela_config import accelerator_targets

    if name not in accelerator_targets():
        return None
    from .partitioner import EthosUPartitioner
    from .quantizer import EthosUQuantizer

    return CompileTarget(name, lambda options: _ethosu_spec(name, options), EthosUPartitioner,
                         EthosUQuantizer, _ethosu_report, ETHOSU_OWN_RESULT)


ETHOSU_OWN_RESULT = ("not measured: no Ethos-U NPU or FVP on this machine. The .pte's host graph is the "
                     "TOSA INT graph vela compiled, so the host run is bit-exact with the TOSA columns")


def ethosu_family() -> TargetFamily:
    from .vela_config import accelerator_targets

    return TargetFamily("Ethos-U (vela)", accelerator_targets(), _ethosu_target)


# -- plain TOSA ---------------------------------------------------------------------------------
def _tosa_target(name: str) -> CompileTarget | None:
    if not name.upper().startswith("TOSA-"):
        return None
    from arm_quantizer import TOSAQuantizer, get_symmetric_quantization_config
    from arm_tosa_core import TosaCompileSpec, TOSAPartitioner

    def spec(options: dict[str, Any]):
        if options:
            raise ValueError(f"{name} takes no target options (got {', '.join(sorted(options))}); "
                             "they apply to Ethos-U targets")
        return TosaCompileSpec(name)  # ValueError with the valid forms when the string is bad

    def quantizer(compile_spec):
        if not compile_spec.tosa_spec.support_integer():
            return None
        return TOSAQuantizer(compile_spec).set_global(get_symmetric_quantization_config())

    return CompileTarget(name, spec, TOSAPartitioner, quantizer,
                         own_result="the TOSA reference model is this target's own result: see the TOSA columns")


def tosa_family() -> TargetFamily:
    return TargetFamily("TOSA", ("TOSA-1.0+INT", "TOSA-1.0+FP", "TOSA-1.0+FP+INT"), _tosa_target)
