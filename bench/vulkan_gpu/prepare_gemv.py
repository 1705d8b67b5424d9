"""Stage the 4-bit GEMV microbench (issue 19's decode goal) for the device: one `linear_q_gemv` per .pte at
the Llama-3.2-1B decode step's shapes, one activation row, weights 4-bit in groups of 32 with fp32 scales
(decode_models.GROUP), tiled from one seeded random block (decode_models.decoder_state's scheme) so the
head's 128256 x 2048 (148 MB) compresses for the 64 MiB carry cap; the GPU still reads every byte.

    uv run python bench/vulkan_gpu/prepare_gemv.py [OUT]   # OUT default: out/vulkan-gemv

OUT gets run_gemv.sh, device_env.sh and gemv_bundle.tar.xz (not bundle*: run_decode.sh runs those) (the .pte files, seeded inputs and eager
references, vkdg_runner, the runtime library). On the device `bash OUT/run_gemv.sh` times every case with
vkdg_runner (median ms per call, upload and readback included; output checked against the reference) and its
GEMV dispatch alone (VKDG_PROFILE), for each kernel variant, and writes GB/s = weight bytes / kernel time.
"""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

import torch
from executorch.exir import to_edge_transform_and_lower
from torch import nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import decode_models  # noqa: E402
from prepare_decode import quantized_linear  # noqa: E402
from staging import stage_runtime  # noqa: E402

#: (stem, N, K, whether an RMS norm with a gain feeds the GEMV, folded into it as in the decode step)
CASES = [("q_2048x2048", 2048, 2048, False), ("q_2048x2048_norm", 2048, 2048, True),
         ("kv_512x2048_norm", 512, 2048, True), ("gate_8192x2048_norm", 8192, 2048, True),
         ("down_2048x8192", 2048, 8192, False), ("head_128256x2048", 128256, 2048, False),
         ("head_128256x2048_norm", 128256, 2048, True)]


class NormedGemv(nn.Module):
    """x -> (RMS norm with a gain ->) 4-bit linear, as one decode-step projection."""

    def __init__(self, n: int, k: int, norm: bool, g: torch.Generator) -> None:
        super().__init__()
        rows = decode_models.TILE_ROWS
        q = torch.randint(-8, 8, (rows, k), generator=g, dtype=torch.int8)
        s = (torch.rand(rows, k // decode_models.GROUP, generator=g) + 0.5) / (4.6 * k ** 0.5)
        self.lin = quantized_linear(q.repeat(n // rows, 1), s.repeat(n // rows, 1))
        self.block = quantized_linear(q, s)  # the same period of rows: the reference needs only these
        self.norm = nn.RMSNorm(k, eps=1e-5) if norm else None
        if norm:
            nn.init.uniform_(self.norm.weight, 0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(self.norm(x) if self.norm is not None else x)

    def reference(self, x: torch.Tensor, n: int) -> torch.Tensor:
        h = self.norm(x) if self.norm is not None else x
        return self.block(h).repeat(1, n // decode_models.TILE_ROWS)


def weight_bytes(n: int, k: int) -> int:
    """4-bit weights and fp32 scales (one per GROUP) the GEMV reads."""
    return n * k // 2 + n * k // decode_models.GROUP * 4


def stage(work: Path) -> None:
    from vulkan_delegate import VulkanPartitioner

    meta = []
    for i, (stem, n, k, norm) in enumerate(CASES):
        g = torch.Generator().manual_seed(i)
        model = NormedGemv(n, k, norm, g).eval()
        x = torch.randn(1, k, generator=g) * 3.0 + 0.5
        ep = torch.export.export(model, (x,))
        edge = to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner()])
        (work / f"{stem}.pte").write_bytes(edge.to_executorch().buffer)
        with torch.no_grad():
            model.reference(x, n).contiguous().numpy().tofile(work / f"{stem}.ref.f32")
        x.numpy().tofile(work / f"{stem}.in.f32")
        meta.append({"stem": stem, "n": n, "k": k, "norm": norm, "weight_bytes": weight_bytes(n, k)})
        print(stem, (work / f"{stem}.pte").stat().st_size, flush=True)
    (work / "gemv_cases.json").write_text(json.dumps(meta))
    stage_runtime(work)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for f in ("run_gemv.sh", "device_env.sh"):
        shutil.copy(HERE / f, out)
    bundle = out / "gemv_bundle.tar.xz"
    with tempfile.TemporaryDirectory() as tmp:
        stage(Path(tmp))
        with tarfile.open(bundle, "w:xz", preset=1) as tar:  # 1 MiB window: the weights' 4-row period fits
            tar.add(tmp, arcname=".")
    print(bundle, bundle.stat().st_size)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "out/vulkan-gemv").resolve())
