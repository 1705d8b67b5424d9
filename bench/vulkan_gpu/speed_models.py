"""The models of the kernel-speed run (issue 19), built identically on the staging machine (to lower)
and on the device machine (for eager CUDA / CUDA graphs): example_models' seeded ResNet-18,
MobileNetV2 and Llama block (128 tokens), and a square GEMM (x @ x, 4096^3).

Weights are rounded to 4 significant bits and every batch norm gets gamma rounded, beta rounded,
mean 0 and var + eps == 1 exactly, so the folded convolution weights keep 4-8 significant bits: the
.pte files then compress ~3x under xz and fit the device tool's 64 MiB carry cap. The arithmetic
(and so the timing) is that of the unrounded model; the reference outputs are those of these weights.
"""

from __future__ import annotations

import os

import torch
from torch import nn

# (stem, model name, batch, fp16)
CASES = [("resnet18_b1_fp32", "resnet18", 1, False), ("resnet18_b1_fp16", "resnet18", 1, True),
         ("mobilenet_v2_b1_fp32", "mobilenet_v2", 1, False), ("mobilenet_v2_b1_fp16", "mobilenet_v2", 1, True),
         ("mobilenet_v2_b8_fp32", "mobilenet_v2", 8, False),
         ("llama_block128_fp32", "llama_block", 1, False), ("llama_block128_fp16", "llama_block", 1, True),
         ("gemm4096_fp32", "gemm", 4096, False), ("gemm4096_fp16", "gemm", 4096, True),
         # issue 19's throughput goal: zoo_models' ResNet-50 (periodic weights, the runner's pattern input)
         ("resnet50_b32_fp16", "resnet50", 32, True),
         # A/B rows: the same models lowered under LOWERING_ENV (fp32 GEMM on the 64x64 tile, packed fp32 convs)
         ("gemm4096_fp32tile64", "gemm", 4096, False), ("resnet18_b1_fp32pack", "resnet18", 1, False)]
#: CASES built by zoo_models.build (no input file travels: the runner's pattern; reference staged)
ZOO_CASES = ("resnet50",)

# norm microcases, only run when SPEED_CASES names them: RMS norm of `batch` rows of 4096 ("rms_norm4096"), the
# same lowered with the 64-lane norm_row instead of norm_row_wide ("..._lanes64": prepare_speed.py)
NORM_CASES = [("rmsnorm4096_r1_fp32", "rms_norm4096", 1, False),
              ("rmsnorm4096_r1_lanes64_fp32", "rms_norm4096_lanes64", 1, False),
              ("rmsnorm4096_r128_fp32", "rms_norm4096", 128, False),
              ("rmsnorm4096_r128_lanes64_fp32", "rms_norm4096_lanes64", 128, False)]
# fused-attention numerics, only run when SPEED_CASES names them: AttentionCheck below (tails past the 16-row and
# 32-key tiles, a head dim off the 16 grid, causal and additive-mask attention); fp16 runs attention_flash's
# tensor-core variant where the device has cooperative matrices, and run_speed.sh reruns it with VKDG_COOPMAT=0
ATTN_CASES = [("sdpa_check_fp16", "sdpa_check", 1, True), ("sdpa_check_fp32", "sdpa_check", 1, False)]
# A/B cases: a model lowered with one lowering choice turned off (LOWERING_ENV below; the CUDA baselines skip
# them); only run when SPEED_CASES names them
AB_CASES = [("llama_block128_nofuse_fp32", "llama_block", 1, False),  # no elementwise fusion (fuse.py)
            ("llama_block128_nofuse_fp16", "llama_block", 1, True),
            ("mobilenet_v2_b1_no1x1small_fp32", "mobilenet_v2", 1, False),  # small pointwise convs on the GEMM tile
            ("mobilenet_v2_b1_slices8_fp32", "mobilenet_v2", 1, False),  # conv2d_1x1_small with 8 K slices
            # conv2d_1x1_small only up to 196 pixels (not also where the GEMM tile gives few tiles: the rule before)
            ("mobilenet_v2_b1_1x1pixels_fp32", "mobilenet_v2", 1, False),
            ("mobilenet_v2_b8_1x1pixels_fp32", "mobilenet_v2", 8, False),
            ("mobilenet_v2_b1_oct8_fp32", "mobilenet_v2", 1, False),  # conv2d_1x1_small, 8 channels per workgroup
            ("mobilenet_v2_b1_oct4_fp32", "mobilenet_v2", 1, False),  # ... and 4 (the rule before POINTWISE_WIDE_FROM)
            ("resnet18_b1_nowino_fp32", "resnet18", 1, False),  # 3x3 stride-1 convs on the implicit GEMM
            ("resnet18_b1_nowino_fp16", "resnet18", 1, True)]  # fp16: every 3x3 conv packed on the tensor-core GEMM

