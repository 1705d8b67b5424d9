"""What `arm-compile` compiles: the model (a factory in a Python file, or a bundled example) and the
samples it calibrates on (a folder of .npy/.pt files, or seeded random data)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

CALIBRATION_SUFFIXES = (".npy", ".pt")


@dataclass
class LoadedModel:
    name: str
    module: torch.nn.Module
    example_inputs: tuple[torch.Tensor, ...]


def load_model(source: str, input_size: int | None = None, seed: int = 0) -> LoadedModel:
    """`path/to/file.py:factory`, `package.module:factory`, or a bundled example name.

    A factory takes no arguments and returns `(model, example_inputs)`; example_inputs is a tensor or
    a tuple of tensors. `input_size` (bundled examples only) sets the image side or token count.
    """
    if ":" not in source:
        if source.endswith(".py"):
            raise ValueError(f"name the factory in {source}: {source}:make_model (a function returning "
                             "(model, example_inputs))")
        from arm_tosa_core.example_models import get_example

        model, inputs = get_example(source).build(seed=seed, input_size=input_size)
        return LoadedModel(source, model.eval(), tuple(inputs))
    if input_size is not None:
        raise ValueError("--input-size applies to the bundled examples; a factory decides its own inputs")
    where, _, attr = source.rpartition(":")
    if not attr.isidentifier():
        raise ValueError(f"{source!r}: {attr!r} after ':' must be the factory's name")
    module = _import_file(Path(where)) if where.endswith(".py") or Path(where).is_file() \
        else _import_module(where)
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ValueError(f"{where} has no function {attr!r}; its callables: "
                         f"{sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith('_'))}")
    return _check_factory_result(factory(), f"{source}()", attr)


def _import_file(path: Path):
    if not path.is_file():
        raise FileNotFoundError(f"no Python file at {path}")
    path = path.resolve()
    name = f"arm_compile_model_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))  # so the file can import its neighbours
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def _import_module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ValueError(f"cannot import {name!r} ({exc}); pass path/to/file.py:factory for a file") from exc


def _check_factory_result(result, what: str, name: str) -> LoadedModel:
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise TypeError(f"{what} must return (model, example_inputs), got {type(result).__name__}")
    model, inputs = result
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{what} returned a {type(model).__name__} as the model; return a torch.nn.Module")
    inputs = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
    if not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise TypeError(f"{what} must return example inputs as a tensor or a tuple of tensors")
    return LoadedModel(name, model.eval(), inputs)


def channels_last_io(inputs: tuple, enabled: bool = True) -> tuple:
    """`inputs` with every 4-D tensor in channels-last memory (`torch.channels_last`), for export.

    A program exported with channels-last image inputs keeps that layout (its dim order) at run time, and
    the Arm backends read and write each delegate input and output in its tensor's dim order: the
    partition then starts without the NCHW -> NHWC TRANSPOSE (and a channels-last output ends without the
    NHWC -> NCHW one). The caller then passes and gets channels-last tensors; a .pte given a contiguous
    tensor where it plans a channels-last one refuses it, naming the layout. The same as
    `arm-compile --channels-last-io`. With `enabled=False`, `inputs` unchanged."""
    if not enabled:
        return tuple(inputs)
    return tuple(x.contiguous(memory_format=torch.channels_last) if isinstance(x, torch.Tensor) and x.dim() == 4
                 else x for x in inputs)


# -- calibration --------------------------------------------------------------------------------
def random_samples(example_inputs: tuple[torch.Tensor, ...], count: int, seed: int
                   ) -> list[tuple[torch.Tensor, ...]]:
    """`count` seeded standard-normal samples shaped like the example inputs (integer inputs are
    repeated as given: random token ids or indices would be meaningless)."""
    gen = torch.Generator().manual_seed(seed)
    return [tuple(torch.randn(x.shape, generator=gen, dtype=x.dtype) if x.is_floating_point() else x
                  for x in example_inputs) for _ in range(count)]


def load_samples(folder: str | Path, example_inputs: tuple[torch.Tensor, ...]
                 ) -> list[tuple[torch.Tensor, ...]]:
    """Calibration samples from the .npy and .pt files of `folder` (sorted by name).

    A .npy file holds one array (single-input models); a .pt file (torch.save) holds a tensor or a
    tuple/list of tensors, one per model input. Each array is one sample shaped like the example
    input, the same without its batch dimension, or a stack of samples along the batch dimension.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"calibration folder {folder} does not exist")
    files = sorted(p for p in folder.iterdir() if p.suffix in CALIBRATION_SUFFIXES)
    if not files:
        raise ValueError(f"calibration folder {folder} has no .npy or .pt files")
    samples: list[tuple[torch.Tensor, ...]] = []
    for path in files:
        arrays = _read(path, len(example_inputs))
        per_input = [_as_batches(a, x, path, i) for i, (a, x) in enumerate(zip(arrays, example_inputs,
                                                                               strict=True))]
        counts = {len(b) for b in per_input}
        if len(counts) != 1:
            raise ValueError(f"{path}: the inputs hold different numbers of samples ({sorted(counts)})")
        samples += list(zip(*per_input, strict=True))
    return samples


def _read(path: Path, n_inputs: int) -> list[torch.Tensor]:
    if path.suffix == ".npy":
        if n_inputs != 1:
            raise ValueError(f"{path}: a .npy file holds one array but the model takes {n_inputs} inputs; "
                             "save each sample as a tuple with torch.save(sample, 'x.pt')")
        return [torch.from_numpy(np.load(path, allow_pickle=False))]
    data = torch.load(path, map_location="cpu", weights_only=True)
    data = [data] if isinstance(data, torch.Tensor) else data
    if not isinstance(data, (tuple, list)) or not all(isinstance(t, torch.Tensor) for t in data):
        raise ValueError(f"{path}: expected a tensor or a tuple/list of tensors, got {type(data).__name__}")
    if len(data) != n_inputs:
        raise ValueError(f"{path} holds {len(data)} tensors; the model takes {n_inputs} inputs")
    return list(data)


def _as_batches(a: torch.Tensor, example: torch.Tensor, path: Path, i: int) -> list[torch.Tensor]:
    shape = tuple(example.shape)
    a = a.to(example.dtype)
    if tuple(a.shape) == shape:
        return [a]
    if tuple(a.shape) == shape[1:]:
        return [a.unsqueeze(0)]
    if shape and a.dim() == len(shape) and tuple(a.shape[1:]) == shape[1:] and a.shape[0] % shape[0] == 0:
        return list(a.split(shape[0]))
    raise ValueError(f"{path}: input {i} has shape {tuple(a.shape)}; the model's example input is {shape} "
                     f"(a sample may also drop the batch dimension, or stack samples along it)")
