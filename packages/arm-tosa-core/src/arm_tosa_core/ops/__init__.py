"""Operator families. Importing this package registers every lowering rule with the registry.

The order below is the registration order, which `registry.entries()` (and so the partition reports
and the op sweep) follows; op modules do not import each other, so it is stated here.
"""

# isort: off
from . import elementwise  # noqa: F401
from . import activations  # noqa: F401
from . import reductions  # noqa: F401
from . import pooling  # noqa: F401
from . import shape_ops  # noqa: F401
from . import adaptive_pooling  # noqa: F401
from . import argmax  # noqa: F401
from . import attention  # noqa: F401
from . import bitwise  # noqa: F401
from . import composed_math  # noqa: F401
from . import control_flow  # noqa: F401
from . import conv  # noqa: F401
from . import data_movement  # noqa: F401
from . import division  # noqa: F401
from . import fft  # noqa: F401
from . import indexing  # noqa: F401
from . import gather  # noqa: F401
from . import matmul  # noqa: F401
from . import normalization  # noqa: F401
from . import padding  # noqa: F401
from . import product  # noqa: F401
from . import quantize  # noqa: F401
from . import resize  # noqa: F401
from . import selection  # noqa: F401
from . import softmax  # noqa: F401
# isort: on
