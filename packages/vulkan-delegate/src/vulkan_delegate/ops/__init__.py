"""Op families of the Vulkan delegate; importing this package registers them."""

from . import attention, conv, elementwise, fill, index, logic, matmul, quantized, reduce, shape  # noqa: F401
