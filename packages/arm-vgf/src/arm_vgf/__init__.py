"""arm_vgf: PyTorch models -> TOSA 1.0 -> VGF (ML SDK for Vulkan), inside an ExecuTorch .pte.

The flow, with optional int8 quantization::

    import torch
    from executorch.exir import to_edge_transform_and_lower
    from arm_vgf import (VgfCompileSpec, VgfPartitioner, VgfQuantizer, extract_vgf,
                         run_vgf_on_vulkan, validate_environment)

    spec = VgfCompileSpec()                                  # "TOSA-1.0+FP+INT+int16"
    # optional: quantize (torchao PT2E) with the shared Arm quantizer
    #   from arm_quantizer import get_symmetric_quantization_config
    #   from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    #   q = VgfQuantizer(spec).set_global(get_symmetric_quantization_config())
    #   m = prepare_pt2e(torch.export.export(model, inputs).module(), q); m(*inputs)
    #   model = convert_pt2e(m)
    edge = to_edge_transform_and_lower(torch.export.export(model, inputs),
                                       partitioner=[VgfPartitioner(spec)])
    et = edge.to_executorch()
    open("model.pte", "wb").write(et.buffer)

    print(validate_environment())                            # Vulkan loader, device, ML SDK layers
    out = run_vgf_on_vulkan(et, *inputs)                         # via executorch.runtime + runtime_cpp
    paths = extract_vgf("model.pte", "vgf_out/")             # model_0.vgf + model_0.json sidecar

Each delegate payload is a VGF file (SPIR-V graphs and constants), so `run_on_reference_model`
cannot run VGF programs: use `run_vgf_on_vulkan`, or keep the TOSA graphs with
`spec.dump_intermediate_artifacts_to(dir)`.
"""

from .backend import VgfBackend
from .compile_spec import DEFAULT_TOSA_SPEC, VgfCompileSpec
from .converter import VgfConversionError, convert_tosa_to_vgf
from .environment import EnvironmentReport, VulkanEnvironmentError, validate_environment
from .extract import extract_vgf
from .host_runner import run_vgf_on_vulkan
from .partitioner import VgfPartitioner
from .vgf_file import VgfFormatError, VgfModel, describe_vgf, read_vgf
from .vulkan_runner import VgfRunError, prepare_vgf, run_vgf, time_vgf

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_TOSA_SPEC",
    "EnvironmentReport",
    "VgfBackend",
    "VgfCompileSpec",
    "VgfConversionError",
    "VgfFormatError",
    "VgfModel",
    "VgfPartitioner",
    "VgfRunError",
    "VulkanEnvironmentError",
    "convert_tosa_to_vgf",
    "describe_vgf",
    "extract_vgf",
    "prepare_vgf",
    "read_vgf",
    "run_vgf_on_vulkan",
    "run_vgf",
    "time_vgf",
    "validate_environment",
]

try:  # VgfQuantizer needs arm_quantizer's TOSAQuantizer
    from .quantizer import VgfQuantizer  # noqa: F401  (exported through __all__)
except ImportError:  # pragma: no cover - only without arm_quantizer
    pass
else:
    __all__.append("VgfQuantizer")
