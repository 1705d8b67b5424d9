"""EthosUQuantizer: the shared PT2E quantizer, specialised for Ethos-U targets (int8)."""

from __future__ import annotations

import torch

from arm_quantizer import QuantizationConfig, TOSAQuantizer, get_symmetric_quantization_config

from .compile_spec import EthosUCompileSpec


class EthosUQuantizer(TOSAQuantizer):
    """`TOSAQuantizer` for an `EthosUCompileSpec`: int8 activations, int8 weights, int32 bias.

    The global config defaults to `get_symmetric_quantization_config()` (per-channel weights), so
    `prepare_pt2e(graph_module, EthosUQuantizer(spec))` quantizes the whole model; `set_global`,
    `set_module_name`, `set_module_type` and `set_io` work as in `TOSAQuantizer`.
    int16 activations are refused: the INT16 paths of the core are not complete enough for vela.
    """

    def __init__(self, compile_spec: EthosUCompileSpec) -> None:
        if not isinstance(compile_spec, EthosUCompileSpec):
            raise TypeError(f"EthosUQuantizer needs an EthosUCompileSpec, got {type(compile_spec).__name__}; "
                            "build one with EthosUCompileSpec('ethos-u55-128')")
        super().__init__(compile_spec)
        self.global_config = get_symmetric_quantization_config()

    def _check(self, config: QuantizationConfig | None) -> None:
        if config is not None and isinstance(config, QuantizationConfig) and \
                config.activation_dtype not in (None, torch.int8):
            raise ValueError(f"{self.compile_spec.target} is compiled with int8 activations in this "
                             f"toolkit, not {config.activation_dtype}; use "
                             "get_symmetric_quantization_config()")
        super()._check(config)
