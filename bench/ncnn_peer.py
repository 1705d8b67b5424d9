"""ncnn's Vulkan backend as the peer of our Vulkan delegate (issue 12 benchmark).

Two halves, so the timing half runs where only ``ncnn`` and ``numpy`` exist (the GPU machine):

    python bench/ncnn_peer.py export OUT_DIR     # here: pnnx -> OUT_DIR/<stem>.ncnn.param/.bin + io files
    python bench/ncnn_peer.py time OUT_DIR [--runs 200] [--warmup 20] [--precision fp32 fp16] [--cpu]

``export`` needs torch and the PyPI ``pnnx`` (its static converter binary works with the workspace's torch);
``tools_env()`` installs the pinned ``pnnx`` and ``ncnn`` wheels with ``--no-deps`` into a git-ignored folder
(not project dependencies). The models are the bundled seeded examples (``example_models.py``, loaded
by path): MobileNetV2 1x3x224x224 and the Llama-style block at 8 and 128 tokens. For every model
``export`` also writes ``<stem>.in.f32`` (the seeded input) and ``<stem>.ref.f32`` (eager CPU fp32 output),
raw little-endian float32, plus ``models.json`` (stems and input shapes): our C++ runner and the eager
CUDA script check their outputs against the same files.

``time`` prints one JSON line per (model, precision): median/min ms per call over ``--runs`` after
``--warmup`` calls, each call = new extractor, input upload, inference, readback to numpy; and max|y-ref|/max|ref|.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PNNX_VERSION, NCNN_VERSION = "20261020", "1.0.20261020"
CASES = [("mobilenet_v2", 224), ("llama_block", 8), ("llama_block", 128)]


def tools_env(target: Path = ROOT / "bench" / "results" / "ncnn-tools") -> dict[str, str]:
    """An environment whose PYTHONPATH holds the pinned pnnx + ncnn wheels (installed on first use)."""
    marker = target / f".installed-{PNNX_VERSION}-{NCNN_VERSION}"
    if not marker.exists():
        uv = shutil.which("uv")
        base = [uv, "pip", "install", "--python", sys.executable] if uv else [sys.executable, "-m", "pip", "install"]
        subprocess.run([*base, "--quiet", "--no-deps", "--target", str(target), f"pnnx=={PNNX_VERSION}",
                        f"ncnn=={NCNN_VERSION}"], check=True)
        marker.touch()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), env.get("PYTHONPATH", "")) if p)
    return env


def _causal_mask_block(block):
    """The Llama block with its causal attention written as SDPA + an explicit additive mask.

    pnnx converts ``is_causal=True`` SDPA to nothing ncnn can load (it keeps the raw
    ``F.scaled_dot_product_attention`` op); with an ``attn_mask`` it becomes ncnn's ``SDPA`` layer. Same
    weights, same arithmetic: ``export`` asserts the outputs are identical before converting.
    """
    import torch
    import torch.nn.functional as F

    class MaskedLlamaBlock(torch.nn.Module):
        def __init__(self, blk, n: int) -> None:
            super().__init__()
            self.blk = blk
            self.register_buffer("mask", torch.full((n, n), float("-inf")).triu(1))

        def forward(self, x):
            s = self.blk
            b, n, _ = x.shape
            h = s.attn_norm(x)
            q = s.wq(h).view(b, n, s.heads, s.head_dim).transpose(1, 2)
            k = s.wk(h).view(b, n, s.kv_heads, s.head_dim).transpose(1, 2)
            v = s.wv(h).view(b, n, s.kv_heads, s.head_dim).transpose(1, 2)
            q, k = s._rope(q), s._rope(k)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask)
            x = x + s.wo(a.transpose(1, 2).reshape(b, n, s.heads * s.head_dim))
            h = s.mlp_norm(x)
            return x + s.w_down(F.silu(s.w_gate(h)) * s.w_up(h))

    return MaskedLlamaBlock


def export(out: Path) -> None:
    """Convert the three models with pnnx (fp32 weights) and write the io files (run with tools_env())."""
    import importlib.util

    import pnnx
    import torch

    spec = importlib.util.spec_from_file_location(
        "example_models", ROOT / "packages/arm-tosa-core/src/arm_tosa_core/example_models.py")
    em = importlib.util.module_from_spec(spec)
    sys.modules["example_models"] = em
    spec.loader.exec_module(em)
    out.mkdir(parents=True, exist_ok=True)
    manifest = []
    for name, size in CASES:
        model, (x,) = em.get_example(name).build(input_size=size)
        with torch.no_grad():
            ref = model(x)
            if name == "llama_block":
                model = _causal_mask_block(model)(model, size).eval()
                if not torch.equal(model(x), ref):
                    raise AssertionError("the masked-SDPA Llama block no longer matches example_models.LlamaBlock")
        stem = f"{name}_{size}"
        work = out / "pnnx-work"
        work.mkdir(exist_ok=True)
        pnnx.export(model, str(work / f"{stem}.pt"), (x,), fp16=False,
                    ncnnparam=str(out / f"{stem}.ncnn.param"), ncnnbin=str(out / f"{stem}.ncnn.bin"))
        x.numpy().astype("<f4").tofile(out / f"{stem}.in.f32")
        ref.numpy().astype("<f4").tofile(out / f"{stem}.ref.f32")
        manifest.append({"stem": stem, "model": name, "size": size, "shape": list(x.shape)})
    shutil.rmtree(out / "pnnx-work")
    (out / "models.json").write_text(json.dumps(manifest, indent=1))


def time_model(folder: Path, entry: dict, precision: str, runs: int, vulkan: bool = True,
               warmup: int = 20) -> dict:
    """Median ms per call of one converted model through ncnn (Vulkan unless ``vulkan`` is False)."""
    import ncnn
    import numpy as np

    stem = entry["stem"]
    x = np.fromfile(folder / f"{stem}.in.f32", dtype="<f4").reshape(entry["shape"])[0].copy()
    ref = np.fromfile(folder / f"{stem}.ref.f32", dtype="<f4")
    row = {"engine": "ncnn-vulkan" if vulkan else "ncnn-cpu", "model": f"{stem}_{precision}", "runs": runs}
    if vulkan and ncnn.get_gpu_count() == 0:
        return {**row, "error": "ncnn sees no Vulkan device (get_gpu_count() == 0)"}
    fp16 = precision == "fp16"
    net = ncnn.Net()
    net.opt.use_vulkan_compute = vulkan
    for flag in ("use_fp16_packed", "use_fp16_storage", "use_fp16_arithmetic"):
        setattr(net.opt, flag, fp16)
    net.opt.use_bf16_storage = net.opt.use_bf16_packed = False
    if net.load_param(str(folder / f"{stem}.ncnn.param")) or net.load_model(str(folder / f"{stem}.ncnn.bin")):
        return {**row, "error": "ncnn could not load the param/bin files"}
    times = []
    for i in range(warmup + runs):
        t0 = time.perf_counter()
        ex = net.create_extractor()
        ex.input("in0", ncnn.Mat(x))
        ret, out = ex.extract("out0")
        y = np.array(out)
        t1 = time.perf_counter()
        if ret:
            return {**row, "error": f"extract returned {ret}"}
        if i >= warmup:
            times.append((t1 - t0) * 1000)
    err = float(np.abs(y.reshape(-1) - ref).max() / np.abs(ref).max())
    if vulkan:
        row["device"] = ncnn.get_gpu_info(ncnn.get_default_gpu_index()).device_name()
    return {**row, "median_ms": statistics.median(times), "min_ms": min(times), "max_rel_err": err}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("export").add_argument("out", type=Path)
    t = sub.add_parser("time")
    t.add_argument("folder", type=Path)
    t.add_argument("--runs", type=int, default=200)
    t.add_argument("--warmup", type=int, default=20)
    t.add_argument("--precision", nargs="+", default=["fp32", "fp16"], choices=["fp32", "fp16"])
    t.add_argument("--models", nargs="+", help="stems from models.json (default: all)")
    t.add_argument("--cpu", action="store_true", help="ncnn's CPU path instead of Vulkan")
    args = p.parse_args()
    if args.cmd == "export":
        export(args.out)
        return 0
    for entry in json.loads((args.folder / "models.json").read_text()):
        if args.models and entry["stem"] not in args.models:
            continue
        for precision in args.precision:
            row = time_model(args.folder, entry, precision, args.runs, not args.cpu, args.warmup)
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
