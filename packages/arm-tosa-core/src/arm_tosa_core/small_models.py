"""Small models of common architectures, beyond the four bundled examples, for coverage tests and the
benchmark: ConvMixer, a U-Net-style decoder, MobileNetV3 (hardswish, squeeze-excite), a keyword-spotting
CNN, a ViT patch embedding and a CRNN. Sizes are small (a few thousand to ~100k parameters) so that
quantizing, lowering and running them on the reference model takes seconds.

Weights are seeded like `example_models` (fan-in scaled, batch-norm statistics measured on a seeded
batch, then perturbed), so one seed always gives the same model. This file imports only torch and its
sibling `example_models`, so the benchmark can load it without the package (bench/bench_common.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .example_models import ExampleModel

__all__ = ["SMALL_MODELS", "build_small", "convmixer", "crnn", "kws_cnn", "mobilenet_v3_small", "unet_decoder",
           "vit_patch_embed"]


def _conv_bn(cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1, act: type = nn.ReLU):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), act())


# --------------------------------------------------------------------------------------- ConvMixer
class _Residual(nn.Module):
    def __init__(self, fn: nn.Module) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x) + x


def convmixer(dim: int = 32, depth: int = 3, kernel: int = 5, patch: int = 4, classes: int = 10) -> nn.Module:
    """ConvMixer: patch embedding, then per block depthwise conv -> GELU -> BN (residual) and
    1x1 conv -> GELU -> BN. Every batch norm follows a GELU, not a convolution."""
    return nn.Sequential(
        nn.Conv2d(3, dim, patch, stride=patch), nn.GELU(), nn.BatchNorm2d(dim),
        *[nn.Sequential(
            _Residual(nn.Sequential(nn.Conv2d(dim, dim, kernel, groups=dim, padding="same"), nn.GELU(),
                                    nn.BatchNorm2d(dim))),
            nn.Conv2d(dim, dim, 1), nn.GELU(), nn.BatchNorm2d(dim)) for _ in range(depth)],
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(dim, classes))


# ----------------------------------------------------------------------------------- U-Net decoder
class UNetDecoder(nn.Module):
    """A two-level U-Net: a small encoder, then the decoder under test: bilinear 2x upsampling,
    concatenation with the skip connection, conv-BN-ReLU, down to a 1x1 segmentation head."""

    def __init__(self, base: int = 8, classes: int = 3) -> None:
        super().__init__()
        self.enc1 = _conv_bn(3, base)
        self.enc2 = _conv_bn(base, 2 * base)
        self.bottleneck = _conv_bn(2 * base, 4 * base)
        self.dec2 = _conv_bn(4 * base + 2 * base, 2 * base)
        self.dec1 = _conv_bn(2 * base + base, base)
        self.head = nn.Conv2d(base, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s1 = self.enc1(x)
        s2 = self.enc2(F.max_pool2d(s1, 2))
        y = self.bottleneck(F.max_pool2d(s2, 2))
        y = self.dec2(torch.cat([F.interpolate(y, scale_factor=2, mode="bilinear"), s2], 1))
        y = self.dec1(torch.cat([F.interpolate(y, scale_factor=2, mode="bilinear"), s1], 1))
        return self.head(y)


def unet_decoder(base: int = 8, classes: int = 3) -> nn.Module:
    return UNetDecoder(base, classes)


# ----------------------------------------------------------------------------------- MobileNetV3
class _SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeeze: int) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class _Bneck(nn.Module):
    """MobileNetV3 block: 1x1 expand, depthwise kxk, optional squeeze-excite, 1x1 project."""

    def __init__(self, cin: int, hidden: int, cout: int, k: int, stride: int, se: bool, act: type) -> None:
        super().__init__()
        self.use_res = stride == 1 and cin == cout
        layers = [_conv_bn(cin, hidden, 1, act=act), _conv_bn(hidden, hidden, k, stride, hidden, act=act)]
        if se:
            layers.append(_SqueezeExcite(hidden, max(8, hidden // 4)))
        layers += [nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.use_res else y


def mobilenet_v3_small(classes: int = 10) -> nn.Module:
    """A reduced MobileNetV3-Small: hardswish, squeeze-excite with hardsigmoid, residuals."""
    hs, relu = nn.Hardswish, nn.ReLU
    return nn.Sequential(
        _conv_bn(3, 16, 3, 2, act=hs),
        _Bneck(16, 16, 16, 3, 2, True, relu),
        _Bneck(16, 48, 24, 3, 2, False, relu),
        _Bneck(24, 56, 24, 3, 1, False, relu),
        _Bneck(24, 64, 32, 5, 2, True, hs),
        _Bneck(32, 96, 32, 5, 1, True, hs),
        _conv_bn(32, 96, 1, act=hs),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(96, 128), nn.Hardswish(), nn.Linear(128, classes))


# ----------------------------------------------------------------------------------- keyword spotting
def kws_cnn(classes: int = 12, width: int = 32) -> nn.Module:
    """A DS-CNN keyword spotter on 49x10 MFCC frames: a 10x4 stride-2 conv, two depthwise-separable
    blocks, global average pooling and a classifier."""
    return nn.Sequential(
        nn.Conv2d(1, width, (10, 4), (2, 2), (5, 1), bias=False), nn.BatchNorm2d(width), nn.ReLU(),
        *[nn.Sequential(_conv_bn(width, width, 3, groups=width), _conv_bn(width, width, 1)) for _ in range(2)],
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, classes))


# ----------------------------------------------------------------------------------- ViT patch embedding
class ViTPatchEmbed(nn.Module):
    """ViT input stage: a patch-size-stride conv, flatten to tokens, class token, position embedding,
    layer norm and a linear projection."""

    def __init__(self, dim: int = 32, patch: int = 8, size: int = 32) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, dim, patch, patch)
        tokens = (size // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, tokens + 1, dim) * 0.02)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.proj(x).flatten(2).transpose(1, 2)
        t = torch.cat([self.cls.expand(x.shape[0], -1, -1), t], 1) + self.pos
        return self.head(self.norm(t))


def vit_patch_embed(dim: int = 32, patch: int = 8, size: int = 32) -> nn.Module:
    return ViTPatchEmbed(dim, patch, size)


# ----------------------------------------------------------------------------------- CRNN
class CRNN(nn.Module):
    """A CRNN for line recognition: conv-BN-ReLU-maxpool twice, the feature columns as a sequence,
    a GRU over it and a per-step classifier."""

    def __init__(self, classes: int = 11, hidden: int = 32) -> None:
        super().__init__()
        self.features = nn.Sequential(_conv_bn(1, 16), nn.MaxPool2d(2), _conv_bn(16, 32), nn.MaxPool2d(2))
        self.rnn = nn.GRU(32 * 4, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.features(x)  # [N, 32, 4, W/4]
        seq = f.permute(0, 3, 1, 2).flatten(2)  # [N, W/4, 128]
        return self.fc(self.rnn(seq)[0])


def crnn(classes: int = 11, hidden: int = 32) -> nn.Module:
    return CRNN(classes, hidden)


def _seeded(factory):
    """Build with the global RNG seeded: layers that `_seed_weights` does not re-draw (GRU, parameters
    made with torch.randn) then get the same values in every process."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return factory()


