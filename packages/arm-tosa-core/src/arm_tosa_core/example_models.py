"""Bundled example models with seeded random weights, for tests and benchmarks.

Everything is written from ``torch.nn`` here: no hub downloads, no torchvision. Weights come from a
seeded ``torch.Generator``, so one seed always gives the same model. BatchNorm running statistics are
measured on a seeded random batch (one forward in training mode) and then perturbed, so BN is never an
identity and activations stay O(1) through the depth whatever the init does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "EXAMPLE_MODELS",
    "ExampleModel",
    "deit_tiny_block",
    "get_example",
    "llama_block",
    "mobilenet_v2",
    "resnet18",
]


# ----------------------------------------------------------------------------- MobileNetV2


def _make_divisible(v: float, divisor: int = 8) -> int:
    """Round channel counts the way the MobileNetV2 paper's reference code does."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:  # never round down by more than 10%
        new_v += divisor
    return new_v


def _conv_bn_relu6(cin: int, cout: int, k: int, stride: int, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU6(inplace=False),
    )


class InvertedResidual(nn.Module):
    """MobileNetV2 block: 1x1 expand, 3x3 depthwise, 1x1 linear projection, residual if shapes match."""

    def __init__(self, cin: int, cout: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = round(cin * expand_ratio)
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(_conv_bn_relu6(cin, hidden, 1, 1))
        layers += [
            _conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, cout, 1, 1, 0, bias=False),
            nn.BatchNorm2d(cout),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (Sandler et al. 2018) with the standard [t, c, n, s] table."""

    SETTINGS = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
                [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]  # fmt: skip

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0) -> None:
        super().__init__()
        cin = _make_divisible(32 * width_mult)
        self.last_channel = _make_divisible(1280 * max(1.0, width_mult))
        features: list[nn.Module] = [_conv_bn_relu6(3, cin, 3, 2)]
        for t, c, n, s in self.SETTINGS:
            cout = _make_divisible(c * width_mult)
            for i in range(n):
                features.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        features.append(_conv_bn_relu6(cin, self.last_channel, 1, 1))
        self.features = nn.Sequential(*features)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(self.last_channel, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v2(num_classes: int = 1000, width_mult: float = 1.0) -> MobileNetV2:
    """Build an (unseeded, default-initialised) MobileNetV2; use ``get_example`` for seeded weights."""
    return MobileNetV2(num_classes, width_mult)


# ----------------------------------------------------------------------------- ResNet-18


class BasicBlock(nn.Module):
    """Two 3x3 conv+BN layers with an identity (or 1x1 conv+BN) shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + identity)


