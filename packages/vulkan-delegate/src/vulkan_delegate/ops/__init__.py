"""Op families of the Vulkan delegate; importing this package registers them."""

from . import attention, conv, elementwise, matmul, quantized, reduce, shape  # noqa: F401
