"""Vulkan GPU delegate for ExecuTorch: a partitioner over one op registry, GLSL compute shaders and a
C++ runtime (packages/runtime-cpp/src/vulkan_delegate) registered into the pip executorch runtime."""

from arm_tosa_core.report import partition_report

from .backend import BACKEND_ID, VkComputeBackend
from .partitioner import VulkanPartitioner
from .quantizer import VulkanQuantizer
from .runtime import VulkanRuntimeError, device_name, load_runtime, run_on_vulkan

__all__ = ["BACKEND_ID", "VkComputeBackend", "VulkanPartitioner", "VulkanQuantizer", "VulkanRuntimeError", "device_name",
           "load_runtime", "partition_report", "run_on_vulkan"]