# (stem, kind, M, K, N, fp16): GEMMs off every tile grid, for the numerics of each GEMM kernel on the GPU
# (the tensor-core ones exist nowhere else): "mm" x[:M, :K] @ x[M:] of one [M + K, N] input (B row-major;
# no weights, so the .pte stays small), "xxt" x @ x.T (B column-major, N = M), "linear" nn.Linear(K, N) on [M, K],
# "conv<k>" below. Input:
# the runner's pattern; reference: fp64 on the device (speed_cuda.py).
CHECKS = [("check_mm_1000x1000x1000_fp16", "mm", 1000, 1000, 1000, True),  # f16coop (64x64)
          ("check_mm_77x300x4096_fp16", "mm", 77, 300, 4096, True),  # f16coop
          # f16smallcoop (K split over 8 subgroups): M, N off the 16-grid, K off the 32-deep slices
          ("check_mm_100x700x900_fp16", "mm", 100, 700, 900, True),
          ("check_mm_2100x1000x2056_fp16", "mm", 2100, 1000, 2056, True),  # f16bigcoop, 128-bit A and B loads
          ("check_xxt_2100x1000_fp16", "xxt", 2100, 1000, 2100, True),  # f16bigcoop, B column-major 128-bit
          ("check_xxt_2100x300_fp16", "xxt", 2100, 300, 2100, True),  # f16bigcoop, element loads (300 % 8)
          # f16bigcoop2 (VK_NV_cooperative_matrix2) where the device has it: B's base M * N = 2101 * 2055 not a
          # multiple of 8 elements, so its one-output-per-invocation fallback
          ("check_mm_2101x1000x2055_fp16", "mm", 2101, 1000, 2055, True),
          # nn.Linear (bias): B the constant weight, column-major (k contiguous), and a per-n bias in the epilogue;
          # f16bigcoop2 loads it through a transposing tensor view (not yet run on the GPU)
          ("check_linear_2100x1000x2056_fp16", "linear", 2100, 1000, 2056, True),
          ("check_mm_2100x1000x2056_fp32", "mm", 2100, 1000, 2056, False),  # fp32: the 64x64 tile
          ("check_xxt_2100x1000_fp32", "xxt", 2100, 1000, 2100, False),
          ("check_xxt_2100x302_fp32", "xxt", 2100, 302, 2100, False),
          # ResNet-50 batch-32 convolutions ("conv<k>": Conv2d(K, M, k) + bias + ReLU on [32, K, N, N]); no
          # tensor over 65535 * 256 values (at 56x56 a 256-channel one failed on the 64x64 fp32 tile too)
          ("check_conv1_64x256x40_fp16", "conv1", 64, 256, 40, True),  # f16bigcoop, 128-bit input loads
          ("check_conv3_64x64x56_fp16", "conv3", 64, 64, 56, True),  # f16bigcoop, im2col element loads
          ("check_conv1_256x64x40_fp16", "conv1", 256, 64, 40, True),
          ("check_conv3_64x64x56_fp32", "conv3", 64, 64, 56, False),  # fp32: the 64x64 tile
          # packed 1x1 convolutions, the batch folded into the columns: stride 2 (the pack samples the
          # pixels), and 7x7 pointwise with split-K ("conv1s<s>": Conv2d(K, M, 1, stride=s) + bias + ReLU)
          ("check_conv1s2_128x256x28_fp16", "conv1s2", 128, 256, 28, True),
          ("check_conv1s1_256x1024x7_fp16", "conv1s1", 256, 1024, 7, True),
          # packed fp32 convolutions on the fp32 128x128 block (`f32big`; VKDG_F32_PACK=1)
          ("check_conv3_64x64x56_fp32pack", "conv3", 64, 64, 56, False)]

#: stems lowered with these environment variables set (ops/conv.py): A/B rows of a model or check above;
#: the CUDA baselines time each model once, under its plain stem
LOWERING_ENV = {"gemm4096_fp32tile64": {"VKDG_F32_BIG": "0"}, "resnet18_b1_fp32pack": {"VKDG_F32_PACK": "1"},
                "check_conv3_64x64x56_fp32pack": {"VKDG_F32_PACK": "1"},
                "llama_block128_nofuse_fp32": {"VKDG_FUSE": "0"}, "llama_block128_nofuse_fp16": {"VKDG_FUSE": "0"},
                "mobilenet_v2_b1_no1x1small_fp32": {"VKDG_CONV1X1_SMALL": "0"},
                "mobilenet_v2_b1_slices8_fp32": {"VKDG_CONV1X1_SLICES": "8"},
                "mobilenet_v2_b1_1x1pixels_fp32": {"VKDG_CONV1X1_SMALL_TILES": "0"},
                "mobilenet_v2_b8_1x1pixels_fp32": {"VKDG_CONV1X1_SMALL_TILES": "0"},
                "mobilenet_v2_b1_oct8_fp32": {"VKDG_CONV1X1_OCT": "8"},
                "mobilenet_v2_b1_oct4_fp32": {"VKDG_CONV1X1_OCT": "4"},
                "resnet18_b1_nowino_fp32": {"VKDG_WINOGRAD": "0"}, "resnet18_b1_nowino_fp16": {"VKDG_WINOGRAD": "0"}}


