"""Dim orders at the delegate boundary: the runtime hands a delegate a tensor's bytes in the dim order the
program plans, and the Vulkan delegate computes on contiguous (NCHW) bytes: it permutes a partition's inputs
and outputs from and to the planned order (lower.py). fp32 within 1e-4 of eager (conftest.check)."""

import torch
from torch import nn

from vulkan_delegate import partition_report


def _convs() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 5, 1)).eval()


def test_channels_last_program_is_delegated_and_right(vk_check):
    """A program exported with a channels-last input plans NHWC bytes for its input and output; the
    delegate once read them as NCHW (1.5 off, no error), then kept such nodes on the CPU. Now one
    delegate reads and writes them as planned."""
    x = torch.randn(1, 3, 6, 7).to(memory_format=torch.channels_last)
    edge = vk_check(_convs(), (x,))  # runs the .pte: eager's answer within 1e-4, nothing on the CPU
    assert len(partition_report(edge).delegates) == 1


class _ToChannelsLast(nn.Module):
    """A model that converts its contiguous input to channels-last itself (a copy to another dim order)."""

    def __init__(self):
        super().__init__()
        self.body = _convs()

    def forward(self, x):
        return self.body(x.to(memory_format=torch.channels_last)) * 2


def test_copy_to_channels_last_inside_is_delegated(vk_check):
    edge = vk_check(_ToChannelsLast().eval(), (torch.randn(2, 3, 5, 4),))
    assert len(partition_report(edge).delegates) == 1


def test_channels_last_between_two_delegates(vk_check):
    """A CPU node (blocked relu) between two partitions: the first writes its channels-last output as
    planned, the CPU kernel reads it, and the second delegate reads the CPU's channels-last result."""
    x = torch.randn(1, 3, 6, 7).to(memory_format=torch.channels_last)
    edge = vk_check(_convs(), (x,), fully=False, operator_blocklist=["aten.relu.default"])
    report = partition_report(edge)
    cpu = [c.name for c in report.cpu_nodes if c.name.startswith("aten_")]
    assert len(report.delegates) == 2 and cpu == ["aten_relu_default"], report


def test_dynamic_channels_last_stays_on_cpu_with_reason(vk_check):
    """Symbolic strides: the dim order is not known at lowering, so those nodes stay on the CPU."""
    x = torch.randn(1, 3, 6, 7).to(memory_format=torch.channels_last)
    h = torch.export.Dim("h", min=4, max=16)
    edge = vk_check(_convs(), (x,), fully=False, dynamic_shapes=({2: h},))
    cpu = [c for c in partition_report(edge).cpu_nodes if c.name.startswith("aten_")]
    assert cpu and all("non-contiguous dim order" in c.reason for c in cpu), cpu


def test_contiguous_program_is_still_delegated(vk_check):
    vk_check(_convs(), (torch.randn(1, 3, 6, 7),))


class _HeadsAttention(nn.Module):
    """q/k/v reshaped to heads and transposed (views with non-contiguous strides before decomposition)."""

    def forward(self, x):
        q = x.view(1, 16, 2, 8).transpose(1, 2)
        return torch.nn.functional.scaled_dot_product_attention(q, q * 0.5, q + 1, is_causal=True).transpose(1, 2)


def test_sdpa_over_transposed_views_stays_whole_and_delegated(vk_check, vk_delegated):
    """The dim-order rule reads the edge graph: the transposes feeding an SDPA are views before decomposition,
    and judging their strides there decomposed the SDPA (its `any` then stayed on the CPU: 2 delegates)."""
    torch.manual_seed(0)
    model = _HeadsAttention().eval()
    vk_check(model, (torch.randn(1, 16, 16),))
    assert any("scaled_dot_product" in str(t) for t in vk_delegated[id(model)]), vk_delegated[id(model)]
