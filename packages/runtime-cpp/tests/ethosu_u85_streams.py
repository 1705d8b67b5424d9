"""What the Ethos-U85 simulator tests share (test_ethosu_simulator_u85.py, the stream: decoding,
safety, refusals; test_ethosu_simulator_u85_numerics.py, bit-exact kick-offs, models and layers).
Imported by file path as ``runtime_cpp_ethosu_u85`` (conftest.py), like runtime_cpp_programs.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import runtime_cpp_test_programs as progs
import torch
from torch import nn

from arm_tosa_core.testing import FnModule

TARGET = "ethos-u85-256"


_NAME = "runtime_cpp_ethosu_sim_cases"  # the U55/U65 sweep's harness (lower, deployable .pte, compare)
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(_NAME, Path(__file__).with_name("ethosu_sim_cases.py"))
    sys.modules[_NAME] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules[_NAME])
sim = sys.modules[_NAME]


class Binary(nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x, y):
        return self.fn(x, y)


def binary(fn, scale: float = 3.0, shape2=(1, 4, 5, 6)) -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    return Binary(fn), (torch.randn(1, 4, 5, 6), torch.randn(*shape2) * scale)


def where_gt() -> tuple[nn.Module, tuple]:
    """torch.where(a > b, a, b): regor's CMP_GT, AND, AND_NOT and OR (a sweep case and a fuzz seed)."""
    return FnModule(lambda s, a, b: torch.where(a > b, a, b)), binary(torch.add)[1]


def lower(module, inputs):
    return sim.lower(sim.SimCase("u85", module, inputs), TARGET)


def payload(edge) -> bytes:
    (module,) = progs.lowered_modules(edge)
    return bytes(module.processed_bytes)
