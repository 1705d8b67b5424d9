"""TOSABackend: the ExecuTorch BackendDetails that turns one partition into one TOSA 1.0 flatbuffer."""

from __future__ import annotations

from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from .artifacts import ArtifactWriter, preprocess_numbered
from .compile_spec import TosaCompileSpec
from .lowering import lower_partition


def _preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec],
                artifacts: ArtifactWriter) -> PreprocessResult:
    graph = lower_partition(edge_program, TosaCompileSpec.from_list(compile_specs))
    artifacts.write_tosa(graph)
    return PreprocessResult(processed_bytes=graph.flatbuffer)


class TOSABackend(BackendDetails):
    """Emits the partition as a TOSA 1.0 flatbuffer (stamped 1.0, built with tosa_serializer); with an
    intermediate path, also `partition_<i>.tosa` (see `artifacts`)."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        return _preprocess(edge_program, compile_specs, ArtifactWriter.for_partition(compile_specs))

    @classmethod
    def preprocess_multimethod(cls, edge_programs: dict[str, list[ExportedProgram]],
                               compile_specs: dict[str, list[list[CompileSpec]]]) -> dict[str, list[PreprocessResult]]:
        return preprocess_numbered(edge_programs, compile_specs, _preprocess)
