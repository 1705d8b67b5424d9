"""Make the shared test graph builders (vgf_test_graphs.py) importable from the test modules."""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
