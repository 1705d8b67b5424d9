"""The environment report, the layer-manifest layout and the loader ordering fix."""

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arm_vgf import environment, vulkan_probe
from arm_vgf.environment import LAYER_NAMES, layer_environment, validate_environment, vulkan_env

_VK_VARS = ("VK_LAYER_PATH", "VK_INSTANCE_LAYERS")


@pytest.fixture(scope="module")
def report():
    before = {k: os.environ.get(k) for k in _VK_VARS}
    rep = validate_environment()
    # The probe scoped the layer variables: other Vulkan users in this process are unaffected.
    assert {k: os.environ.get(k) for k in _VK_VARS} == before
    return rep


def test_report_lists_every_item(report):
    assert report.ok, str(report)
    assert report.missing == {}
    assert report.model_converter.name == "model-converter"
    assert report.model_converter_version == importlib.metadata.version("ai-ml-sdk-model-converter")
    assert report.scenario_runner.name == "scenario-runner"
    assert report.scenario_runner_python
    assert report.emulation_layer_version == importlib.metadata.version(
        "ai-ml-emulation-layer-for-vulkan"
    )
    assert "libvulkan.so" in report.vulkan_loader
    assert report.vulkan_device
    major, minor, _ = (int(p) for p in report.vulkan_api_version.split("."))
    assert (major, minor) >= (1, 3)
    assert report.ml_device.ml_extensions == ("VK_ARM_tensors", "VK_ARM_data_graph")
    text = str(report)
    assert "arm-vgf environment: OK" in text
    assert report.vulkan_device in text and "[missing]" not in text


def test_each_manifest_in_its_own_folder_graph_first(report):
    graph_dir, tensor_dir = report.layer_manifest_dirs
    assert graph_dir != tensor_dir
    for folder, layer in zip((graph_dir, tensor_dir), LAYER_NAMES, strict=True):
        (manifest,) = folder.glob("*.json")
        data = json.loads(manifest.read_text())
        assert data["layer"]["name"] == layer
        lib = Path(data["layer"]["library_path"])
        assert lib.is_absolute() and lib.is_file()
    assert report.env["VK_LAYER_PATH"].split(os.pathsep)[:2] == [str(graph_dir), str(tensor_dir)]
    assert report.env["VK_INSTANCE_LAYERS"] == ":".join(LAYER_NAMES)


def test_layer_environment_sets_then_restores(monkeypatch):
    monkeypatch.setenv("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation")
    monkeypatch.delenv("VK_LAYER_PATH", raising=False)
    with layer_environment() as env:
        assert os.environ["VK_LAYER_PATH"] == env["VK_LAYER_PATH"]
        assert os.environ["VK_INSTANCE_LAYERS"].startswith(":".join(LAYER_NAMES))
    assert os.environ["VK_INSTANCE_LAYERS"] == "VK_LAYER_KHRONOS_validation"
    assert "VK_LAYER_PATH" not in os.environ


def test_vulkan_env_drops_other_copies_of_the_layers_and_keeps_the_rest(report, tmp_path):
    wheel_dir = environment._emulation_layer_deploy() / "share" / "vulkan" / "explicit_layer.d"
    other = tmp_path / "other_layers"
    env = vulkan_env(
        {
            "VK_LAYER_PATH": f"{wheel_dir}{os.pathsep}{other}",
            "VK_INSTANCE_LAYERS": f"VK_LAYER_KHRONOS_validation:{LAYER_NAMES[1]}",
        }
    )
    graph_dir, tensor_dir = report.layer_manifest_dirs
    assert env["VK_LAYER_PATH"].split(os.pathsep) == [str(graph_dir), str(tensor_dir), str(other)]
    assert env["VK_INSTANCE_LAYERS"].split(":") == [*LAYER_NAMES, "VK_LAYER_KHRONOS_validation"]


_PROBE = "from arm_vgf.vulkan_probe import probe_devices; print(probe_devices()[0].ml_device_error)"


@pytest.mark.parametrize("graph_first", [True, False])
def test_probe_detects_the_debian_layer_order_problem(report, graph_first):
    # Fresh processes: the loader reads the variables when an instance is created.
    graph_dir, tensor_dir = report.layer_manifest_dirs
    order = [graph_dir, tensor_dir] if graph_first else [tensor_dir, graph_dir]
    env = {
        **os.environ,
        "VK_LAYER_PATH": os.pathsep.join(map(str, order)),
        "VK_INSTANCE_LAYERS": ":".join(LAYER_NAMES),
    }
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    if graph_first:
        assert out == "None"
    else:
        assert "vkCreateDevice" in out and "failed" in out


def test_missing_loader_names_the_debian_packages(monkeypatch):
    monkeypatch.setattr(vulkan_probe, "LOADER_SONAME", "libvulkan-not-installed.so.1")
    rep = validate_environment()
    assert not rep.ok
    assert rep.vulkan_loader is None
    fix = rep.missing["Vulkan loader"]
    assert "apt-get install -y mesa-vulkan-drivers libvulkan1 vulkan-tools" in fix
    assert "[missing] Vulkan loader" in str(rep)
