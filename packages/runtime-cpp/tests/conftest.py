"""Registers ``runtime_cpp_programs.py`` as the module ``runtime_cpp_test_programs``."""

import importlib.util
import sys
from pathlib import Path

_NAME = "runtime_cpp_test_programs"
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(_NAME, Path(__file__).with_name("runtime_cpp_programs.py"))
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_NAME] = _module
    _spec.loader.exec_module(_module)