class ResNet18(nn.Module):
    """ResNet-18 (He et al. 2016): 7x7 stem + maxpool, four stages of two BasicBlocks."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, cin = [], 64
        for i, cout in enumerate((64, 128, 256, 512)):
            stride = 1 if i == 0 else 2
            stages.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(num_classes: int = 1000) -> ResNet18:
    """Build an (unseeded, default-initialised) ResNet-18; use ``get_example`` for seeded weights."""
    return ResNet18(num_classes)


# ----------------------------------------------------------------------------- DeiT-tiny block


class DeiTBlock(nn.Module):
    """Pre-norm ViT/DeiT encoder block: x + MHSA(LN(x)), then x + MLP(LN(x)) with GELU, ratio 4."""

    def __init__(self, dim: int = 192, heads: int = 3) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim={dim} must be divisible by heads={heads}; pick a divisor of dim")
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (b, heads, n, head_dim)
        a = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(a.transpose(1, 2).reshape(b, n, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def deit_tiny_block(dim: int = 192, heads: int = 3, tokens: int = 197) -> DeiTBlock:
    """Build a DeiT-tiny encoder block; inputs are ``(1, tokens, dim)`` (``tokens`` is not a weight)."""
    del tokens  # the block works for any token count; kept in the signature for symmetry
    return DeiTBlock(dim, heads)


# ----------------------------------------------------------------------------- Llama block


class RMSNorm(nn.Module):
    """x * rsqrt(mean(x^2) + eps) * w, written out so the graph shows the arithmetic."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaBlock(nn.Module):
    """Llama decoder block: RMSNorm, rotary causal attention (optionally grouped KV), SiLU-gated MLP."""

    def __init__(self, dim: int = 256, heads: int = 4, kv_heads: int | None = None,
                 seq: int = 32, hidden: int = 688, rope_theta: float = 10000.0) -> None:  # fmt: skip
        super().__init__()
        kv_heads = heads if kv_heads is None else kv_heads
        if dim % heads or heads % kv_heads:
            raise ValueError(
                f"need dim % heads == 0 and heads % kv_heads == 0, got dim={dim}, heads={heads}, "
                f"kv_heads={kv_heads}; choose divisors"
            )
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        if self.head_dim % 2:
            raise ValueError(f"head_dim={self.head_dim} must be even for rotary embedding")
        self.attn_norm = RMSNorm(dim)
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)
        self.mlp_norm = RMSNorm(dim)
        self.w_gate = nn.Linear(dim, hidden, bias=False)
        self.w_up = nn.Linear(dim, hidden, bias=False)
        self.w_down = nn.Linear(hidden, dim, bias=False)
        # Precomputed rotary tables (seq, head_dim) for the rotate-half formulation.
        inv_freq = rope_theta ** (
            -torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim
        )
        angles = torch.outer(torch.arange(seq, dtype=torch.float32), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def _rope(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-2]
        return x * self.cos[:n] + _rotate_half(x) * self.sin[:n]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(b, n, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(h).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(h).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = self._rope(q), self._rope(k)
        if self.kv_heads != self.heads:  # grouped-query attention: share each KV head
            rep = self.heads // self.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, n, self.heads * self.head_dim))
        h = self.mlp_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


def llama_block(dim: int = 256, heads: int = 4, kv_heads: int | None = None, seq: int = 32,
                hidden: int = 688) -> LlamaBlock:  # fmt: skip
    """Build a Llama-style decoder block; ``kv_heads`` defaults to ``heads`` (no grouping)."""
    return LlamaBlock(dim, heads, kv_heads, seq, hidden)


# ----------------------------------------------------------------------------- seeded weights


def _seed_weights(model: nn.Module, gen: torch.Generator) -> None:
    """Fan-in scaled normal weights, so each layer keeps activations O(1); norms get w≈1, b≈0."""
    for mod in model.modules():
        if isinstance(mod, nn.Conv2d | nn.Linear):
            fan_in = mod.weight[0].numel()
            gain = math.sqrt(2.0) if isinstance(mod, nn.Conv2d) else 1.0  # convs feed ReLU(6)
            with torch.no_grad():
                mod.weight.normal_(0.0, gain / math.sqrt(fan_in), generator=gen)
                if mod.bias is not None:
                    mod.bias.uniform_(-0.1, 0.1, generator=gen)
        elif isinstance(mod, nn.BatchNorm2d | nn.LayerNorm | RMSNorm):
            with torch.no_grad():
                mod.weight.uniform_(0.7, 1.3, generator=gen)
                if getattr(mod, "bias", None) is not None:
                    mod.bias.uniform_(-0.2, 0.2, generator=gen)


def _calibrate_batchnorm(model: nn.Module, x: torch.Tensor, gen: torch.Generator) -> None:
    """Set BN running stats from one seeded batch, then perturb them so BN is not exactly whitening."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in bns:
        bn.momentum = 1.0  # running stats := this batch's stats
    model.train()
    with torch.no_grad():
        model(x)
        for bn in bns:
            bn.momentum = 0.1
            bn.running_mean.add_(0.1 * torch.randn(bn.num_features, generator=gen))
            bn.running_var.mul_(torch.empty(bn.num_features).uniform_(0.8, 1.25, generator=gen))
    model.eval()


@dataclass(frozen=True)
class ExampleModel:
    """A bundled example: ``build(seed, input_size)`` returns ``(eval-mode module, example inputs)``.

    ``input_size`` is the image side for image models (default 224) and the token/sequence count for
    transformer blocks (their defaults are 197 and 32).
    """

    name: str
    description: str
    _factory: Callable[[int | None], tuple[nn.Module, tuple[int, ...]]]
    default_size: int
    is_image: bool

    def build(
        self, seed: int = 0, input_size: int | None = None
    ) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        """Build the model with weights and inputs drawn from ``seed``."""
        size = self.default_size if input_size is None else int(input_size)
        if size < (32 if self.is_image else 1):
            raise ValueError(
                f"{self.name}: input_size={size} is too small; use >= 32 for image models "
                "(five stride-2 stages) and >= 1 tokens for transformer blocks"
            )
        gen = torch.Generator().manual_seed(seed)
        model, shape = self._factory(size)
        _seed_weights(model, gen)
        if self.is_image:
            calib = torch.randn((4, *shape[1:]), generator=gen)
            _calibrate_batchnorm(model, calib, gen)
        model.eval()
        return model, (torch.randn(shape, generator=gen),)


def _image(factory: Callable[[], nn.Module]) -> Callable[[int | None], tuple[nn.Module, tuple]]:
    return lambda size: (factory(), (1, 3, size, size))


EXAMPLE_MODELS: dict[str, ExampleModel] = {
    m.name: m
    for m in (
        ExampleModel("mobilenet_v2", "MobileNetV2 1.0, 1000 classes, 1x3x224x224 input",
                     _image(mobilenet_v2), 224, True),
        ExampleModel("resnet18", "ResNet-18, 1000 classes, 1x3x224x224 input",
                     _image(resnet18), 224, True),
        ExampleModel("deit_tiny_block", "DeiT-tiny encoder block, dim 192, 3 heads, 1x197x192 input",
                     lambda n: (deit_tiny_block(), (1, n, 192)), 197, False),
        ExampleModel("llama_block", "Llama decoder block, dim 256, 4 heads, SiLU MLP 688, 1x32x256 input",
                     lambda n: (llama_block(seq=n), (1, n, 256)), 32, False),
    )
}  # fmt: skip


def get_example(name: str) -> ExampleModel:
    """Look up a bundled example by name; raises ValueError listing the valid names."""
    try:
        return EXAMPLE_MODELS[name]
    except KeyError:
        raise ValueError(
            f"unknown example model {name!r}; valid names: {', '.join(sorted(EXAMPLE_MODELS))}"
        ) from None
