"""The `arm-compile` target `vulkan`: a float Vulkan-delegate .pte (fp16 with --fp16), verified by
running it on the Vulkan device (lavapipe or a GPU). Registered under arm-tosa-core's
"arm_toolkit.targets" entry points; only arm-compile loads this module, so vulkan-delegate itself
needs no arm-tosa-core."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from arm_tosa_core.compile_targets import CompileTarget, TargetFamily

NAME = "vulkan"


@dataclass(frozen=True)
class VulkanCompileOptions:
    """What arm-compile hands VulkanPartitioner (there is no compile-spec class of its own)."""

    force_fp16: bool = False

    def dump_intermediate_artifacts_to(self, path) -> VulkanCompileOptions:
        return self  # the payload is the whole artifact: nothing to keep beside the .pte


def _partitioner(options: VulkanCompileOptions):
    from .partitioner import VulkanPartitioner

    return VulkanPartitioner({"force_fp16": options.force_fp16})


def _run(pte: bytes, *inputs):
    from .runtime import run_on_vulkan

    return run_on_vulkan(pte, *inputs)


def _target(name: str) -> CompileTarget | None:
    if name != NAME:
        return None

    def spec(options: dict[str, Any]) -> VulkanCompileOptions:
        return VulkanCompileOptions(bool(options.get("fp16")))

    return CompileTarget(name, spec, _partitioner, None, run_pte=_run,
                         runs_on="Vulkan (VkComputeBackend)",
                         own_result="the Vulkan delegate runs float: no quantization error to report")


def _arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--fp16", action="store_true",
                       help="compute and store activations and weights in fp16 (inputs/outputs stay fp32)")


def vulkan_family() -> TargetFamily:
    return TargetFamily("Vulkan delegate", (NAME,), _target, _arguments, ("fp16",))
