"""arm_ethosu: PyTorch models to Arm Ethos-U55/U65/U85 NPUs through TOSA INT and vela.

    from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer, ethosu_report

    spec = EthosUCompileSpec("ethos-u55-128")
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), EthosUQuantizer(spec))
    prepared(*inputs)
    quantized = torch.export.export(convert_pt2e(prepared), inputs)
    edge = to_edge_transform_and_lower(quantized, partitioner=[EthosUPartitioner(spec)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    print(ethosu_report(edge).format_table())

Importing the package registers the Ethos-U payload with `arm_tosa_core.run_on_reference_model`
(which runs a payload compiled with `EthosUCompileSpec(...).include_host_graph()`).
"""

from arm_quantizer import get_symmetric_quantization_config

from .backend import EthosUBackend, tosa_graph_of
from .binstream import BinStream, BinStreamError, build_binstream, parse_binstream
from .compile_spec import ArmCompileSpecBuilder, EthosUCompileSpec
from .partitioner import EthosUPartitioner
from .program_report import ethosu_payloads, ethosu_report
from .quantizer import EthosUQuantizer
from .report import EthosUReport, MemoryBudgetError, PartitionReport, check_memory_budget
from .vela_config import accelerator_targets
from .vela_runner import VelaCompileError, VelaResult, compile_with_vela

__version__ = "0.1.0"

__all__ = [
    "ArmCompileSpecBuilder",
    "BinStream",
    "BinStreamError",
    "EthosUBackend",
    "EthosUCompileSpec",
    "EthosUPartitioner",
    "EthosUQuantizer",
    "EthosUReport",
    "MemoryBudgetError",
    "PartitionReport",
    "VelaCompileError",
    "VelaResult",
    "accelerator_targets",
    "build_binstream",
    "check_memory_budget",
    "compile_with_vela",
    "ethosu_payloads",
    "ethosu_report",
    "get_symmetric_quantization_config",
    "parse_binstream",
    "tosa_graph_of",
]
