"""Quantized linear (VulkanQuantizer) vs its own dequantized reference: within 1e-3 relative."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from vulkan_delegate import VulkanQuantizer, partition_report, payload, run_on_vulkan
from vulkan_delegate.payload import VERSION


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 48)
        self.fc2 = nn.Linear(48, 16, bias=False)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.mark.parametrize("bits,group,dynamic", [(8, None, False), (4, 16, False), (8, 16, True), (4, None, True)])
def test_quantized_linear(vk_check, bits, group, dynamic):
    torch.manual_seed(bits + (group or 0))
    q = VulkanQuantizer(bits=bits, group_size=group, dynamic_activations=dynamic).quantize(MLP().eval())
    x = torch.randn(2, 5, 64)
    vk_check(q, (x,), tol=1e-3)
    w = q.fc1.qweight
    assert w.min() >= -(2 ** (bits - 1)) and w.max() <= 2 ** (bits - 1) - 1


def test_quantized_linear_fp16(vk_check):
    q = VulkanQuantizer(bits=8, group_size=16).quantize(MLP().eval())
    vk_check(q, (torch.randn(3, 64),), fp16=True)


def test_4bit_odd_sizes(vk_check):
    """An odd weight count: the last byte holds one nibble."""
    torch.manual_seed(0)
    q = VulkanQuantizer(bits=4).quantize(nn.Sequential(nn.Linear(33, 7)).eval())
    vk_check(q, (torch.randn(3, 33),), tol=1e-3)


def test_4bit_weights_take_half_the_bytes(vk_lower):
    lin = nn.Sequential(nn.Linear(256, 128, bias=False)).eval()
    x = (torch.randn(1, 256),)
    sizes = {b: partition_report(vk_lower(VulkanQuantizer(bits=b).quantize(lin), x)).delegates[0].payload_bytes for b in (4, 8)}
    assert sizes[8] - sizes[4] >= 256 * 128 // 2, sizes  # 4-bit: two weights per byte


def _payload_version(pte: bytearray, version: int) -> bytes:
    at = pte.find(b"VKDG")
    assert at >= 0 and int.from_bytes(pte[at + 4:at + 8], "little") == VERSION
    pte[at + 4:at + 8] = version.to_bytes(4, "little")
    return bytes(pte)


@pytest.mark.parametrize("old", [1, 2])
def test_older_payload_versions_still_load_and_newer_is_refused(vk_lower, monkeypatch, old):
    """A payload written in an older version's layout (version 1: 8-bit weights as then; version 2:
    no host dtypes in the io section) still loads and runs; a version this runtime does not know is
    an error at load time, not a crash or a wrong answer."""
    q = VulkanQuantizer(bits=8).quantize(MLP().eval())
    x = torch.randn(2, 64)
    pte = bytearray(vk_lower(q, (x,)).to_executorch().buffer)
    with monkeypatch.context() as m:
        m.setattr(payload, "VERSION", old)
        old_pte = bytes(vk_lower(q, (x,)).to_executorch().buffer)
    at = old_pte.find(b"VKDG")
    assert int.from_bytes(old_pte[at + 4:at + 8], "little") == old
    y = run_on_vulkan(old_pte, x)
    assert ((y - q(x)).abs().max() / q(x).abs().max()).item() <= 1e-3
    with pytest.raises(RuntimeError):
        run_on_vulkan(_payload_version(bytearray(pte), VERSION + 1), x)
