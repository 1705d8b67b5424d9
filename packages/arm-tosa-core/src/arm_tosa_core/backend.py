"""TOSABackend: the ExecuTorch BackendDetails that turns one partition into one TOSA 1.0 flatbuffer."""

from __future__ import annotations

from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from .artifacts import ArtifactWriter, NumberedPartitionBackend
from .compile_spec import TosaCompileSpec
from .lowering import lower_partition


class TOSABackend(NumberedPartitionBackend, BackendDetails):
    """Emits the partition as a TOSA 1.0 flatbuffer (stamped 1.0, built with tosa_serializer); with an
    intermediate path, also `partition_<i>.tosa` (see `artifacts`)."""

    @classmethod
    def preprocess_partition(cls, edge_program: ExportedProgram, compile_specs: list[CompileSpec],
                             artifacts: ArtifactWriter) -> PreprocessResult:
        graph = lower_partition(edge_program, TosaCompileSpec.from_list(compile_specs))
        artifacts.write_tosa(graph)
        return PreprocessResult(processed_bytes=graph.flatbuffer)
