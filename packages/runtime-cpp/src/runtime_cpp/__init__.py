"""runtime_cpp: C++ ExecuTorch backends (TOSA, Ethos-U, VGF, Vulkan) for the pip executorch runtime.

Importing this package loads every backend module that was built and registers it into the backend
registry of the wheel's ``libexecutorch.so``, the one ``executorch.runtime`` reads::

    import runtime_cpp                      # registers the backends
    from executorch.runtime import Runtime
    method = Runtime.get().load_program("model.pte").load_method("forward")

``runtime_cpp.backends()`` says which backends registered, which did not, and the command that fixes
each missing one.
"""

from __future__ import annotations

from ._registry import BackendStatus, backends, ensure_registered, registered_backend_ids
from .ethosu_work import OpWork, ethosu_work_record

__all__ = ["BackendStatus", "OpWork", "backends", "ensure_registered", "ethosu_work_record",
           "registered_backend_ids"]

ensure_registered()
