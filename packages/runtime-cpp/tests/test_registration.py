"""runtime_cpp registers its built backends into the registry the pip runtime reads."""

from __future__ import annotations

import json
from pathlib import Path

import runtime_cpp


def test_every_built_backend_registers_into_the_pip_runtime():
    statuses = runtime_cpp.backends()
    manifest = json.loads((Path(runtime_cpp.__file__).parent / "_build_manifest.json").read_text())
    assert [s.name for s in statuses] == [e["name"] for e in manifest]
    registered = set(runtime_cpp.registered_backend_ids())
    for status, entry in zip(statuses, manifest, strict=True):
        assert status.registered == entry["built"], str(status)
        if status.registered:
            assert set(status.backend_ids) <= registered
        else:  # a skipped backend says why and how to fix it
            assert status.reason and status.fix
    assert "TOSABackend" in registered


def test_registration_is_idempotent():
    before = runtime_cpp.registered_backend_ids()
    assert runtime_cpp.ensure_registered() == runtime_cpp.backends()
    assert runtime_cpp.registered_backend_ids() == before
