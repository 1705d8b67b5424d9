"""Dim orders at the delegate boundary: the runtime hands a delegate a tensor's bytes in the dim order the
program plans, and the Vulkan delegate computes on contiguous (NCHW) bytes."""

import torch
from torch import nn

from vulkan_delegate import partition_report


def test_channels_last_program_stays_on_cpu_and_is_right(vk_check):
    """A program exported with a channels-last input plans NHWC bytes for it; the delegate used to read them
    as NCHW (1.5 off, no error). Such nodes stay on the CPU with the reason, and the answer is eager's."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 5, 1)).eval()
    x = torch.randn(1, 3, 6, 7).to(memory_format=torch.channels_last)
    edge = vk_check(model, (x,), fully=False)  # runs the .pte: eager's answer within 1e-4
    cpu = [c for c in partition_report(edge).cpu_nodes if c.name.startswith("aten_")]
    assert len(cpu) == 3 and all("channels-last" in c.reason for c in cpu), cpu


def test_contiguous_program_is_still_delegated(vk_check):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 5, 1)).eval()
    vk_check(model, (torch.randn(1, 3, 6, 7),))


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
