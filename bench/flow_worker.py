"""Child process of the benchmark: run one flow on one bundled example, write the result as JSON.

    python bench/flow_worker.py '{"module": "our_flows", "flow": "tosa", "model": "mobilenet_v2",
                                  "seed": 0, "input_size": null, "kwargs": {...}}' result.json

Started by ``bench_common.run_isolated_example``; one flow per fresh interpreter, so our backends
and upstream's never share a process and no flow inherits another's warm caches.
"""

from __future__ import annotations

import faulthandler
import importlib
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from bench_common import build_example  # noqa: E402


def main(argv: list[str]) -> int:
    """Run the requested flow and write its result dict to ``argv[1]``."""
    request, out_path = json.loads(argv[0]), Path(argv[1])
    faulthandler.enable()  # a child killed by a signal (SIGSEGV) leaves its Python stacks in its log
    if "BENCH_STACKS_EVERY_S" in os.environ:  # where a slow child spends its time: every thread's stack, to the log
        faulthandler.dump_traceback_later(float(os.environ["BENCH_STACKS_EVERY_S"]), repeat=True)
    if "BENCH_THREADS" in os.environ:
        torch.set_num_threads(int(os.environ["BENCH_THREADS"]))
    module, inputs = build_example(request["model"], request["seed"], request["input_size"])
    flows = importlib.import_module(request["module"]).FLOWS
    result = flows[request["flow"]](module, inputs, **request["kwargs"])
    out_path.write_text(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
