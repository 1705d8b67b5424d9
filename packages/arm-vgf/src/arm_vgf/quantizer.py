"""VgfQuantizer: the shared Arm PT2E quantizer, bound to a VgfCompileSpec.

Importing this module raises ImportError when arm_quantizer (or its TOSAQuantizer) is not
available; `arm_vgf` then simply does not export VgfQuantizer.
"""

from __future__ import annotations

from arm_quantizer import TOSAQuantizer

from .compile_spec import VgfCompileSpec


class VgfQuantizer(TOSAQuantizer):
    """A torchao PT2E quantizer for the VGF target.

    What it annotates comes from the core op registry, for the spec's INT profile::

        quantizer = VgfQuantizer(VgfCompileSpec()).set_global(get_symmetric_quantization_config())
    """

    def __init__(self, compile_spec: VgfCompileSpec) -> None:
        if not isinstance(compile_spec, VgfCompileSpec):
            raise TypeError(f"VgfQuantizer needs a VgfCompileSpec, got {type(compile_spec).__name__}: "
                            "use VgfQuantizer(VgfCompileSpec())")
        super().__init__(compile_spec)
