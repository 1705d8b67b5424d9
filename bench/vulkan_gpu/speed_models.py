"""The models of the kernel-speed run (issue 19), built identically on the staging machine (to lower)
and on the device machine (for eager CUDA / CUDA graphs): example_models' seeded ResNet-18 and
MobileNetV2, and a square GEMM (x @ x, 4096^3).

Weights are rounded to 4 significant bits and every batch norm gets gamma rounded, beta rounded,
mean 0 and var + eps == 1 exactly, so the folded convolution weights keep 4-8 significant bits: the
.pte files then compress ~3x under xz and fit the device tool's 64 MiB carry cap. The arithmetic
(and so the timing) is that of the unrounded model; the reference outputs are those of these weights.
"""

from __future__ import annotations

import torch
from torch import nn

# (stem, model name, batch, fp16)
CASES = [("resnet18_b1_fp32", "resnet18", 1, False), ("resnet18_b1_fp16", "resnet18", 1, True),
         ("mobilenet_v2_b1_fp32", "mobilenet_v2", 1, False), ("mobilenet_v2_b1_fp16", "mobilenet_v2", 1, True),
         ("mobilenet_v2_b8_fp32", "mobilenet_v2", 8, False),
         ("gemm4096_fp32", "gemm", 4096, False), ("gemm4096_fp16", "gemm", 4096, True)]


class Square(nn.Module):
    """y = x @ x: one M=N=K GEMM with both operands row-major, the input its only data."""

    def forward(self, x):
        return x @ x


def _round4(t: torch.Tensor) -> torch.Tensor:
    m, e = torch.frexp(t)
    return torch.ldexp(torch.round(m * 16) / 16, e)


def build(name: str, batch: int) -> tuple[nn.Module, torch.Tensor]:
    """(model in eval mode, seeded input) for one case."""
    if name == "gemm":
        return Square().eval(), gemm_input(batch)
    import example_models

    model, (x,) = example_models.get_example(name).build(input_size=224)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.zero_()
                eps = torch.tensor(mod.eps, dtype=torch.float32)
                mod.running_var.fill_(float(torch.tensor(1.0) - eps))
                assert float(mod.running_var[0] + eps) == 1.0
                mod.weight.copy_(_round4(torch.rand(mod.weight.shape, generator=torch.Generator().manual_seed(1)) + 0.5))
                mod.bias.copy_(_round4(mod.bias))
            elif isinstance(mod, nn.Conv2d | nn.Linear):
                for p in mod.parameters(recurse=False):
                    p.copy_(_round4(p))
    if batch > 1:
        x = torch.randn(batch, *x.shape[1:], generator=torch.Generator().manual_seed(batch))
    return model.eval(), x


def gemm_input(n: int) -> torch.Tensor:
    """The fixed pattern vkdg_runner feeds when given no --input (so no 64 MiB input file travels)."""
    i = torch.arange(n * n, dtype=torch.int64)
    return (((i * 2654435761) % 1000).float() / 500.0 - 1.0).reshape(n, n)
