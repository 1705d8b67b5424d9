"""Operator families. Importing this package registers every lowering rule with the registry."""

from . import (  # noqa: F401
    activations,
    attention,
    conv,
    data_movement,
    elementwise,
    indexing,
    matmul,
    normalization,
    pooling,
    quantize,
    reductions,
    resize,
    shape_ops,
    softmax,
)
