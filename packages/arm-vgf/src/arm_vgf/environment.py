"""Everything the VGF flow needs from its environment, found and set up by the package.

- The ML SDK tools come from their wheels: `model-converter` (ai-ml-sdk-model-converter), the
  scenario runner (ai-ml-sdk-scenario-runner) and the emulation layers
  (ai-ml-emulation-layer-for-vulkan), which provide VK_ARM_tensors / VK_ARM_data_graph on any
  Vulkan 1.3 device (lavapipe on CPU machines).
- Debian's Vulkan loader (1.3.239) stacks explicit layers in directory order, not in
  VK_INSTANCE_LAYERS order; with both manifests in the wheel's single folder the graph layer ends
  up below the tensor layer and vkCreateDevice fails ("requires extension: VK_ARM_tensors"). So
  each manifest is copied into its own folder under the cache dir, with an absolute
  `library_path`, and the Graph folder goes first in VK_LAYER_PATH.
- The Vulkan loader and driver are system packages; their absence is reported with the apt command.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from arm_tosa_core.environ import environ_set
from arm_vgf.vulkan_probe import VulkanDevice, VulkanProbeError, load_loader, probe_devices

LAYER_NAMES = ("VK_LAYER_ML_Graph_Emulation", "VK_LAYER_ML_Tensor_Emulation")
# Manifest file stems in the wheel, in the order the loader must see them (Graph above Tensor).
_LAYER_STEMS = ("VkLayer_Graph", "VkLayer_Tensor")
VULKAN_RUNTIME_PACKAGES = ("mesa-vulkan-drivers", "libvulkan1", "vulkan-tools")
APT_INSTALL_COMMAND = "apt-get install -y " + " ".join(VULKAN_RUNTIME_PACKAGES)
_WHEELS = {
    "model_converter": "ai-ml-sdk-model-converter",
    "scenario_runner": "ai-ml-sdk-scenario-runner",
    "emulation_layer": "ai-ml-emulation-layer-for-vulkan",
    "vgf_lib": "ai-ml-sdk-vgf-library",
}


class VulkanEnvironmentError(RuntimeError):
    """A tool, layer, loader or device the VGF flow needs is missing; the message says the fix."""


def _wheel_fix(module: str) -> str:
    wheel = _WHEELS[module]
    return f"install the `{wheel}` wheel (it is a dependency of arm-vgf: run `uv sync`)"


def _package_dir(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise VulkanEnvironmentError(f"Python package `{module}` not found: {_wheel_fix(module)}")
    return Path(next(iter(spec.submodule_search_locations)))


def _wheel_binary(module: str, name: str) -> Path:
    path = _package_dir(module) / "binaries" / "bin" / name
    if not path.is_file() or not os.access(path, os.X_OK):
        raise VulkanEnvironmentError(f"{path} is missing or not executable: {_wheel_fix(module)}")
    return path


def find_model_converter() -> Path:
    """Path of the `model-converter` binary shipped in the ai-ml-sdk-model-converter wheel."""
    return _wheel_binary("model_converter", "model-converter")


def find_scenario_runner() -> Path:
    """Path of the `scenario-runner` CLI binary shipped in the ai-ml-sdk-scenario-runner wheel."""
    return _wheel_binary("scenario_runner", "scenario-runner")


def find_vgf_dump() -> Path:
    """Path of the `vgf_dump` binary shipped in the ai-ml-sdk-vgf-library wheel."""
    return _wheel_binary("vgf_lib", "vgf_dump")


@functools.cache
def model_converter_version() -> str:
    """Version reported by `model-converter --version` (a JSON document with a `version` key)."""
    out = subprocess.run(
        [str(find_model_converter()), "--version"], capture_output=True, text=True, check=True
    ).stdout
    try:
        return str(json.loads(out)["version"])
    except (ValueError, KeyError):
        return out.strip()


def _emulation_layer_deploy() -> Path:
    deploy = _package_dir("emulation_layer") / "deploy"
    for stem in _LAYER_STEMS:
        if not (deploy / "lib" / f"lib{stem}.so").is_file():
            raise VulkanEnvironmentError(
                f"emulation layer library lib{stem}.so missing under {deploy}: "
                + _wheel_fix("emulation_layer")
            )
    return deploy


def cache_dir() -> Path:
    """Root of arm-vgf's cache: $ARM_VGF_CACHE_DIR, else $XDG_CACHE_HOME/arm-vgf, else ~/.cache."""
    if os.environ.get("ARM_VGF_CACHE_DIR"):
        return Path(os.environ["ARM_VGF_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "arm-vgf"


def _write_if_changed(path: Path, text: str) -> None:
    if path.is_file() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write-then-rename so concurrent processes (parallel test workers) never read half a file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


@functools.cache
def layer_manifest_dirs() -> tuple[Path, Path]:
    """Create (once) and return the Graph and Tensor layer manifest folders, in loader order.

    Layout: <cache>/layers/<version>/<hash of the wheel's lib dir>/{graph,tensor}/VkLayer_*.json.
    The hash keeps two virtual environments with the same wheel version from overwriting each
    other's absolute `library_path`.
    """
    deploy = _emulation_layer_deploy()
    version = importlib.metadata.version(_WHEELS["emulation_layer"])
    lib_dir = (deploy / "lib").resolve()
    digest = hashlib.sha256(str(lib_dir).encode()).hexdigest()[:12]
    root = cache_dir() / "layers" / version / digest
    dirs = []
    for stem in _LAYER_STEMS:
        manifest = json.loads(
            (deploy / "share" / "vulkan" / "explicit_layer.d" / f"{stem}.json").read_text()
        )
        manifest["layer"]["library_path"] = str(lib_dir / f"lib{stem}.so")
        folder = root / stem.removeprefix("VkLayer_").lower()
        _write_if_changed(folder / f"{stem}.json", json.dumps(manifest, indent=2) + "\n")
        dirs.append(folder)
    return dirs[0], dirs[1]


def _holds_our_layers(entry: str) -> bool:
    return any((Path(entry) / f"{stem}.json").is_file() for stem in _LAYER_STEMS)


def vulkan_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The VK_* variables that make the loader stack the emulation layers correctly.

    Existing entries of `base` (default: os.environ) are kept after ours, except folders that
    hold another copy of the two manifests (e.g. the wheel's own folder), which would break the
    ordering fix.
    """
    base = dict(os.environ) if base is None else base
    graph_dir, tensor_dir = layer_manifest_dirs()
    ours = [str(graph_dir), str(tensor_dir)]
    other_paths = [
        p
        for p in base.get("VK_LAYER_PATH", "").split(os.pathsep)
        if p and p not in ours and not _holds_our_layers(p)
    ]
    other_layers = [
        name
        for name in base.get("VK_INSTANCE_LAYERS", "").split(os.pathsep)
        if name and name not in LAYER_NAMES
    ]
    return {
        "VK_LAYER_PATH": os.pathsep.join(ours + other_paths),
        "VK_INSTANCE_LAYERS": os.pathsep.join(list(LAYER_NAMES) + other_layers),
    }


def apply_vulkan_env() -> dict[str, str]:
    """Set the emulation-layer variables in os.environ for the rest of the process; return them.

    Prefer `layer_environment()`, which scopes them: other Vulkan users in the same process
    (e.g. a plain compute runtime) then do not get the emulation layers stacked on them.
    """
    env = vulkan_env()
    os.environ.update(env)
    return env


@contextlib.contextmanager
def layer_environment() -> Iterator[dict[str, str]]:
    """Set the emulation-layer variables while the block runs, then restore os.environ.

    The loader reads them when an instance is created (it rescans layers for every instance),
    so create Vulkan instances inside the block; objects created there keep working after it.
    """
    with environ_set(vulkan_env()) as env:
        yield env


def _loader_path() -> str | None:
    """Path of the loaded libvulkan (from /proc/self/maps), or None when it cannot be loaded."""
    try:
        load_loader()
    except VulkanProbeError:
        return None
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            if "libvulkan.so" in line:
                return line.split()[-1]
    except OSError:
        pass
    return "libvulkan.so.1"


@functools.cache
def require_ml_device() -> VulkanDevice:
    """Return the first device that runs VK_ARM_data_graph through the emulation layers.

    Raises VulkanEnvironmentError naming the fix when the loader, driver or layers are missing.
    Cached: the in-process loader cannot be reconfigured after the first instance anyway.
    """
    report = validate_environment()
    if report.ml_device is None:
        raise VulkanEnvironmentError(f"the Vulkan environment is not usable for VGF:\n{report}")
    return report.ml_device


@dataclass
class EnvironmentReport:
    """What the VGF flow found: tools, layers, loader and devices, and how to fix what is missing."""

    model_converter: Path | None = None
    model_converter_version: str | None = None
    emulation_layer_version: str | None = None
    layer_manifest_dirs: tuple[Path, ...] = ()
    scenario_runner: Path | None = None
    scenario_runner_python: bool = False
    vulkan_loader: str | None = None
    vulkan_devices: tuple[VulkanDevice, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)  # item -> how to fix it

    @property
    def ml_device(self) -> VulkanDevice | None:
        """First device on which a VK_ARM_tensors + VK_ARM_data_graph device could be created."""
        return next((d for d in self.vulkan_devices if d.ml_device_error is None), None)

    @property
    def vulkan_device(self) -> str | None:
        """Name of the device VGF runs on (else of the first device seen)."""
        dev = self.ml_device or next(iter(self.vulkan_devices), None)
        return dev.name if dev else None

    @property
    def vulkan_api_version(self) -> str | None:
        """Vulkan API version of that device."""
        dev = self.ml_device or next(iter(self.vulkan_devices), None)
        return dev.api_version if dev else None

    @property
    def ok(self) -> bool:
        """True when every item was found and a device runs the ML extensions."""
        return not self.missing

    @property
    def present(self) -> dict[str, str]:
        """Found items with their details."""
        items = {
            "model converter": self.model_converter
            and f"{self.model_converter} (version {self.model_converter_version})",
            "emulation layers": self.layer_manifest_dirs
            and f"{self.emulation_layer_version}: " + ", ".join(map(str, self.layer_manifest_dirs)),
            "scenario runner": self.scenario_runner
            and f"{self.scenario_runner} (Python API: {'yes' if self.scenario_runner_python else 'no'})",
            "Vulkan loader": self.vulkan_loader,
        }
        for dev in self.vulkan_devices:
            ml = "ML extensions OK" if dev.ml_device_error is None else dev.ml_device_error
            items[f"Vulkan device {dev.name}"] = (
                f"Vulkan {dev.api_version}, {dev.device_type}, {ml}"
            )
        return {k: str(v) for k, v in items.items() if v}

    def __str__(self) -> str:
        lines = [f"arm-vgf environment: {'OK' if self.ok else 'INCOMPLETE'}"]
        lines += [f"  [ok]      {k}: {v}" for k, v in self.present.items()]
        lines += [f"  [missing] {k}: {v}" for k, v in self.missing.items()]
        if self.env:
            lines += [f"  env {k}={v}" for k, v in self.env.items()]
        return "\n".join(lines)


def validate_environment() -> EnvironmentReport:
    """Check every piece the VGF flow needs (writing the layer manifests); never raise.

    The device probe runs inside `layer_environment()`; os.environ is left as it was.
    """
    rep = EnvironmentReport()
    try:
        rep.model_converter = find_model_converter()
        rep.model_converter_version = model_converter_version()
    except (VulkanEnvironmentError, subprocess.CalledProcessError, OSError) as exc:
        rep.missing["model converter"] = str(exc)
    try:
        rep.scenario_runner = find_scenario_runner()
        rep.scenario_runner_python = importlib.util.find_spec("scenario_runner_py") is not None
    except VulkanEnvironmentError as exc:
        rep.missing["scenario runner"] = str(exc)
    try:
        rep.layer_manifest_dirs = layer_manifest_dirs()
        rep.emulation_layer_version = importlib.metadata.version(_WHEELS["emulation_layer"])
        rep.env = vulkan_env()
    except (VulkanEnvironmentError, OSError, ValueError, KeyError) as exc:
        rep.missing["emulation layers"] = str(exc)
    rep.vulkan_loader = _loader_path()
    if rep.vulkan_loader is None:
        rep.missing["Vulkan loader"] = f"libvulkan.so.1 not found: run `{APT_INSTALL_COMMAND}`"
        return rep
    try:
        if rep.env:
            with layer_environment():
                rep.vulkan_devices = tuple(probe_devices())
        else:
            rep.vulkan_devices = tuple(probe_devices())
    except VulkanProbeError as exc:
        rep.missing["Vulkan device"] = f"{exc}: run `{APT_INSTALL_COMMAND}` (lavapipe CPU driver)"
        return rep
    if rep.ml_device is None and "emulation layers" not in rep.missing:
        errors = "; ".join(f"{d.name}: {d.ml_device_error}" for d in rep.vulkan_devices)
        rep.missing["VK_ARM_data_graph device"] = (
            f"no device accepts the ML extensions through the emulation layers ({errors}); "
            f"check that nothing else sets VK_LAYER_PATH/VK_INSTANCE_LAYERS "
            f"(in use: {rep.env}) and that the Graph layer folder comes first"
        )
    return rep
