"""EthosUQuantizer: the shared PT2E quantizer, specialised for Ethos-U targets (int8, and a16w8 per module)."""

from __future__ import annotations

from arm_quantizer import TOSAQuantizer, get_symmetric_quantization_config

from .compile_spec import EthosUCompileSpec


class EthosUQuantizer(TOSAQuantizer):
    """`TOSAQuantizer` for an `EthosUCompileSpec`: int8 activations, int8 weights, int32 bias by default.

    The global config defaults to `get_symmetric_quantization_config()` (per-channel weights), so
    `prepare_pt2e(graph_module, EthosUQuantizer(spec))` quantizes the whole model; `set_global`,
    `set_module_name`, `set_module_type` and `set_io` work as in `TOSAQuantizer`.
    `get_symmetric_a16w8_quantization_config()` (int16 activations, int8 weights, int48 accumulators:
    TOSA EXT-INT16, which the spec includes) works globally or per module; where an int8 layer meets an
    int16 one, the requantization is one RESCALE inside the same Ethos-U partition.
    """

    def __init__(self, compile_spec: EthosUCompileSpec) -> None:
        if not isinstance(compile_spec, EthosUCompileSpec):
            raise TypeError(f"EthosUQuantizer needs an EthosUCompileSpec, got {type(compile_spec).__name__}; "
                            "build one with EthosUCompileSpec('ethos-u55-128')")
        super().__init__(compile_spec)
        self.global_config = get_symmetric_quantization_config()
        # vela 5.2's U55/U65 backend runs a global average pool with its own output qparams (REDUCE_SUM
        # and a RESCALE) in fewer NPU cycles than one int8 AVG_POOL2D (U55-128: 268,603 against 277,513
        # for SqueezeNet's 7x7x1000 tail, 11,596 against 12,712 for ResNet-18's 4x4x512), and keeps the
        # average's own step; regor (U85) runs the AVG_POOL2D faster (163,136 against 141,036)
        self.global_average_shares_qparams = compile_spec.family == "U85"
