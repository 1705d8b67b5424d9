"""Stage the kernel-speed GPU run (issue 19) for the lent device machine.

    uv run python bench/vulkan_gpu/prepare_speed.py [OUT]     # OUT default: out/vulkan-speed (git-ignored)

OUT gets run_speed.sh and bundle.tar.xz: the .pte files of speed_models.CASES and of the GEMM kernel
checks speed_models.CHECKS lowered with VulkanPartitioner (force_fp16 for the fp16 rows), seeded inputs and eager CPU fp32 reference outputs
(.in.f32 / .ref.f32; the GEMM's input is the runner's own pattern and its reference is computed on the
device), vkdg_runner, libexecutorch.so with the wheel's CPU kernel libraries, our runtime library,
speed_cuda.py + speed_models.py + example_models.py for the CUDA baselines, the Debian Vulkan loader.
On the device machine: `bash OUT/run_speed.sh` with OUT carried (bench/results/gpu/README.md).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import torch
from executorch.exir import to_edge_transform_and_lower

from arm_tosa_core import example_models
from vulkan_delegate import VulkanPartitioner
from vulkan_delegate.runtime import build_runtime

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(Path(example_models.__file__).parent))
import speed_models  # noqa: E402

DEBS = ["libvulkan1", "libegl1", "libglvnd0", "libopengl0", "libgl1", "libglx0", "libgles2"]


def stage(work: Path) -> None:
    meta = []
    for stem, name, batch, fp16 in speed_models.CASES:
        model, x = speed_models.build(name, batch)
        ep = torch.export.export(model, (x,))
        edge = to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner({"force_fp16": fp16})])
        (work / f"{stem}.pte").write_bytes(edge.to_executorch().buffer)
        if name != "gemm":
            with torch.no_grad():
                ref = model(x)
            x.contiguous().numpy().tofile(work / f"{stem}.in.f32")
            ref.contiguous().numpy().tofile(work / f"{stem}.ref.f32")
        meta.append({"stem": stem, "model": name, "batch": batch, "fp16": fp16, "shape": list(x.shape)})
        print(stem, (work / f"{stem}.pte").stat().st_size, flush=True)
    for stem, kind, m, k, n, fp16 in speed_models.CHECKS:  # reference and input made on the device
        model, x = speed_models.build_check(kind, m, k, n)
        ep = torch.export.export(model, (x,))
        edge = to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner({"force_fp16": fp16})])
        (work / f"{stem}.pte").write_bytes(edge.to_executorch().buffer)
        meta.append({"stem": stem, "model": kind, "batch": 1, "fp16": fp16, "shape": list(x.shape)})
        print(stem, (work / f"{stem}.pte").stat().st_size, flush=True)
    (work / "cases.json").write_text(json.dumps(meta))
    import executorch

    lib = Path(list(executorch.__path__)[0]) / "lib"
    for so in ["libexecutorch.so", "libexecutorch_threadpool.so", *[p.name for p in lib.glob("libexecutorch_kernels_*.so")]]:
        shutil.copy(lib / so, work)
    shutil.copy(build_runtime(), work)
    subprocess.run(["bash", str(HERE / "build_runner.sh"), str(work / "vkdg_runner")], check=True)
    shutil.copy(example_models.__file__, work / "example_models.py")
    for f in ("speed_cuda.py", "speed_models.py", "eager_cuda.py"):
        shutil.copy(HERE / f, work)
    debs = work / "debs"
    debs.mkdir()
    subprocess.run(["apt-get", "download", *DEBS], cwd=debs, check=True)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "run_speed.sh", out)
    bundle = out / "bundle.tar.xz"  # gzip inside: xz took longer than the lowering on a shared 2-core host,
    with tempfile.TemporaryDirectory() as tmp:  # and the device's tarfile reads either
        stage(Path(tmp))
        with tarfile.open(bundle, "w:gz", compresslevel=1) as tar:
            tar.add(tmp, arcname=".")
    print(bundle, bundle.stat().st_size)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "out/vulkan-speed").resolve())
