"""Load the built backend modules (``_backend_<name>.so``) and register them, once per process.

The build writes ``_build_manifest.json``: one entry per backend subfolder, built or skipped (with
the reason and the fixing command). Each built module exports ``runtime_cpp_register_<name>()``,
which returns the ExecuTorch ``Error`` code of its registration.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

# RUNTIME_CPP_MODULE_DIR: load the modules and manifest from another build (the ASan session's).
_HERE = Path(os.environ.get("RUNTIME_CPP_MODULE_DIR") or Path(__file__).resolve().parent)
_MANIFEST = _HERE / "_build_manifest.json"
_REBUILD = "uv sync --reinstall-package runtime-cpp"
_lock = threading.Lock()
_statuses: list[BackendStatus] | None = None
_modules: dict[str, ctypes.CDLL] = {}  # keeps each loaded module alive for the process


@dataclass(frozen=True)
class BackendStatus:
    """What happened to one backend subfolder of runtime-cpp in this process."""

    name: str
    backend_ids: tuple[str, ...]
    registered: bool
    reason: str = ""  # why not registered (empty when registered)
    fix: str = ""  # the command that fixes it (empty when registered)
    extra: dict = field(default_factory=dict)

    def __str__(self) -> str:
        ids = ", ".join(self.backend_ids)
        if self.registered:
            return f"{self.name}: registered ({ids})"
        return f"{self.name}: NOT registered ({ids}): {self.reason}; fix: {self.fix}"


def _load_runtime() -> None:
    # The pip runtime's extension loads the wheel's libexecutorch.so first; our modules' rpath
    # resolves to that same file, so registrations land in the registry it reads.
    import executorch.extension.pybindings.portable_lib  # noqa: F401

    # Our INT programs keep quantize/dequantize at their float boundary on the CPU: this registers
    # the quantized out-variant kernels into the same runtime.
    import executorch.kernels.quantized  # noqa: F401


def _register(entry: dict) -> BackendStatus:
    name = entry["name"]
    ids = tuple(entry["backend_ids"])
    if not entry["built"]:
        return BackendStatus(name, ids, False, f"not built: {entry['reason']}", entry["fix"])
    path = _HERE / f"{entry['module']}.so"
    try:
        lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    except OSError as exc:
        return BackendStatus(name, ids, False, f"{path.name} does not load: {exc}", _REBUILD)
    fn = getattr(lib, f"runtime_cpp_register_{name}", None)
    if fn is None:
        return BackendStatus(name, ids, False,
                             f"{path.name} lacks runtime_cpp_register_{name}() (see README)", _REBUILD)
    fn.restype = ctypes.c_int
    code = fn()
    _modules[name] = lib
    if code != 0:
        return BackendStatus(name, ids, False, f"register_backend returned error 0x{code:x} (the "
                             "registry is full or another library holds the id)", _REBUILD)
    return BackendStatus(name, ids, True)


def ensure_registered() -> list[BackendStatus]:
    """Load and register every built backend (idempotent); return the statuses."""
    global _statuses
    with _lock:
        if _statuses is None:
            if not _MANIFEST.is_file():
                _statuses = [BackendStatus("runtime-cpp", (), False,
                                           f"no build manifest at {_MANIFEST}: the C++ part was not built",
                                           _REBUILD)]
            else:
                _load_runtime()
                _statuses = [_register(e) for e in json.loads(_MANIFEST.read_text())]
        return list(_statuses)


def backends() -> list[BackendStatus]:
    """One status per backend subfolder: registered, or not with the reason and the fixing command."""
    return ensure_registered()


def registered_backend_ids() -> list[str]:
    """Every backend id in the pip runtime's registry (ours and the wheel's own)."""
    from executorch.extension.pybindings.portable_lib import _get_registered_backend_names

    return list(_get_registered_backend_names())


def module_handle(name: str) -> ctypes.CDLL | None:
    """The loaded module of backend subfolder ``name`` (for its C entry points, e.g. fuzz hooks)."""
    ensure_registered()
    return _modules.get(name)
