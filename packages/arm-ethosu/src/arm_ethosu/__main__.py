"""`python -m arm_ethosu` runs the `arm-compile` command line."""

import sys

from .cli import main

sys.exit(main())
