"""Models that need the 1-D, transposed and resampling families: a Wav2Letter-style speech model
(conv1d stack) and a small U-Net (transposed conv, bilinear upsampling, skip concatenation), each
fully delegated in one partition and within 1e-4 of eager FP32 (1e-2 in FP16)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vulkan_delegate import partition_report, run_on_vulkan


class Wav2LetterStyle(nn.Module):
    """torchaudio's Wav2Letter layout (strided wide conv1d, a stack of 7-tap conv1d, a wide 32-tap
    conv1d, two pointwise ones, log-softmax over classes) at a test-sized width."""

    def __init__(self, features: int = 40, width: int = 48, wide: int = 96, classes: int = 29) -> None:
        super().__init__()
        layers = [nn.Conv1d(features, width, 48, stride=2, padding=23), nn.ReLU()]
        for _ in range(7):
            layers += [nn.Conv1d(width, width, 7, padding=3), nn.ReLU()]
        layers += [nn.Conv1d(width, wide, 32, padding=15), nn.ReLU(), nn.Conv1d(wide, wide, 1), nn.ReLU(),
                   nn.Conv1d(wide, classes, 1)]
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return F.log_softmax(self.net(x), dim=1)


def _double_conv(cin: int, cout: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(2, cout), nn.LeakyReLU(0.1))


class SmallUNet(nn.Module):
    """Two-level U-Net: one decoder step upsamples by a transposed conv, the other by bilinear
    interpolation; skips are concatenated; reflection-free (zero) padding."""

    def __init__(self, cin: int = 3, classes: int = 2, base: int = 8) -> None:
        super().__init__()
        self.enc1, self.enc2 = _double_conv(cin, base), _double_conv(base, 2 * base)
        self.mid = _double_conv(2 * base, 4 * base)
        self.up2 = nn.ConvTranspose2d(4 * base, 2 * base, 2, stride=2)
        self.dec2 = _double_conv(4 * base, 2 * base)
        self.up1 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.dec1 = _double_conv(3 * base, base)
        self.head = nn.Conv2d(base, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], dim=1))
        return self.head(d1)


def _seeded(model: nn.Module) -> nn.Module:
    """Random init with non-trivial batch-norm statistics, in eval mode."""
    torch.manual_seed(0)
    model = model()
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
    return model.eval()


MODELS = {"wav2letter": (Wav2LetterStyle, (1, 40, 96)), "unet": (SmallUNet, (1, 3, 32, 32))}


@pytest.mark.parametrize("fp16", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_fully_delegated_in_one_partition(name, fp16, vk_check):
    cls, shape = MODELS[name]
    model = _seeded(cls)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(2))
    edge = vk_check(model, (x,), fp16=fp16)
    assert len(partition_report(edge).delegates) == 1, str(partition_report(edge))


class DynamicLength1d(nn.Module):
    """Sizes that are polynomials of the sequence length: stride-1 conv1d, padding, a stride-2
    transposed conv1d, flip."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 6, 3, padding=1)
        self.up = nn.ConvTranspose1d(6, 3, 4, stride=2, padding=1)

    def forward(self, x):
        return self.up(F.pad(F.leaky_relu(self.conv(x), 0.1), (1, 2), value=0.25)).flip(-1)


@pytest.mark.slow
def test_dynamic_sequence_length_1d(vk_lower):
    """One payload at several lengths up to the export bound."""
    model = _seeded(DynamicLength1d)
    length = torch.export.Dim("length", min=2, max=32)
    edge = vk_lower(model, (torch.randn(1, 4, 16),), dynamic_shapes=({2: length},))
    assert not partition_report(edge).cpu_nodes, str(partition_report(edge))
    pte = edge.to_executorch()
    for n in (32, 5, 17):
        x = torch.randn(1, 4, n, generator=torch.Generator().manual_seed(n))
        y, ref = run_on_vulkan(pte, x), model(x)
        assert y.shape == ref.shape
        assert ((y - ref).abs().max() / ref.abs().max()).item() < 1e-4, n
