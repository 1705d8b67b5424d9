"""TOSABackend: the ExecuTorch BackendDetails that turns one partition into one TOSA 1.0 flatbuffer."""

from __future__ import annotations

from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from .compile_spec import TosaCompileSpec
from .lowering import TosaGraph, lower_program
from .specification import TosaSpecification

_partition_counter: dict[str, int] = {}


def lower_partition(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> tuple[TosaGraph, dict]:
    """Lower a partition and write the intermediate artifacts the compile spec asks for."""
    settings = TosaCompileSpec.settings_from_list(compile_specs)
    spec = TosaSpecification.create_from_string(settings["tosa_spec"])
    graph = lower_program(edge_program, spec, fold_rescales=settings.get("fold_rescales", False))
    path = settings.get("intermediate_path")
    if path:
        graph.write(path, next_partition_stem(path), debug=settings.get("debug_mode") == "json")
    return graph, settings


def next_partition_stem(path: str) -> str:
    """`partition_<n>`, numbered per output directory within this process."""
    n = _partition_counter.get(path, 0)
    _partition_counter[path] = n + 1
    return f"partition_{n}"


class TOSABackend(BackendDetails):
    """Emits the partition as a TOSA 1.0 flatbuffer (stamped 1.0, built with tosa_serializer)."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        graph, _ = lower_partition(edge_program, compile_specs)
        return PreprocessResult(processed_bytes=graph.flatbuffer)