# SPEED_CASES="stem,stem,..." (staging and device alike): run only these cases and checks
_ONLY = [s for s in os.environ.get("SPEED_CASES", "").split(",") if s]
if _ONLY:
    CASES = [c for c in CASES + NORM_CASES + AB_CASES + ATTN_CASES if c[0] in _ONLY]
    CHECKS = [c for c in CHECKS if c[0] in _ONLY]


class Square(nn.Module):
    """y = x @ x: one M=N=K GEMM with both operands row-major, the input its only data."""

    def forward(self, x):
        return x @ x


class AttentionCheck(nn.Module):
    """Two fused attentions of x [2, 3, 100, 40]: causal self-attention over 100 keys, and attention over 80 keys
    (x's first 80 rows) with an additive float mask; 100 rows and 80 keys end off the 16-row / 32-key tiles of
    attention_flash's tensor-core variant, and its head dim 40 pads to 48."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mask", -3.0 * torch.rand(100, 80, generator=torch.Generator().manual_seed(7)))

    def forward(self, x):
        k = x[:, :, :80] * 0.5
        a = nn.functional.scaled_dot_product_attention(x, x.flip(2), x.flip(3), is_causal=True)
        b = nn.functional.scaled_dot_product_attention(x, k, k.flip(3) + 1.0, attn_mask=self.mask)
        return a + 2.0 * b


def _round4(t: torch.Tensor) -> torch.Tensor:
    m, e = torch.frexp(t)
    return torch.ldexp(torch.round(m * 16) / 16, e)


def build(name: str, batch: int) -> tuple[nn.Module, torch.Tensor]:
    """(model in eval mode, seeded input) for one case."""
    if name == "gemm":
        return Square().eval(), gemm_input(batch)
    if name.startswith("rms_norm4096"):
        model = nn.RMSNorm(4096, eps=1e-5)
        with torch.no_grad():
            model.weight.uniform_(0.5, 1.5, generator=torch.Generator().manual_seed(0))
        return model.eval(), torch.randn(1, batch, 4096, generator=torch.Generator().manual_seed(batch))
    if name == "sdpa_check":
        return AttentionCheck().eval(), torch.randn(2, 3, 100, 40, generator=torch.Generator().manual_seed(3))
    if name in ZOO_CASES:
        import zoo_models
        return zoo_models.build(name, batch)
    import example_models

    # images at 224 px; the Llama block (issue 19's fp16 goal) at 128 tokens
    model, (x,) = example_models.get_example(name).build(input_size=128 if name == "llama_block" else 224)
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


def gemm_input(n: int, rows: int | None = None) -> torch.Tensor:
    """The fixed pattern vkdg_runner feeds when given no --input (so no 64 MiB input file travels):
    [n, n], or [rows, n]."""
    rows = n if rows is None else rows
    i = torch.arange(rows * n, dtype=torch.int64)
    return (((i * 2654435761) % 1000).float() / 500.0 - 1.0).reshape(rows, n)


class SplitMM(nn.Module):
    """y = x[:M, :K] @ x[M:]: both operands slices of the one input [M + K, N]."""

    def __init__(self, m: int, k: int):
        super().__init__()
        self.m, self.k = m, k

    def forward(self, x):
        return x[: self.m, : self.k] @ x[self.m :]


class XXt(nn.Module):
    """y = x @ x.T: the second operand a column-major view of the input."""

    def forward(self, x):
        return x @ x.t()


def build_check(kind: str, m: int, k: int, n: int) -> tuple[nn.Module, torch.Tensor]:
    """(model, the runner's pattern input) for one CHECKS row."""
    if kind.startswith("conv"):
        ks, stride = (1, int(kind[6:])) if kind.startswith("conv1s") else (int(kind[4:]), 1)
        model = nn.Sequential(nn.Conv2d(k, m, ks, stride=stride, padding=ks // 2), nn.ReLU())
        g = torch.Generator().manual_seed(m + k + n)
        with torch.no_grad():  # seeded explicitly: the device's torch rebuilds the same weights for the reference
            model[0].weight.copy_(_round4(torch.randn(m, k, ks, ks, generator=g) / (k * ks * ks) ** 0.5))
            model[0].bias.copy_(_round4(torch.randn(m, generator=g)))
        return model.eval(), gemm_input(n * n, rows=32 * k).reshape(32, k, n, n)
    if kind == "mm":
        return SplitMM(m, k).eval(), gemm_input(n, rows=m + k)
    if kind == "linear":
        model = nn.Linear(k, n)
        g = torch.Generator().manual_seed(m + k + n)
        with torch.no_grad():  # seeded explicitly, as the convolutions above
            model.weight.copy_(_round4(torch.randn(n, k, generator=g) / k ** 0.5))
            model.bias.copy_(_round4(torch.randn(n, generator=g)))
        return model.eval(), gemm_input(k, rows=m)
    return XXt().eval(), gemm_input(k, rows=m)
