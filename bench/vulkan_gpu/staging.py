"""What every staged GPU bundle carries besides its models (prepare_speed.py, prepare_zoo.py,
prepare_decode.py): the runner(s), libexecutorch.so with the wheel's CPU kernel libraries, our runtime
library and the Debian Vulkan loader packages (device_env.sh, staged beside each run script,
unpacks them on the device machine)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEBS = ["libvulkan1", "libegl1", "libglvnd0", "libopengl0", "libgl1", "libglx0", "libgles2"]


def stage_runtime(work: Path, runners: dict[str, str] | None = None) -> None:
    """Into `work`: each runner built from its source (name -> .cpp; default vkdg_runner from runner.cpp),
    the executorch libraries, libvulkan_delegate_runtime.so (built if stale) and debs/."""
    import executorch

    from vulkan_delegate.runtime import build_runtime

    lib = Path(list(executorch.__path__)[0]) / "lib"
    for so in ["libexecutorch.so", "libexecutorch_threadpool.so", *[p.name for p in lib.glob("libexecutorch_kernels_*.so")]]:
        shutil.copy(lib / so, work)
    shutil.copy(build_runtime(), work)
    for name, source in (runners or {"vkdg_runner": "runner.cpp"}).items():
        subprocess.run(["bash", str(HERE / "build_runner.sh"), str(work / name), source], check=True)
    debs = work / "debs"
    debs.mkdir(exist_ok=True)
    subprocess.run(["apt-get", "download", *DEBS], cwd=debs, check=True)
