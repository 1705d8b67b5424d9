"""Op families of the Vulkan delegate; importing this package registers them."""

from . import (  # noqa: F401
    attention,
    cache_write,
    conv,
    elementwise,
    fill,
    group_norm,
    index,
    logic,
    matmul,
    movement,
    quantized,
    quantized_pt2e,
    reduce,
    resample,
    rope,
    shape,
)
