"""ArtifactWriter: where a compile keeps its intermediate files, and what it names them.

`TosaCompileSpec.dump_intermediate_artifacts_to(dir)` names a folder of the compiling machine. It is a
host setting: it travels beside the compile specs inside this process (`CompileSpecList.host`) and never
into them, so the `.pte` does not depend on it. Each backend asks `ArtifactWriter.for_partition(specs,
index)` for its partition's writer; every file of one partition shares the stem `partition_<index>`:

| file (in `dir`)                                       | written by                                  |
|-------------------------------------------------------|---------------------------------------------|
| `partition_<i>.tosa`                                  | every TOSA-based backend (TOSA, Ethos-U, VGF) |
| `partition_<i>.debug.json`                            | the same, with `dump_debug_info("json")`    |
| `partition_<i>.vgf`                                   | VGF                                         |
| `partition_<i>.converter/`                            | VGF: the converter's work folder, kept only when it fails |
| `partition_<i>_vela.npz`, `partition_<i>_summary_<system config>.csv`, `partition_<i>_per-layer.csv` | Ethos-U (vela) |
| `report.json`                                         | Ethos-U: vela's numbers of every partition  |

`<i>` is the partition's index among its backend's delegates of the program: graph order, the methods in
order (`BackendDetails.preprocess_multimethod` sees them all); a partition lowered alone through
`preprocess` is 0. Names come from the program, not from a counter, so rebuilding a model into the same
folder replaces its files with identical ones; backends sharing one folder would overwrite each other's
`partition_0`, so give each target its own folder.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from executorch.exir.backend.backend_details import PreprocessResult
    from executorch.exir.backend.compile_spec_schema import CompileSpec
    from torch.export import ExportedProgram

    from .lowering import TosaGraph


def partition_stem(index: int) -> str:
    """The stem every file of partition `index` shares (and the name reports give it)."""
    return f"partition_{index}"


@dataclass(frozen=True)
class ArtifactWriter:
    """Writes one partition's files as `<directory>/partition_<index><suffix>`; writes nothing when
    `directory` is None (no intermediate path was asked for)."""

    directory: Path | None = None
    debug: bool = False
    index: int = 0

    @classmethod
    def for_partition(cls, compile_specs: list[CompileSpec], index: int = 0) -> ArtifactWriter:
        """The writer for partition `index` of a compile, from the host settings its specs carry."""
        host = getattr(compile_specs, "host", None) or {}
        directory = host.get("intermediate_path")
        return cls(None if directory is None else Path(directory), host.get("debug_mode") == "json", index)

    @property
    def stem(self) -> str:
        return partition_stem(self.index)

    def at(self, index: int) -> ArtifactWriter:
        """The same folder, for partition `index`."""
        return replace(self, index=index)

    def path(self, suffix: str) -> Path | None:
        """`<directory>/<stem><suffix>`, or None without a directory."""
        return None if self.directory is None else self.directory / f"{self.stem}{suffix}"

    def _write(self, suffix: str, data: bytes | str) -> Path | None:
        path = self.path(suffix)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(data, str):
                path.write_text(data)
            else:
                path.write_bytes(data)
        return path

    def write_tosa(self, graph: TosaGraph) -> Path | None:
        """`<stem>.tosa`, and with debug `<stem>.debug.json` (per operator: its torch node and stack)."""
        if self.debug:
            self._write(".debug.json", json.dumps(
                {"inputs": graph.inputs, "outputs": graph.outputs, "operators": graph.debug_map}, indent=1))
        return self._write(".tosa", graph.flatbuffer)

    def write_vgf(self, vgf: bytes) -> Path | None:
        """`<stem>.vgf`: the VGF file the delegate carries."""
        return self._write(".vgf", vgf)


class NumberedPartitionBackend:
    """Mixin for a `BackendDetails` that writes artifacts (put it before BackendDetails in the bases):
    the subclass writes `preprocess_partition(program, compile_specs, artifacts)`; this gives it
    `preprocess` (one partition alone: index 0) and `preprocess_multimethod`, which numbers every
    partition by its index across the methods, in order, so file names follow the program."""

    @classmethod
    def preprocess_partition(cls, edge_program: ExportedProgram, compile_specs: list[CompileSpec],
                             artifacts: ArtifactWriter) -> PreprocessResult:
        raise NotImplementedError(f"{cls.__name__} must define preprocess_partition")

    @classmethod
    def preprocess(cls, edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        return cls.preprocess_partition(edge_program, compile_specs, ArtifactWriter.for_partition(compile_specs))

    @classmethod
    def preprocess_multimethod(cls, edge_programs: Mapping[str, list[ExportedProgram]],
                               compile_specs: Mapping[str, list[list[CompileSpec]]]
                               ) -> dict[str, list[PreprocessResult]]:
        results: dict[str, list[PreprocessResult]] = {}
        index = 0
        for method, programs in edge_programs.items():
            specs_of_method = compile_specs[method]
            if len(specs_of_method) != len(programs):
                raise ValueError(f"method {method!r} has {len(programs)} partitions but "
                                 f"{len(specs_of_method)} compile-spec lists")
            results[method] = []
            for program, specs in zip(programs, specs_of_method, strict=True):
                results[method].append(cls.preprocess_partition(
                    program, specs, ArtifactWriter.for_partition(specs, index)))
                index += 1
        return results
