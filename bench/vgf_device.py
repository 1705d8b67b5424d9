"""VGF numbers measured the same way for both sides: converter seconds, Vulkan latency, reference
model latency, and Vulkan-vs-reference exactness of one VGF and the TOSA graph it came from.

The latency functions take the ``arm_vgf`` module as an argument instead of importing it, so this
file stays importable in upstream's processes (which must not load our backends); only
``our_flows`` calls them (for upstream's VGF through ``our_flows.time_vgf_file``, in a process of
its own). ``time_converter`` needs nothing of ours: it re-runs the ML SDK ``model-converter``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_common import median_seconds

# Repeats stop once a measurement has used this many seconds, so that a model taking seconds per
# run on lavapipe (ResNet-18 at 224: ~3 s) cannot hold the run up for minutes; 60 s leaves the full
# 20 dispatches to MobileNetV2 and ResNet-18 at 224 on an idle 2-core host. Never below 5 Vulkan
# runs (1 reference run).
LATENCY_BUDGET_S = 60.0
MIN_VULKAN_REPEATS = 5


def random_inputs(vgf: Any, data: bytes) -> list:
    """Seeded random arrays of the shapes and dtypes a VGF declares (integers over int8's range)."""
    import numpy as np

    rng = np.random.default_rng(0)
    arrays = []
    for t in vgf.read_vgf(data).inputs:
        dtype = t.numpy_dtype()
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(t.shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.integers(0, 2, t.shape).astype(dtype))
        else:
            arrays.append(rng.integers(-128, 128, t.shape).astype(dtype))
    return arrays


def vulkan_latency(vgf: Any, data: bytes, arrays: list, repeats: int) -> dict[str, Any]:
    """Median (and min) seconds per dispatch of a VGF on this host's Vulkan device, over
    ``repeats`` dispatches (fewer when one is slow: see LATENCY_BUDGET_S)."""
    first = vgf.time_vgf(data, arrays, repeats=1, warmup=1)[0]  # also builds the pipeline
    n = max(MIN_VULKAN_REPEATS, min(repeats, int(LATENCY_BUDGET_S / max(first, 1e-6))))
    times = sorted(vgf.time_vgf(data, arrays, repeats=n, warmup=0))
    return {"vulkan_latency_s": times[len(times) // 2], "vulkan_latency_min_s": times[0],
            "vulkan_latency_repeats": n}


def reference_latency(graph: bytes, arrays: list, repeats: int) -> dict[str, Any]:
    """Median seconds of TOSA reference-model runs of a graph, and how many runs it is over."""
    import tosa_reference_model as trm

    def run() -> None:
        _, status = trm.run(graph, arrays)
        if status != trm.GraphStatus.TOSA_VALID:
            raise RuntimeError(f"the TOSA reference model returned {status.name}")

    first = median_seconds(run, 1, warmup=0)
    n = max(1, min(repeats, int(LATENCY_BUDGET_S / 4 / max(first, 1e-6))))
    median = first if n == 1 else median_seconds(run, n, warmup=0)
    return {"ref_latency_s": median, "ref_latency_repeats": n}


def vulkan_vs_reference(vgf: Any, data: bytes, graph: bytes, arrays: list) -> dict[str, Any]:
    """Run the VGF on Vulkan and its TOSA graph on the reference model with the same inputs:
    max |difference| / max |reference| over the outputs, and whether they are bit-identical."""
    import numpy as np
    import tosa_reference_model as trm

    got = vgf.run_vgf(data, arrays)
    ref, status = trm.run(graph, arrays)
    if status != trm.GraphStatus.TOSA_VALID:
        raise RuntimeError(f"the TOSA reference model returned {status.name}")
    exact, err, mag = True, 0.0, 0.0
    for a, b in zip(got, ref, strict=True):
        a, b = np.asarray(a), np.asarray(b).reshape(np.shape(a))
        exact = exact and a.dtype == b.dtype and np.array_equal(a, b)
        err = max(err, float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max(initial=0.0)))
        mag = max(mag, float(np.abs(b.astype(np.float64)).max(initial=0.0)))
    return {"vulkan_vs_ref_rel_err": err / (mag or 1.0), "vulkan_vs_ref_bit_exact": exact}


def device_numbers(vgf: Any, vgf_file: Path, tosa_file: Path | None, repeats: int = 20,
                   ref_repeats: int = 3) -> dict[str, Any]:
    """Everything measured on one VGF (and, when given, the TOSA graph it was converted from):
    Vulkan latency, reference-model latency, and Vulkan-vs-reference error on the same random
    inputs. A failure of the reference side is recorded, not raised, so the latency survives it."""
    data = vgf_file.read_bytes()
    arrays = random_inputs(vgf, data)
    res = vulkan_latency(vgf, data, arrays, repeats)
    if tosa_file is None:
        return res
    graph = tosa_file.read_bytes()
    try:
        res |= reference_latency(graph, arrays, ref_repeats)
        res |= vulkan_vs_reference(vgf, data, graph, arrays)
    except Exception as exc:  # noqa: BLE001 - recorded in the results, the latency still counts
        res["ref_error"] = f"{type(exc).__name__}: {exc}"[:500]
    return res


def time_converter(tosa_file: Path, flags: Sequence[str], produced_vgf: Path | None = None) -> dict[str, Any]:
    """Wall seconds of one ``model-converter`` run on a dumped TOSA file with the given flags (for
    upstream, whose converter call cannot be timed from outside); ``convert_same_vgf`` says whether
    the re-run wrote the same bytes as ``produced_vgf`` (so the re-run is the conversion measured)."""
    tool = shutil.which("model-converter") or str(Path(sys.executable).parent / "model-converter")
    with tempfile.TemporaryDirectory(prefix="bench_convert_") as tmp:
        out = Path(tmp) / "model.vgf"
        t0 = time.perf_counter()
        proc = subprocess.run([tool, "-i", str(tosa_file), "-o", str(out), *flags], capture_output=True,
                              check=False)
        took = time.perf_counter() - t0
        if proc.returncode != 0 or not out.is_file():
            return {"convert_error": (proc.stderr or proc.stdout).decode(errors="replace")[-500:]}
        res: dict[str, Any] = {"convert_s": took}
        if produced_vgf is not None:
            res["convert_same_vgf"] = out.read_bytes() == produced_vgf.read_bytes()
    return res
