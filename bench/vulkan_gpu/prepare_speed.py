"""Stage the kernel-speed GPU run (issue 19) for the lent device machine.

    uv run python bench/vulkan_gpu/prepare_speed.py [OUT [STEM ...]]   # OUT default: out/vulkan-speed (git-ignored)

STEMs: stage only those CASES and CHECKS (a prefix matches: `check_` = every check); default all.

OUT gets run_speed.sh and bundle.tar.xz: the .pte files of speed_models.CASES (SPEED_CASES="a,b" picks
cases of CASES and NORM_CASES by stem; set it on the device too) and of the GEMM kernel
checks speed_models.CHECKS lowered with VulkanPartitioner (force_fp16 for the fp16 rows), seeded inputs and eager CPU fp32 reference outputs
(.in.f32 / .ref.f32; the GEMM's input is the runner's own pattern and its reference is computed on the
device), vkdg_runner, libexecutorch.so with the wheel's CPU kernel libraries, our runtime library,
speed_cuda.py + speed_models.py + cuda_timing.py for the CUDA baselines, the Debian Vulkan loader.
On the device machine: `bash OUT/run_speed.sh` with OUT carried (bench/results/gpu/README.md).
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

from arm_tosa_core import example_models
from arm_tosa_core.environ import environ_set
from vulkan_delegate import VulkanPartitioner
from vulkan_delegate.ops import reduce as reduce_ops

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(Path(example_models.__file__).parent))
import speed_models  # noqa: E402
from staging import stage_runtime  # noqa: E402


def lowering_env(stem: str):
    """The environment speed_models.LOWERING_ENV gives this stem's lowering (none: unchanged)."""
    return environ_set(speed_models.LOWERING_ENV.get(stem, {}))


def stage(work: Path, only: list[str]) -> None:
    meta = []
    picked = lambda stem: not only or any(stem.startswith(o) for o in only)  # noqa: E731
    for stem, name, batch, fp16 in filter(lambda c: picked(c[0]), speed_models.CASES):
        model, x = speed_models.build(name, batch)
        ep = torch.export.export(model, (x,))
        wide_min = reduce_ops.NORM_WIDE_MIN
        if name.endswith("_lanes64"):  # the A/B: every norm row on the 64-lane norm_row
            reduce_ops.NORM_WIDE_MIN = 1 << 62
        try:
            with lowering_env(stem):
                edge = to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner({"force_fp16": fp16})])
        finally:
            reduce_ops.NORM_WIDE_MIN = wide_min
        (work / f"{stem}.pte").write_bytes(edge.to_executorch().buffer)
        if name != "gemm":
            with torch.no_grad():
                ref = model(x)
            if name not in speed_models.ZOO_CASES:  # (those read the runner's pattern)
                x.contiguous().numpy().tofile(work / f"{stem}.in.f32")
            ref.contiguous().numpy().tofile(work / f"{stem}.ref.f32")
        meta.append({"stem": stem, "model": name, "batch": batch, "fp16": fp16, "shape": list(x.shape)})
        print(stem, (work / f"{stem}.pte").stat().st_size, flush=True)
    for stem, kind, m, k, n, fp16 in filter(lambda c: picked(c[0]), speed_models.CHECKS):  # ref. and input on the device
        model, x = speed_models.build_check(kind, m, k, n)
        ep = torch.export.export(model, (x,))
        with lowering_env(stem):
            edge = to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner({"force_fp16": fp16})])
        (work / f"{stem}.pte").write_bytes(edge.to_executorch().buffer)
        meta.append({"stem": stem, "model": kind, "batch": 1, "fp16": fp16, "shape": list(x.shape)})
        print(stem, (work / f"{stem}.pte").stat().st_size, flush=True)
    (work / "cases.json").write_text(json.dumps(meta))
    stage_runtime(work)
    shutil.copy(example_models.__file__, work / "example_models.py")
    for f in ("speed_cuda.py", "speed_models.py", "cuda_timing.py", "zoo_models.py"):
        shutil.copy(HERE / f, work)


def main(out: Path, only: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for f in ("run_speed.sh", "device_env.sh"):
        shutil.copy(HERE / f, out)
    bundle = out / "bundle.tar.xz"  # gzip inside: xz took longer than the lowering on a shared 2-core host,
    with tempfile.TemporaryDirectory() as tmp:  # and the device's tarfile reads either
        stage(Path(tmp), only)
        with tarfile.open(bundle, "w:gz", compresslevel=1) as tar:
            tar.add(tmp, arcname=".")
    print(bundle, bundle.stat().st_size)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "out/vulkan-speed").resolve(), sys.argv[2:])
