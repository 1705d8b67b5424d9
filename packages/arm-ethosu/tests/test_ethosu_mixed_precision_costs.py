"""The cycle numbers `--target-sqnr` costs units with: vela's per-layer NPU cycles add up to the
NPU cycles the bench and the summary report (not to the memory-bound total), and the probe that
prices an int8 <-> int16 boundary finds vela's RESCALE passes, narrowing dearer than widening."""

import pytest
import torch

from arm_ethosu import EthosUCompileSpec, EthosUQuantizer
from arm_ethosu.mixed_precision_cli import (
    compile_report,
    layer_rows,
    quantize_model,
    rescale_cycles_per_element,
)


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_layer_rows_add_up_to_npu_cycles_and_a_boundary_costs_cycles(target):
    spec = EthosUCompileSpec(target)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 32, 1), torch.nn.ReLU(), torch.nn.Conv2d(32, 64, 3),
                                torch.nn.Flatten(), torch.nn.Linear(64 * 14 * 14, 64)).eval()
    x = (torch.randn(1, 8, 16, 16),)
    compiled = compile_report(quantize_model(model, x, [x], EthosUQuantizer(spec)), x, spec)
    rows = layer_rows(compiled.report)
    assert len(rows) >= 3 and sum(row[-1] for row in rows) == compiled.npu_cycles
    assert compiled.total_cycles > compiled.npu_cycles  # the weights' memory time is not in the rows
    widen, narrow = rescale_cycles_per_element(spec)
    assert 0.1 < widen < narrow < 10.0, (widen, narrow)  # narrowing to int8 is the dearer pass
