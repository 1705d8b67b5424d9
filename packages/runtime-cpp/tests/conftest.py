"""Registers the test helper modules under unique names (``--import-mode=importlib``: a plain name
could clash with another package's tests): ``runtime_cpp_programs.py`` as ``runtime_cpp_test_programs``
and ``ethosu_u85_streams.py`` (the U85 simulator tests' shared pieces) as ``runtime_cpp_ethosu_u85``."""

import importlib.util
import sys
from pathlib import Path

for _name, _file in (("runtime_cpp_test_programs", "runtime_cpp_programs.py"),
                     ("runtime_cpp_ethosu_u85", "ethosu_u85_streams.py")):
    if _name not in sys.modules:
        _spec = importlib.util.spec_from_file_location(_name, Path(__file__).with_name(_file))
        _module = importlib.util.module_from_spec(_spec)
        sys.modules[_name] = _module
        _spec.loader.exec_module(_module)
