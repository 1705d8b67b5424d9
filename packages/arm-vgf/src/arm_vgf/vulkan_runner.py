"""Run a VGF on a Vulkan device through the ML SDK scenario runner's Python API.

The scenario (Vulkan instance, device, tensors, data-graph pipeline) is built once per VGF and
cached, so repeated `run_vgf` calls on the same bytes only upload, dispatch and download.
The builder API (`ScenarioBuilder`) replaces the JSON scenario that `vgf_dump --scenario-template`
would write: one tensor per model input/output, bound at the slots the VGF's model sequence names.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from arm_vgf.environment import layer_environment, require_ml_device
from arm_vgf.vgf_file import VgfModel, VgfTensor, read_vgf

# numpy dtype name (as in vgf_file.VK_FORMATS) -> scenario_runner_py.Format member name.
_SCENARIO_FORMATS = {
    "int8": "R8Sint",
    "uint8": "R8Uint",
    "int16": "R16Sint",
    "uint16": "R16Uint",
    "float16": "R16Sfloat",
    "int32": "R32Sint",
    "uint32": "R32Uint",
    "float32": "R32Sfloat",
    "int64": "R64Sint",
    "bool": "R8BoolArm",
    "bfloat16": "R16Bfloat16Arm",
    "float8_e4m3fn": "R8Float8E4M3Arm",
    "float8_e5m2": "R8Float8E5M2Arm",
}
_CACHE_SIZE = 8


class VgfRunError(RuntimeError):
    """A VGF could not be prepared or run on the Vulkan device."""


def _scenario_module():
    require_ml_device()  # a clear error (with the fix) instead of "Cannot find queue index"
    import scenario_runner_py

    return scenario_runner_py


class VgfRunner:
    """A VGF prepared on the Vulkan device: build once, then `run` / `time` many times."""

    def __init__(self, vgf_bytes: bytes) -> None:
        sr = _scenario_module()
        self.model: VgfModel = read_vgf(vgf_bytes)
        builder = sr.ScenarioBuilder()
        with tempfile.TemporaryDirectory(prefix="arm-vgf-") as tmp:
            # VgfInfo only loads from a path; it reads the file at load_source time.
            path = Path(tmp) / "model.vgf"
            path.write_bytes(bytes(vgf_bytes))
            info = sr.VgfInfo()
            info.debug_name = "model"
            info.load_source(str(path))
        vgf_id = builder.add_vgf(info)
        self._inputs = [self._add_tensor(sr, builder, t) for t in self.model.inputs]
        self._outputs = [self._add_tensor(sr, builder, t) for t in self.model.outputs]
        dispatch = sr.DispatchVgfData(vgf_id)
        dispatch.bindings = [
            sr.TypedBinding(t.descriptor_set, t.binding, tid, sr.DescriptorType.TensorArm)
            for t, tid in zip(
                self.model.inputs + self.model.outputs, self._inputs + self._outputs, strict=True
            )
        ]
        builder.add_dispatch_vgf(dispatch)
        try:
            # The Vulkan instance is created here: the loader must see the layer variables.
            with layer_environment():
                self._scenario = builder.build()
        except RuntimeError as exc:
            raise VgfRunError(f"could not create the Vulkan scenario for this VGF: {exc}") from exc

    @staticmethod
    def _add_tensor(sr, builder, t: VgfTensor):
        fmt = _SCENARIO_FORMATS.get(t.dtype)
        if fmt is None:
            raise VgfRunError(
                f"VGF tensor {t.name} has format {t.vk_format}, which is not supported"
            )
        return builder.add_tensor(list(t.shape), getattr(sr.Format, fmt), debug_name=t.name)

    def _upload(self, inputs: Sequence[np.ndarray]) -> None:
        expected = self.model.inputs
        if len(inputs) != len(expected):
            raise ValueError(
                f"the VGF takes {len(expected)} inputs "
                f"({', '.join(f'{t.name}{list(t.shape)}:{t.dtype}' for t in expected)}), "
                f"got {len(inputs)}"
            )
        for t, tid, x in zip(expected, self._inputs, inputs, strict=True):
            arr = np.asarray(x)
            want = t.numpy_dtype()
            if arr.dtype != want:
                raise TypeError(
                    f"input {t.index} ({t.name}) must be {want}, got {arr.dtype}: "
                    f"convert it with .astype(np.{want})"
                )
            if tuple(arr.shape) != t.shape:
                raise ValueError(
                    f"input {t.index} ({t.name}) must have shape {list(t.shape)}, "
                    f"got {list(arr.shape)} (read_vgf(vgf).inputs lists the shapes the VGF declares)"
                )
            self._scenario.upload(tid, np.ascontiguousarray(arr))

    def _download(self) -> list[np.ndarray]:
        outs = []
        for t, tid in zip(self.model.outputs, self._outputs, strict=True):
            raw = np.asarray(self._scenario.download(tid))
            outs.append(raw.view(t.numpy_dtype()).reshape(t.shape))
        return outs

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Upload `inputs`, dispatch the graph once, return the outputs (VGF order)."""
        self._upload(inputs)
        self._scenario.run()
        return self._download()

    def time(self, inputs: Sequence[np.ndarray], repeats: int = 20, warmup: int = 1) -> list[float]:
        """Seconds per dispatch (submit + wait on the device), for `repeats` runs after `warmup`.

        Upload/download are outside the timed region.
        """
        if repeats < 1 or warmup < 0:
            raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats=} {warmup=}")
        self._upload(inputs)
        for _ in range(warmup):
            self._scenario.run()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            self._scenario.run()
            times.append(time.perf_counter() - start)
        return times


_runners: OrderedDict[str, VgfRunner] = OrderedDict()


def prepare_vgf(vgf_bytes: bytes) -> VgfRunner:
    """The cached VgfRunner for these bytes (built on first use; the last 8 VGFs are kept)."""
    key = hashlib.sha256(vgf_bytes).hexdigest()
    runner = _runners.pop(key, None) or VgfRunner(vgf_bytes)
    _runners[key] = runner
    while len(_runners) > _CACHE_SIZE:
        _runners.popitem(last=False)
    return runner


def clear_vgf_cache() -> None:
    """Release every cached scenario (and its Vulkan device)."""
    _runners.clear()


def run_vgf(vgf_bytes: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run a VGF once on the Vulkan device; inputs/outputs in the VGF's order, with
    the shapes and dtypes it declares (`read_vgf(vgf_bytes).inputs` / `.outputs`)."""
    return prepare_vgf(vgf_bytes).run(inputs)


def time_vgf(
    vgf_bytes: bytes, inputs: list[np.ndarray], repeats: int = 20, warmup: int = 1
) -> list[float]:
    """Seconds per dispatch for `repeats` runs of a VGF (after `warmup` untimed runs)."""
    return prepare_vgf(vgf_bytes).time(inputs, repeats=repeats, warmup=warmup)
