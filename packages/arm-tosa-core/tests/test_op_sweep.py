"""A fixed, seeded sample of the never-crash sweep (op_sweep.py; the full sweep is `nox -s sweep`):
every sampled case lowers within tolerance or stays on the CPU with a reason; none crashes."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "arm-quantizer" / "tests")]

import op_sweep  # noqa: E402

SAMPLE = 14


def test_sampled_sweep_never_crashes():
    cases = op_sweep.sample(op_sweep.generate(), SAMPLE, seed=9)
    tallies = op_sweep.run_sweep(cases)
    failures = [f for t in tallies.values() for f in t.failures]
    assert not failures, "\n\n".join(failures) + "\n" + op_sweep.table(tallies)
    assert sum(t.counts["cases"] for t in tallies.values()) >= SAMPLE // 2, op_sweep.table(tallies)


def test_sweep_covers_every_registry_family():
    """New families are swept with no change to the generator: every family but quantize/dequantize
    and the control-flow HOPs gets at least one case eager PyTorch accepts."""
    from arm_tosa_core import registry

    cases = [c for c in op_sweep.generate() if op_sweep.valid(c)]
    families = {e.name for e in registry.entries()} - op_sweep.SKIP_FAMILIES
    assert families - {c.family for c in cases} == set()
