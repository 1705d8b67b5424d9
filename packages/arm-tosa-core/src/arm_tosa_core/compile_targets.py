"""Compile targets for the `arm-compile` CLI, found through the "arm_toolkit.targets" entry points.

The CLI lives here, below every target package, and knows no target: a target package adds its
targets by declaring, in its pyproject.toml,

    [project.entry-points."arm_toolkit.targets"]
    my-npu = "my_package.targets:FAMILY"

where FAMILY is a `TargetFamily` (or a callable returning one). arm-ethosu registers the Ethos-U
family and the plain TOSA specifications, arm-vgf the VGF target, vulkan-delegate the Vulkan one.
"""

from __future__ import annotations

import argparse
import importlib.metadata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

ENTRY_POINT_GROUP = "arm_toolkit.targets"


class QuantizationFlow(Protocol):
    """How a target quantizes for the CLI (arm_quantizer.Pt2eFlow implements it for PT2E quantizers)."""

    def quantize(self, module: torch.nn.Module, example_inputs: tuple, samples: Sequence[tuple]
                 ) -> torch.nn.Module: ...

    def reference(self, quantized: torch.nn.Module, inputs: tuple) -> Any:
        """What the quantized model computes, exactly (the number the target must reproduce)."""

    def accuracy_report(self, quantized: torch.nn.Module, samples: Sequence[tuple], lowered: Any,
                        run_pte: Callable[..., Any] | None, target_note: str,
                        pte_stage: str = "tosa_reference") -> Any:
        """Per-layer SQNR; with `run_pte`, the .pte's output SQNR as `output_db[pte_stage]`. An object with `format_table()`, `to_json()`, `write_csv(path)`, `plot_png(path)`,
        `layers` (each with `.name` and `.cumulative_db`) and `output_db` (dict)."""


@dataclass(frozen=True)
class PteForms:
    """The .pte the CLI writes and the one it executes on the host (the same bytes unless the target
    strips something a host needs); `note`: a line for the user about the difference, or ""."""

    written: bytes
    host: bytes
    note: str = ""


@dataclass
class CompiledProgram:
    """What the CLI hands a target's extra stages after writing the .pte."""

    spec: Any
    module: torch.nn.Module
    example_inputs: tuple
    samples: list
    quantized: torch.nn.Module | None
    lowered: Any
    pte: PteForms
    output: Path
    report_dir: Path
    options: dict[str, Any]


@dataclass(frozen=True)
class CompileTarget:
    """How to compile for one target name.

    `compile_spec(options)` builds the spec (options: the CLI options of the target's family that were
    given, by name); `partitioner(spec)` and `quantizer(spec)` (a QuantizationFlow, or None for float
    specs) follow. `report(pte_bytes, out_dir)` writes the target's report files and returns the text
    to print (None: the partition report only). `own_result`: what the accuracy report's target column
    holds for this target. `to_pte(lowered, options)`: the PteForms (default: `to_executorch()`).
    `run_pte(pte_bytes, *inputs)`: executes a written .pte where `runs_on` says (default: the TOSA
    reference model through executorch.runtime). `after_write(pte_bytes, output)`: files the target
    writes beside the .pte (a line to print). `extra_stages(options)`: (title, run) pairs the CLI runs
    after the report, each `run(program: CompiledProgram)` returning its one-line result. `node_data(pte_bytes)`: per-node
    numbers for Model Explorer, {data name: {torch node name: value}}.
    """

    name: str
    compile_spec: Callable[[dict[str, Any]], Any]
    partitioner: Callable[[Any], Any]
    quantizer: Callable[[Any], QuantizationFlow | None] | None = None
    report: Callable[[Any, Path], str | None] | None = None
    own_result: str = "not measured: no runner for this target's own result on this machine"
    to_pte: Callable[[Any, dict[str, Any]], PteForms] | None = None
    run_pte: Callable[..., Any] | None = None
    runs_on: str = "the TOSA reference model"
    after_write: Callable[[bytes, Path], str] | None = None
    extra_stages: Callable[[dict[str, Any]], list[tuple[str, Callable[[CompiledProgram], str]]]] | None = None
    node_data: Callable[[bytes], dict[str, dict[str, float]]] | None = None


@dataclass(frozen=True)
class TargetFamily:
    """A set of targets: `resolve(name)` returns a CompileTarget, or None when the name is not one of
    this family's. `names` are what `arm-compile --list-targets` shows. `add_arguments(group)` adds the
    family's own CLI options to its argument group; `options` are their destination names: giving one
    with a target of another family is an error."""

    family: str
    names: tuple[str, ...]
    resolve: Callable[[str], CompileTarget | None]
    add_arguments: Callable[[argparse._ArgumentGroup], None] | None = None
    options: tuple[str, ...] = field(default=())


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
    return resolve_with_family(name, families)[0]


def resolve_with_family(name: str, families: list[TargetFamily] | None = None
                        ) -> tuple[CompileTarget, TargetFamily]:
    """The CompileTarget for `name` and the family that claimed it."""
    families = load_families() if families is None else families
    for family in families:
        target = family.resolve(name)
        if target is not None:
            return target, family
    known = "; ".join(f"{f.family}: {', '.join(f.names)}" for f in families) or "none installed"
    raise ValueError(f"unknown target {name!r}. Known targets - {known}")
