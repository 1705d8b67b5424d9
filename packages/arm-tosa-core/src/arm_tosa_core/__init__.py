"""arm_tosa_core: torch.export programs -> verified TOSA 1.0 flatbuffers (FP and INT profiles).

Typical use::

    from executorch.exir import to_edge_transform_and_lower
    from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, run_on_reference_model, partition_report

    spec = TosaCompileSpec("TOSA-1.0+FP")
    edge = to_edge_transform_and_lower(torch.export.export(model, inputs),
                                       partitioner=[TOSAPartitioner(spec)])
    print(partition_report(edge))
    out = run_on_reference_model(edge, *inputs)
"""

from . import ops  # noqa: F401  (the one load point: importing it registers every op family)
from .backend import TOSABackend
from .compile_inputs import channels_last_io
from .compile_spec import TosaCompileSpec
from .errors import (
    ArmToolkitError,
    LoweringError,
    MissingToolError,
    ReferenceModelError,
    UnsupportedModelError,
)
from .partitioner import TOSAPartitioner
from .reference import register_payload_decoder, run_on_reference_model, run_tosa
from .report import PartitionReport, partition_report
from .specification import TosaSpecification

__version__ = "0.1.0"

__all__ = [
    "ArmToolkitError",
    "LoweringError",
    "MissingToolError",
    "PartitionReport",
    "ReferenceModelError",
    "TOSABackend",
    "TOSAPartitioner",
    "TosaCompileSpec",
    "TosaSpecification",
    "UnsupportedModelError",
    "channels_last_io",
    "partition_report",
    "register_payload_decoder",
    "run_on_reference_model",
    "run_tosa",
]
