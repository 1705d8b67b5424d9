"""`VulkanBackend`-style BackendDetails: lowers a partition to a VKDG payload (see payload.py)."""

from __future__ import annotations

from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from .lower import lower_program
from .payload import serialize

#: Our delegate id. Not upstream's "VulkanBackend": their runtime never receives our payload.
BACKEND_ID = "VkComputeBackend"


def compile_specs(force_fp16: bool = False) -> list[CompileSpec]:
    return [CompileSpec("force_fp16", b"1" if force_fp16 else b"0")]


class VkComputeBackend(BackendDetails):
    """Preprocess: fx partition -> compute graph (tensors, dispatches, planned arena) -> payload."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        fp16 = any(s.key == "force_fp16" and bytes(s.value) == b"1" for s in compile_specs)
        graph = lower_program(edge_program, fp16)
        return PreprocessResult(processed_bytes=serialize(graph))
