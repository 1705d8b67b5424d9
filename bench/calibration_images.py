"""Calibration-like inputs for the bundled example models, from real photographs on this machine.

Random normal inputs make every layer's quantization error look alike (the previous bench saw the
error spread flat over all of MobileNetV2's layers), so the mixed precision bench calibrates and
evaluates on photographs instead: the three that ship inside installed wheels (scikit-learn's
``china.jpg`` and ``flower.jpg``, matplotlib's ``grace_hopper.jpg``; no download). Each sample is a
seeded random crop (30-100 % of the shorter side, random flip), resized to the model's input and
normalised with ImageNet's mean and std, as torchvision's classification transforms do.

Transformer blocks take tokens, not pixels: a sample is ``tokens`` 16x16 RGB patches from those
crops, flattened and projected to the block's width by a seeded random patch embedding (the ViT
patch-embedding shape), then scaled to unit variance, so tokens carry real images' correlations.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
_STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


def photo_paths() -> list[Path]:
    """The photographs this module draws from (raises when the wheels that ship them are missing)."""
    import matplotlib
    import sklearn

    paths = [Path(sklearn.__file__).parent / "datasets" / "images" / n for n in ("china.jpg", "flower.jpg")]
    paths.append(Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"calibration photographs not found: {missing} (scikit-learn and matplotlib "
                                "ship them; run `uv sync`)")
    return paths


def _photos() -> list[torch.Tensor]:
    from PIL import Image

    return [torch.from_numpy(np.asarray(Image.open(p).convert("RGB"), dtype=np.float32) / 255.0).permute(2, 0, 1)
            for p in photo_paths()]


def _crop(photo: torch.Tensor, size: int, gen: torch.Generator) -> torch.Tensor:
    _, h, w = photo.shape
    side = int(min(h, w) * float(torch.empty(1).uniform_(0.3, 1.0, generator=gen)))
    top = int(torch.randint(0, h - side + 1, (1,), generator=gen))
    left = int(torch.randint(0, w - side + 1, (1,), generator=gen))
    crop = photo[:, top:top + side, left:left + side]
    if bool(torch.randint(0, 2, (1,), generator=gen)):
        crop = crop.flip(-1)
    return torch.nn.functional.interpolate(crop[None], size=(size, size), mode="bilinear",
                                           align_corners=False, antialias=True)[0]


def image_samples(n: int, size: int, seed: int) -> list[tuple[torch.Tensor]]:
    """``n`` ImageNet-normalised 1x3xSxS crops, cycling over the photographs."""
    gen = torch.Generator().manual_seed(seed)
    photos = _photos()
    return [(((_crop(photos[i % len(photos)], size, gen) - _MEAN) / _STD)[None],) for i in range(n)]


def token_samples(n: int, tokens: int, dim: int, seed: int) -> list[tuple[torch.Tensor]]:
    """``n`` 1 x tokens x dim samples: photo patches through a seeded random patch embedding."""
    gen = torch.Generator().manual_seed(seed)
    photos = _photos()
    embed = torch.randn(3 * 16 * 16, dim, generator=gen) / math.sqrt(3 * 16 * 16)
    side = 16 * math.ceil(math.sqrt(tokens))
    out = []
    for i in range(n):
        img = (_crop(photos[i % len(photos)], side, gen) - _MEAN) / _STD
        patches = img.unfold(1, 16, 16).unfold(2, 16, 16).permute(1, 2, 0, 3, 4).reshape(-1, 3 * 16 * 16)
        x = patches[:tokens] @ embed
        out.append((((x - x.mean()) / x.std())[None],))
    return out


def model_samples(name: str, n: int, size: int, seed: int, example_inputs: tuple) -> list[tuple]:
    """Samples shaped like ``example_inputs`` for a bundled example: photos for image models,
    photo tokens for transformer blocks."""
    (x,) = example_inputs
    if x.dim() == 4:
        return image_samples(n, size, seed)
    return token_samples(n, x.shape[1], x.shape[2], seed)
