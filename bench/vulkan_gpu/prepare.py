"""Stage the GPU benchmark for the lent device machine (torch 2.11, Python 3.12, no package registry).

    uv run python bench/vulkan_gpu/prepare.py [OUT]     # OUT default: out/vulkan-gpu (git-ignored)

OUT gets run_gpu.sh and bundle.tar.xz (xz because the carried tree is capped at 64 MiB). The bundle holds
the .pte files of MobileNetV2 (1x3x224x224) and the Llama-style block (8 and 128 tokens), FP32 and FP16,
lowered with VulkanPartitioner; the C++ runner, libexecutorch.so and our runtime library; ncnn_peer.py's
export (pnnx-converted ncnn models, seeded inputs and eager CPU fp32 reference outputs); the cp312
manylinux ncnn wheel, unpacked; the example-model source for the eager CUDA baseline; the Debian Vulkan loader.
On the device machine: `ROUNDS=3 bash OUT/run_gpu.sh` with OUT carried (see bench/results/gpu/README.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from executorch.exir import to_edge_transform_and_lower

from arm_tosa_core import example_models
from vulkan_delegate import VulkanPartitioner
from vulkan_delegate.runtime import build_runtime

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
sys.path.insert(0, str(BENCH))
import ncnn_peer  # noqa: E402

DEBS = ["libvulkan1", "libegl1", "libglvnd0", "libopengl0", "libgl1", "libglx0", "libgles2"]


def stage(work: Path) -> None:
    """Everything the device machine needs, unpacked, in ``work``."""
    for name, size in ncnn_peer.CASES:
        model, inputs = example_models.get_example(name).build(input_size=size)
        for fp16 in (False, True):  # a fresh export each time: lowering consumes the program's constants
            ep = torch.export.export(model, inputs)
            edge = to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner({"force_fp16": fp16})])
            path = work / f"{name}_{size}_{'fp16' if fp16 else 'fp32'}.pte"
            path.write_bytes(edge.to_executorch().buffer)
            print(path.name, path.stat().st_size)
    import executorch

    et = Path(list(executorch.__path__)[0])
    shutil.copy(et / "lib" / "libexecutorch.so", work)
    shutil.copy(build_runtime(), work)
    subprocess.run(["bash", str(HERE / "build_runner.sh"), str(work / "vkdg_runner")], check=True)
    shutil.copy(example_models.__file__, work / "example_models.py")
    for f in (HERE / "eager_cuda.py", HERE / "cuda_timing.py", BENCH / "ncnn_peer.py"):
        shutil.copy(f, work)
    env = ncnn_peer.tools_env()
    subprocess.run([sys.executable, str(BENCH / "ncnn_peer.py"), "export", str(work / "ncnn")], env=env,
                   check=True, stdout=subprocess.DEVNULL)
    # the cp312 manylinux ncnn wheel, unpacked (uv resolves for the device machine's platform and Python)
    subprocess.run(["uv", "pip", "install", "--quiet", "--no-deps", "--target", str(work / "site"),
                    "--python-platform", "x86_64-manylinux_2_28", "--python-version", "3.12",
                    f"ncnn=={ncnn_peer.NCNN_VERSION}"], check=True)
    debs = work / "debs"
    debs.mkdir()
    subprocess.run(["apt-get", "download", *DEBS], cwd=debs, check=True)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        stage(Path(tmp))
        subprocess.run(["tar", "-cJf", str(out / "bundle.tar.xz"), "-C", tmp, "."], check=True,
                       env={**os.environ, "XZ_OPT": "-6 -T2"})
    for f in ("run_gpu.sh", "device_env.sh"):
        shutil.copy(HERE / f, out)
    print(out / "bundle.tar.xz", (out / "bundle.tar.xz").stat().st_size)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "out/vulkan-gpu").resolve())
