"""Operator families. Importing this package registers every lowering rule with the registry."""

from . import (  # noqa: F401
    activations,
    adaptive_pooling,
    attention,
    composed_math,
    conv,
    data_movement,
    division,
    elementwise,
    indexing,
    matmul,
    normalization,
    padding,
    pooling,
    product,
    quantize,
    reductions,
    resize,
    selection,
    shape_ops,
    softmax,
)
