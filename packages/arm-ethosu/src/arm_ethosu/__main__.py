"""`python -m arm_ethosu` runs the `arm-compile` command line (arm_tosa_core.compile_cli)."""

import sys

from arm_tosa_core.compile_cli import main

sys.exit(main())
