"""arm_quantizer: one PT2E quantizer shared by every Arm target.

    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from arm_quantizer import TOSAQuantizer, get_symmetric_quantization_config

    quantizer = TOSAQuantizer(TosaCompileSpec("TOSA-1.0+INT")).set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*calibration_inputs)
    quantized = convert_pt2e(prepared)
"""

from .accuracy import AccuracyReport, LayerError, output_sqnr, quantization_error_report
from .config import (
    CalibrationError,
    QuantizationConfig,
    get_symmetric_a8w4_quantization_config,
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)
from .exact_reference import run_exactly
from .mixed_precision import MixedPrecisionResult, quantize_with_overrides, search_mixed_precision
from .pt2e_flow import Pt2eFlow
from .quantizer import TOSAQuantizer, default_quantizer

__version__ = "0.1.0"

__all__ = [
    "AccuracyReport",
    "LayerError",
    "MixedPrecisionResult",
    "Pt2eFlow",
    "output_sqnr",
    "quantization_error_report",
    "CalibrationError",
    "QuantizationConfig",
    "TOSAQuantizer",
    "default_quantizer",
    "get_symmetric_a8w4_quantization_config",
    "get_symmetric_a16w8_quantization_config",
    "get_symmetric_quantization_config",
    "quantize_with_overrides",
    "run_exactly",
    "search_mixed_precision",
]