def _small(name: str, description: str, factory, shape: tuple[int, ...]) -> ExampleModel:
    # is_image: batch norms are calibrated on a seeded batch; the size argument is ignored (fixed shapes)
    return ExampleModel(name, description, lambda size: (_seeded(factory), shape), 32, True)


SMALL_MODELS: dict[str, ExampleModel] = {m.name: m for m in (
    _small("convmixer", "ConvMixer-style, dim 32, 3 blocks, kernel 5, patch 4, 1x3x32x32", convmixer, (1, 3, 32, 32)),
    _small("unet_decoder", "U-Net-style, 2 levels, bilinear 2x decoder with skips, 1x3x32x32", unet_decoder,
           (1, 3, 32, 32)),
    _small("mobilenet_v3_small", "reduced MobileNetV3-Small (hardswish, squeeze-excite), 1x3x32x32",
           mobilenet_v3_small, (1, 3, 32, 32)),
    _small("kws_cnn", "DS-CNN keyword spotter on 49x10 MFCCs, 1x1x49x10", kws_cnn, (1, 1, 49, 10)),
    _small("vit_patch_embed", "ViT patch embedding (patch 8, dim 32, class token, layer norm), 1x3x32x32",
           vit_patch_embed, (1, 3, 32, 32)),
    _small("crnn", "CRNN: 2 conv stages, GRU(128->32) over 8 columns, 1x1x16x32", crnn, (1, 1, 16, 32)),
)}  # fmt: skip


def build_small(name: str, seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """(eval-mode module, example inputs) of small model `name`, weights and inputs from `seed`."""
    if name not in SMALL_MODELS:
        raise ValueError(f"unknown small model {name!r}; valid names: {', '.join(sorted(SMALL_MODELS))}")
    return SMALL_MODELS[name].build(seed)
