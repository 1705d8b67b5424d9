"""Sessions: one test session per package, `lint` and `bench`. Plain `nox` runs lint and every test session.

All sessions share the workspace environment that `uv sync --frozen --all-packages` builds from uv.lock,
so a session costs seconds, not a fresh torch install.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.sessions = ["lint", "test-core", "test-quantizer", "test-ethosu", "test-vgf"]
nox.options.default_venv_backend = "none"

VULKAN_PACKAGES = ["mesa-vulkan-drivers", "libvulkan1", "vulkan-tools"]


def _sync(session: nox.Session) -> None:
    session.run("uv", "sync", "--frozen", external=True)


def _pytest(session: nox.Session, package: str) -> None:
    _sync(session)
    # pytest exits 5 when it collects no test: nox treats that as a failure, as it should.
    # -n auto: the 2-core CI machine runs two test processes; exir's per-compile cost dominates.
    session.run("uv", "run", "--frozen", "--no-sync", "pytest", "-n", "auto", "--dist", "loadfile",
                f"packages/{package}/tests", *session.posargs, external=True)


@nox.session(name="test-core")
def test_core(session: nox.Session) -> None:
    """arm-tosa-core: lowering, op tables, models, reference-model numerics."""
    _pytest(session, "arm-tosa-core")


@nox.session(name="test-quantizer")
def test_quantizer(session: nox.Session) -> None:
    """arm-quantizer: PT2E quantizer and the TOSA INT profile."""
    _pytest(session, "arm-quantizer")


@nox.session(name="test-ethosu")
def test_ethosu(session: nox.Session) -> None:
    """arm-ethosu: vela compile, bin-stream payload, reports, CLI."""
    _pytest(session, "arm-ethosu")


@nox.session(name="test-vgf")
def test_vgf(session: nox.Session) -> None:
    """arm-vgf: installs the Debian Vulkan packages (lavapipe) when missing, then runs the VGF tests."""
    sys.path.insert(0, str(ROOT / "tools"))
    from system_packages import ensure_debian_packages

    ensure_debian_packages(VULKAN_PACKAGES)
    _pytest(session, "arm-vgf")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over every package, the benchmark and this file."""
    _sync(session)
    session.run("uv", "run", "--frozen", "--no-sync", "ruff", "check", "packages", "bench", "tools",
                "noxfile.py", external=True)


@nox.session
def bench(session: nox.Session) -> None:
    """Compile-time, size and accuracy benchmark against upstream; prints a table, writes bench/results/."""
    _sync(session)
    session.run("uv", "run", "--frozen", "--no-sync", "python", "bench/run_bench.py", *session.posargs,
                external=True)
    # mixed precision (issue 11): SQNR and cycles of all-int8 / --target-sqnr / all-a16w8
    session.run("uv", "run", "--frozen", "--no-sync", "python", "bench/bench_mixed_precision.py",
                external=True)
