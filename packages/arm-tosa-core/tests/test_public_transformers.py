"""Public transformer models (random init, small configs: `arm_tosa_core.public_transformers`) as one
TOSA FP partition, within 1e-4 of eager on the reference model; and the two mechanisms that get them
there: shape-only int64/bool subgraphs folded at compile time (`constant_folding.py`), and runtime
integers moved as float32 only where their range is proved (`registry.int_range`).

Before these, each model left 4-21 int64/bool nodes (unsqueeze/view/ge/le/gather on int64) and Swin-T
45 `aten.copy` on the CPU under TOSA FP. The models take 10-25 s each on 2 cores (Swin-T ~2 min), so
they are slow; the default session keeps the small cases of each mechanism below.
"""

import pytest
import torch

from arm_tosa_core import partition_report, run_on_reference_model
from arm_tosa_core.public_transformers import build_public
from arm_tosa_core.testing import FnModule, check_lowering, lower

SLOW = pytest.mark.slow
MODELS = [
    pytest.param("bert", marks=SLOW), pytest.param("llama", marks=SLOW),
    pytest.param("distilbert", marks=SLOW), pytest.param("gpt2", marks=SLOW),
    pytest.param("t5_encoder", marks=SLOW), pytest.param("vit", marks=SLOW),
    pytest.param("wav2vec2", marks=SLOW), pytest.param("whisper_encoder", marks=SLOW),
    pytest.param("swin_t", marks=SLOW),
]


@pytest.mark.parametrize("name", MODELS)
def test_public_transformer_is_one_fp_partition(name):
    model, inputs = build_public(name)
    check = check_lowering(model, inputs, case=name, rtol=1e-4)
    assert len(check.report.delegates) == 1, check.report
    print(f"{name}: max error {check.max_error:.2e} of {check.max_magnitude:.2f}")


def _cpu_reasons(edge) -> dict[str, str]:
    return {c.name: c.reason for c in partition_report(edge).cpu_nodes}


class _TokenIds(torch.nn.Module):
    """GPT-2's pattern: token ids reshaped (a runtime int64 view) before the embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(50, 8)

    def forward(self, ids):
        return self.embed(ids.view(-1, ids.shape[-1])) * 2.0


def test_token_ids_bounded_by_the_vocabulary_move_as_float():
    """Under TOSA FP an int32 RESHAPE is illegal; the ids feed an embedding of 50 rows, so they lie in
    [0, 50) and move as float32 exactly."""
    ids = torch.tensor([[0, 49, 7, 3], [12, 48, 1, 0]])
    check = check_lowering(_TokenIds(), (ids,), case="token_ids", rtol=0)
    assert len(check.report.delegates) == 1 and not check.report.cpu_nodes, check.report


def test_unbounded_integers_stay_int64_on_the_cpu():
    """A runtime int64 view whose values nothing bounds (it is an output) is not moved as float32: it stays on the CPU with the reason, and the answer is exact."""
    module = FnModule(lambda s, x, f: (x.view(4, 2), f.view(4, 2) + 1.0))
    x = torch.tensor([2**40 + 1, -(2**35) - 3, 5, 2**24 + 1, 7, 0, -1, 2**31], dtype=torch.int64)
    f = torch.randn(8)
    edge = lower(module, (x, f))
    reasons = _cpu_reasons(edge)
    view = [r for n, r in reasons.items() if "view" in n]
    assert view and "within +-2^24" in view[0] and "are unknown" in view[0], reasons
    out_x, out_f = run_on_reference_model(edge, x, f)
    assert torch.equal(out_x, x.view(4, 2))
    assert torch.allclose(out_f, f.view(4, 2) + 1.0)


def test_folded_constant_that_does_not_fit_int32_stays_on_the_cpu():
    """A shape-only int64 chain folds at compile time; where its value (2^40 + i) must enter the TOSA
    graph as INT32 it does not fit, so the node using it stays on the CPU with the reason (never a
    wrapped constant)."""
    module = FnModule(lambda s, x: (torch.arange(4) + 2**40) + x)  # INT profile: int32 add is legal
    x = torch.tensor([1, 2, 3, 4])
    edge = lower(module, (x,), spec="TOSA-1.0+INT")
    reasons = _cpu_reasons(edge)
    assert any("does not fit" in r and "INT32" in r for r in reasons.values()), reasons
    assert torch.equal(run_on_reference_model(edge, x), torch.arange(4) + 2**40 + x)


def test_mask_from_positions_folds_to_a_constant():
    """An HF-style causal mask and position ids (arange + unsqueeze + le + gather on int64) depend only
    on shapes: folded, the whole model is one FP partition with no integer operator."""

    def forward(s, x):
        positions = torch.arange(x.shape[1]) + 0
        mask = positions[None, None, :] <= positions[None, :, None]
        picked = torch.gather(s.table.expand(1, -1), 1, positions[None, :])
        bias = s.pos[picked[0]]
        scores = (x + bias) @ (x + bias).transpose(-1, -2)
        return torch.softmax(scores.masked_fill(~mask, float("-inf")), -1)

    module = FnModule(forward, table=torch.arange(16), pos=torch.randn(16, 8))
    check = check_lowering(module, (torch.randn(1, 6, 8),), case="mask", rtol=1e-4)
    assert len(check.report.delegates) == 1 and not check.report.cpu_nodes, check.report
    ops = check.report.delegates[0].ops
    assert not {"EQUAL", "GREATER", "GREATER_EQUAL", "GATHER", "CAST"} & set(ops), ops
