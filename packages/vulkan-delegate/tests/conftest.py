"""Shared helpers: lower with the VulkanPartitioner, run through executorch.runtime on lavapipe/GPU."""

from __future__ import annotations

import re

import pytest
import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from executorch.exir.lowered_backend_module import executorch_call_delegate

from arm_tosa_core.testing import compare_outputs
from vulkan_delegate import VulkanPartitioner, device_name, partition_report, run_on_vulkan
from vulkan_delegate.registry import aten_key

FP32_TOL, FP16_TOL = 1e-4, 1e-2


@pytest.fixture(scope="session", autouse=True)
def vulkan_device() -> str:
    return device_name()  # builds the runtime once; fails with the install command when unusable


#: id(model) -> the targets its lowering delegated (the numeric-coverage sweep reads it, so a full run
#: lowers each case once)
DELEGATED: dict[int, set] = {}


def delegated_targets(edge) -> set:
    """The aten overloads (and custom ops) inside the program's Vulkan partitions."""
    ep = edge.exported_program()
    out = set()
    for node in ep.graph.nodes:
        if node.target is executorch_call_delegate:
            inner = getattr(ep.graph_module, node.args[0].target).original_module.graph.nodes
            out |= {aten_key(n.target) for n in inner if n.op == "call_function"}
    return out


def lower(model: torch.nn.Module, inputs: tuple, fp16: bool = False, dynamic_shapes=None,
          skip_dim_order: bool = False, **kw):
    ep = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    edge = to_edge_transform_and_lower(
        ep, partitioner=[VulkanPartitioner({"force_fp16": fp16}, **kw)],
        compile_config=EdgeCompileConfig(_skip_dim_order=True) if skip_dim_order else None)
    DELEGATED[id(model)] = delegated_targets(edge)
    return edge


def rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    """max |y - ref| / max |ref|: error relative to the output's scale; inf where y and ref disagree
    about NaN or inf (the shared NaN-aware comparison)."""
    comparison = compare_outputs(y.float(), ref.float())
    return comparison.max_error / max(comparison.max_magnitude, 1e-12)


def check(model, inputs, fp16=False, tol=None, ref=None, fully=True, **kw):
    """Lower, run on Vulkan, compare with eager; returns the lowered program."""
    edge = lower(model, inputs, fp16, **kw)
    report = partition_report(edge)
    if fully:
        assert not report.cpu_nodes, str(report)
    y = run_on_vulkan(edge.to_executorch(), *inputs)
    ref = model(*inputs) if ref is None else ref
    assert not (nonfinite := compare_outputs(y, ref).nonfinite), f"{nonfinite} (fp16={fp16})\n{report}"
    err = rel_err(y, ref)
    tol = tol if tol is not None else (FP16_TOL if fp16 else FP32_TOL)
    assert err <= tol, f"rel err {err:.3g} > {tol} (fp16={fp16})\n{report}"
    return edge


@pytest.fixture
def vk_check():
    """`vk_check(model, inputs, fp16=False, tol=None, ref=None, fully=True, **partitioner_kw)`."""
    return check


def dispatch_shaders(edge, fp16: bool) -> list[str]:
    """The shader of each dispatch (variant suffix dropped: `conv2d_gemm`, `copy`) of the program's one Vulkan
    partition, as the lowering makes them."""
    from vulkan_delegate.lower import lower_program

    ep = edge.exported_program()
    calls = [n for n in ep.graph.nodes if n.target is executorch_call_delegate]
    assert len(calls) == 1, calls
    inner = getattr(ep.graph_module, calls[0].args[0].target).original_module
    return [re.sub(r"_[fi](32|16).*$", "", d.shader) for d in lower_program(inner, fp16).dispatches]


@pytest.fixture
def vk_shaders():
    """`vk_shaders(edge, fp16)`: the shader of each dispatch of the one Vulkan partition (dispatch_shaders)."""
    return dispatch_shaders


@pytest.fixture
def vk_rel_err():
    """`vk_rel_err(y, ref)`: max |y - ref| / max |ref|, inf where they disagree about NaN or inf."""
    return rel_err


@pytest.fixture
def vk_delegated() -> dict[int, set]:
    """id(model) -> the targets its last lowering delegated (every lowering here records it)."""
    return DELEGATED


@pytest.fixture
def vk_lower():
    """`vk_lower(model, inputs, fp16=False, dynamic_shapes=None, **partitioner_kw)` -> EdgeProgramManager."""
    return lower


def randomize_bn(model: torch.nn.Module) -> None:
    """Batch norms with statistics away from the identity, so a folded scale/shift that is wrong shows."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)


@pytest.fixture
def vk_randomize_bn():
    """`vk_randomize_bn(model)`: randomize_bn."""
    return randomize_bn
