"""VgfBackend: one partition -> TOSA 1.0 (arm_tosa_core) -> VGF (ML SDK model converter).

The delegate payload is the VGF file, byte for byte. A VGF holds SPIR-V, not TOSA, so the TOSA
reference model cannot run it: `run_vgf_on_vulkan` is the host path for VGF programs, and the TOSA
graph of each partition is kept in the intermediate path when the compile spec sets one
(`<path>/partition_<i>.tosa` beside `<path>/partition_<i>.vgf`: see `arm_tosa_core.artifacts`).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from arm_tosa_core.artifacts import ArtifactWriter, NumberedPartitionBackend
from arm_tosa_core.lowering import lower_partition
from arm_tosa_core.reference import register_opaque_payload

from .compile_spec import VgfCompileSpec
from .converter import VgfConversionError, convert_tosa_to_vgf

BACKEND_ID = "VgfBackend"

register_opaque_payload(
    BACKEND_ID,
    "VGF payloads hold SPIR-V graphs. Run the program with arm_vgf.run_vgf_on_vulkan(program, *inputs), "
    "or lower the model with TOSAPartitioner to check it on the reference model (with "
    "VgfCompileSpec.dump_intermediate_artifacts_to(dir), each partition's TOSA graph is kept as "
    "dir/partition_<i>.tosa for arm_tosa_core.run_tosa).",
)


def _op_summary(op_counts: dict[str, int]) -> str:
    return ", ".join(f"{op} x{n}" for op, n in sorted(op_counts.items(), key=lambda kv: -kv[1]))


def convert_partition(tosa: bytes, compiler_flags: list[str], artifacts: ArtifactWriter,
                      op_counts: dict[str, int] | None = None) -> bytes:
    """Convert one partition's TOSA graph; keep `<stem>.vgf` in the artifact folder when there is one.

    The converter works in `<folder>/<stem>.converter/` (or a fresh temporary folder), which is
    removed on success and kept on failure so the error's reproduce command works.
    """
    work = artifacts.path(".converter") or Path(tempfile.mkdtemp(prefix="arm-vgf-"))
    try:
        vgf = convert_tosa_to_vgf(tosa, work, compiler_flags)
    except VgfConversionError as exc:
        hint = f"\nThe partition holds: {_op_summary(op_counts)}." if op_counts else ""
        if compiler_flags:
            hint += (f"\nThe compile spec passes compiler_flags={compiler_flags!r}: check them "
                     "against `model-converter --help`.")
        hint += ("\nIf the converter rejects an operator, keep it on the CPU with e.g. executorch's "
                 "DontPartition in VgfPartitioner(spec, additional_checks=[...]), and please report it.")
        raise VgfConversionError(exc.converter_message + hint, exc.command, exc.tosa_path) from None
    artifacts.write_vgf(vgf)
    shutil.rmtree(work, ignore_errors=True)
    return vgf


class VgfBackend(NumberedPartitionBackend, BackendDetails):
    """Lowers a partition with the core, then converts it to VGF; the payload is the VGF file."""

    @classmethod
    def preprocess_partition(cls, edge_program: ExportedProgram, compile_specs: list[CompileSpec],
                             artifacts: ArtifactWriter) -> PreprocessResult:
        spec = VgfCompileSpec.from_list(compile_specs)
        graph = lower_partition(edge_program, spec)
        artifacts.write_tosa(graph)
        vgf = convert_partition(graph.flatbuffer, list(spec.compiler_flags), artifacts, graph.op_counts)
        return PreprocessResult(processed_bytes=vgf)
