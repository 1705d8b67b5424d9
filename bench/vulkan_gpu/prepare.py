"""Stage a GPU benchmark in <out> (default /work/main/out/vulkan-gpu): .pte files of MobileNetV2 (1x3x224x224)
and the Llama-style block (8 and 128 tokens), FP32 and FP16, lowered with VulkanPartitioner; the runner,
libexecutorch.so, our runtime library, the example-model source for the eager CUDA baseline, and the
Debian Vulkan loader. The device machine then runs run_gpu.sh (see README.md)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import torch
from executorch.exir import to_edge_transform_and_lower

from arm_tosa_core import example_models
from vulkan_delegate import VulkanPartitioner
from vulkan_delegate.runtime import build_runtime

HERE = Path(__file__).parent
CASES = [("mobilenet_v2", 224), ("llama_block", 8), ("llama_block", 128)]


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, size in CASES:
        model, inputs = example_models.get_example(name).build(input_size=size)
        for fp16 in (False, True):  # a fresh export each time: lowering consumes the program's constants
            ep = torch.export.export(model, inputs)
            edge = to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner({"force_fp16": fp16})])
            path = out / f"{name}_{size}_{'fp16' if fp16 else 'fp32'}.pte"
            path.write_bytes(edge.to_executorch().buffer)
            print(path, path.stat().st_size)
    import executorch

    et = Path(list(executorch.__path__)[0])
    shutil.copy(et / "lib" / "libexecutorch.so", out)
    shutil.copy(build_runtime(), out)
    subprocess.run(["bash", str(HERE / "build_runner.sh"), str(out / "vkdg_runner")], check=True)
    shutil.copy(example_models.__file__, out / "example_models.py")
    shutil.copy(HERE / "eager_cuda.py", out)
    shutil.copy(HERE / "run_gpu.sh", out)
    debs = out / "debs"
    debs.mkdir(exist_ok=True)
    if not list(debs.glob("libvulkan1*.deb")):
        subprocess.run(["apt-get", "download", "libvulkan1", "libegl1", "libglvnd0", "libopengl0", "libgl1", "libglx0", "libgles2"], cwd=debs, check=True)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/work/main/out/vulkan-gpu"))
