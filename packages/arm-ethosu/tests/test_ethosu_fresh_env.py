"""Installing only arm-ethosu (and what it pulls) into a fresh virtual environment gives a working
`arm-compile` that compiles the bundled MobileNetV2, and installs nothing of the VGF/Vulkan stack and
no C++ runtime: runtime-cpp (built with CMake at install time) is the `[runtime]` extra, so compiling
needs no C++ toolchain, and asking for host execution of a .pte says how to get it.

The environment is built by `uv sync --package arm-ethosu` from the workspace lock (non-editable,
so wheels built from the current sources are what runs), offline from uv's cache when it holds
everything. uv links files from its cache, so this takes seconds, not a multi-GB download.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
WORKSPACE_PACKAGES = ("arm-tosa-core", "arm-quantizer", "arm-ethosu")
FORBIDDEN = re.compile(r"^(ai-ml-sdk-.*|ai-ml-emulation-layer.*|.*vulkan.*|.*scenario-runner.*|arm-vgf|"
                       r"runtime-cpp|scikit-build-core|cmake|ai-edge-model-explorer.*)$")
INSTALL_HINT = 'pip install "arm-ethosu[runtime]"'


def _sync(venv: Path) -> str:
    """Build the environment; returns uv's log (it names every package it builds)."""
    uv = shutil.which("uv")
    assert uv, "uv is not on PATH: the workspace is managed with uv (https://docs.astral.sh/uv/)"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["UV_PROJECT_ENVIRONMENT"] = str(venv)
    cmd = [uv, "sync", "--frozen", "--package", "arm-ethosu", "--no-dev", "--no-editable"]
    # uv reuses a workspace package's built wheel until its pyproject.toml changes: rebuild ours
    for package in WORKSPACE_PACKAGES:
        cmd += ["--refresh-package", package]
    offline = subprocess.run([*cmd, "--offline"], cwd=ROOT, env=env, capture_output=True, text=True)
    if offline.returncode != 0:  # something is not in uv's cache yet: fetch it from the index
        online = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        assert online.returncode == 0, f"uv sync failed:\n{offline.stderr}\n{online.stderr}"
        return online.stderr
    return offline.stderr


@pytest.fixture(scope="module")
def synced(tmp_path_factory):
    path = tmp_path_factory.mktemp("fresh") / "venv"
    log = _sync(path)
    yield path, log
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def venv(synced):
    return synced[0]


def _python(venv: Path, code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "python"), "-c", code, *args], cwd=cwd, capture_output=True,
                          text=True,
                          env={k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")})


@pytest.fixture(scope="module")
def mobilenet(venv, tmp_path_factory):
    """`arm-compile mobilenet_v2` in the fresh environment: (folder, finished process)."""
    folder = tmp_path_factory.mktemp("mv2")
    # one interpreter start (torch + executorch imports dominate): import, then the CLI's main
    code = ("import sys, arm_ethosu; print('PACKAGE', arm_ethosu.__file__); "
            "from arm_tosa_core.compile_cli import main; sys.exit(main(sys.argv[1:]))")
    return folder, _python(venv, code, "mobilenet_v2", "--input-size", "32", "-o", "mv2.pte", cwd=folder)


def test_only_arm_ethosu_and_its_dependencies(synced):
    venv, log = synced
    listing = subprocess.run([shutil.which("uv"), "pip", "list", "--format", "json", "--python",
                              str(venv / "bin" / "python")], capture_output=True, text=True, check=True)
    names = {p["name"] for p in json.loads(listing.stdout)}
    assert {"arm-ethosu", "arm-tosa-core", "arm-quantizer", "ethos-u-vela", "tosa-tools"} <= names
    assert not [n for n in names if FORBIDDEN.match(n)], sorted(n for n in names if FORBIDDEN.match(n))
    # no C++ build: uv names every package it builds, and the runtime's module is nowhere
    assert "Built arm-ethosu" in log and "runtime-cpp" not in log and "runtime_cpp" not in log, log
    site = list((venv / "lib").glob("python3*/site-packages"))[0]
    assert not list(site.glob("runtime_cpp*"))
    script = (venv / "bin" / "arm-compile").read_text()
    assert script.startswith(f"#!{venv}") and "arm_tosa_core.compile_cli" in script


def test_arm_compile_mobilenet_v2_in_the_fresh_env(venv, mobilenet):
    tmp_path, proc = mobilenet
    assert proc.returncode == 0, proc.stderr[-3000:]
    package = proc.stdout.split("PACKAGE ", 1)[1].split("\n", 1)[0]
    assert package.startswith(str(venv)), package  # the installed wheel, not the workspace source
    assert (tmp_path / "mv2.pte").read_bytes()[4:6] == b"ET"
    report = json.loads((tmp_path / "mv2_report" / "report.json").read_text())
    (part,) = report["partitions"]
    assert part["target"] == "ethos-u55-128" and part["cpu_ops"] == 0 and part["cycles_npu"] > 0
    assert (tmp_path / "mv2_report" / "layers.png").is_file()
    assert "npu cycles" in proc.stdout and "max abs error vs the quantized PyTorch model: 0 " in proc.stdout
    assert "[6/6] verify" in proc.stderr and sys.executable != str(venv / "bin" / "python")
    # without the C++ runtime the verify step checks the lowered program, and says how to run the .pte
    assert "runtime-cpp (the C++ backends of the ExecuTorch runtime) is not installed" in proc.stdout
    assert INSTALL_HINT in proc.stdout


def test_host_execution_says_how_to_get_it(venv, mobilenet):
    folder, _ = mobilenet
    code = ("import torch; from arm_tosa_core import run_on_reference_model\n"
            "try:\n    run_on_reference_model('mv2.pte', torch.zeros(1, 3, 32, 32))\n"
            "except ImportError as exc:\n    print('REFUSED', type(exc).__name__, exc)\n")
    proc = _python(venv, code, cwd=folder)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "REFUSED MissingToolError" in proc.stdout and INSTALL_HINT in proc.stdout, proc.stdout
