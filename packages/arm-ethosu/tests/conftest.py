"""Shared fixtures for the arm-ethosu tests.

``tosa_graphs.py`` and ``ethosu_flow.py`` are registered under the unique module names
``arm_ethosu_test_graphs`` and ``arm_ethosu_test_flow`` (not put on sys.path), so they cannot
collide with another package's test helpers or with the generic top-level modules tosa-tools
installs.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

_NAME = "arm_ethosu_test_graphs"
for _name, _file in ((_NAME, "tosa_graphs.py"), ("arm_ethosu_test_flow", "ethosu_flow.py")):
    if _name not in sys.modules:
        _spec = importlib.util.spec_from_file_location(_name, Path(__file__).with_name(_file))
        _module = importlib.util.module_from_spec(_spec)
        sys.modules[_name] = _module
        _spec.loader.exec_module(_module)

TARGETS = ("ethos-u55-128", "ethos-u65-256", "ethos-u85-256")


@pytest.fixture(scope="session")
def compiled():
    """compiled(graph_name, target, **kw) -> VelaResult, cached for the session."""
    from arm_ethosu.vela_runner import compile_with_vela

    graphs = sys.modules[_NAME]
    cache = {}

    def get(graph: str, target: str, **kwargs):
        key = (graph, target, tuple(sorted(kwargs.items())))
        if key not in cache:
            cache[key] = compile_with_vela(getattr(graphs, graph)(), target, **kwargs)
        return cache[key]

    return get
