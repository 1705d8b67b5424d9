"""transformers' own StaticCache (`TorchExportableModuleWithStaticCache`, a random-init Llama) exported with
`hf_static_cache.export_hf_methods`: `prefill` and `decode` over one cache, strict and non-strict; under
TOSA-1.0+FP each method is one partition (its int64 positions and causal mask proved bounded by the cache
they index, `registry.int_range`) and greedy tokens through the `.pte` equal eager's."""

import pytest
import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report, run_on_reference_model
from arm_tosa_core.hf_static_cache import (
    build_hf_static_cache_llama,
    export_hf_methods,
    hf_eager_runner,
    hf_runner,
)
from arm_tosa_core.kv_cache_models import assert_greedy_decodes_alike, methods_to_pte, pte_runner
from arm_tosa_core.testing import lower


def _mutated_buffers(program):
    return sorted(program.graph_signature.buffers_to_mutate.values())


@pytest.mark.slow  # the non-strict export is also what the FP decode test below lowers
@pytest.mark.parametrize("strict", [False, True])
def test_static_cache_exports_prefill_and_decode_writing_its_buffers(strict):
    """Non-strict export failed in run_decompositions ("expected compiled_fn to be GraphModule") while the
    cache layers held tensors other than the wrapper's buffers; now both methods write the cache as buffer
    mutations and the exported decode, run after the exported prefill on the same buffers, gives eager's logits."""
    model = build_hf_static_cache_llama(layers=1, max_len=12)
    programs = export_hf_methods(model, prompt_len=4, strict=strict)
    expected = ["cumulative_length_0", "key_cache_0", "value_cache_0"]
    for name, program in programs.items():
        assert _mutated_buffers(program.run_decompositions({})) == expected, name
    prompt = (torch.tensor([[3, 1, 4, 1]]), torch.arange(4))
    step = (torch.tensor([[5]]), torch.tensor([4]))
    with torch.no_grad():
        model(*prompt)
        want = model(*step)
        model.reset_cache()
        prefill, decode = programs["prefill"].module(), programs["decode"].module()
        for buf in expected:  # the two exported modules share one cache, as the .pte's methods do
            setattr(decode, buf, getattr(prefill, buf))
        prefill(*prompt)
        got = decode(*step)
    assert torch.isfinite(got).all()
    assert (got - want).abs().max() <= 1e-5 * want.abs().max()


class _CachePositions(torch.nn.Module):
    """The int64 arithmetic of transformers' StaticCache in miniature: a length buffer copied from
    `cache_position[0]`, positions `arange(n) + length` that index the cache write, and the causal mask
    `arange(max_len) <= positions` over the cache."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(1, 2, 8, 4))
        self.register_buffer("length", torch.tensor(0))

    def forward(self, new: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        self.length.copy_(cache_position[0])
        pos = torch.arange(new.shape[2]) + self.length
        self.cache.index_copy_(2, pos, new)
        mask = torch.arange(8)[None, :] <= pos[:, None]
        return self.cache.sum(-1)[:, :, None, :] * mask


def test_cache_positions_are_proved_by_the_cache_they_index():
    """Under TOSA FP (no int32 select/copy/broadcast/compare) the int64 positions and mask lower as
    float32 because `int_range` bounds them by the cache they index (they stayed on the CPU before)."""
    _assert_one_partition_exact(_CachePositions, torch.randn(1, 2, 3, 4), torch.tensor([2, 3, 4]))


def _assert_one_partition_exact(model_class: type, new: torch.Tensor, cache_position: torch.Tensor) -> None:
    edge = lower(model_class(), (new, cache_position))
    report = partition_report(edge)
    assert len(report.delegates) == 1 and not report.cpu_nodes, report
    got = run_on_reference_model(edge, new, cache_position)
    got = got[0] if isinstance(got, (tuple, list)) else got
    want = model_class()(new, cache_position)
    assert torch.equal(got, want), (got - want).abs().max()


class _BufferedPositions(_CachePositions):
    """The same positions and mask from int64 buffers holding `arange`s: what the quantizer's constant
    folding leaves of transformers' `arange(n) + cache_position[0]` (`_arm_folded_*` buffers)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.arange(3))
        self.register_buffer("columns", torch.arange(8)[None, :])

    def forward(self, new: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        self.length.copy_(cache_position[0])
        pos = self.steps + self.length
        self.cache.index_copy_(2, pos, new)
        return self.cache.sum(-1)[:, :, None, :] * (self.columns <= pos[:, None])


def test_positions_from_constant_buffers_are_bounded_by_their_values():
    """`int_range` saw no range for a buffer, so positions built on a folded `arange` buffer (transformers'
    Llama after quantization) were unproved and their comparisons stayed on the CPU; a constant's values
    now bound it, and a buffer the program writes gets no range from its values."""
    from arm_tosa_core import registry
    from arm_tosa_core.partitioner import mark_constants

    new, cache_position = torch.randn(1, 2, 3, 4), torch.tensor([2, 3, 4])
    _assert_one_partition_exact(_BufferedPositions, new, cache_position)
    ep = torch.export.export(_BufferedPositions(), (new, cache_position)).run_decompositions()
    mark_constants(ep)
    ranges = {n.name: n.meta.get(registry.CONSTANT_RANGE_KEY) for n in ep.graph.nodes if n.op == "placeholder"}
    assert ranges["b_steps"] == (0, 2) and ranges["b_columns"] == (0, 7), ranges
    assert ranges["b_length"] is None, ranges  # written by every call: its initial value bounds nothing


class _OneStepPositions(_BufferedPositions):
    """`decode`'s form of `_BufferedPositions`: the same buffer names, a one-position `steps`."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.arange(1))


def test_each_method_of_one_program_sees_its_own_constant_values():
    """exir prepares every method before partitioning any, and the partitioner kept only the last one's
    integer constants: `prefill`'s `steps` (3 positions) found `decode`'s (1 position) under its name,
    stayed a stand-in with no values, and its positions went to the CPU (transformers' Llama on U85)."""
    inputs = {"prefill": (torch.randn(1, 2, 3, 4), torch.tensor([2, 3, 4])),
              "decode": (torch.randn(1, 2, 1, 4), torch.tensor([5]))}
    models = {"prefill": _BufferedPositions, "decode": _OneStepPositions}
    programs = {m: torch.export.export(models[m](), inputs[m]) for m in inputs}
    edge = to_edge_transform_and_lower(programs, partitioner=[TOSAPartitioner(TosaCompileSpec("TOSA-1.0+FP"))],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    for method in inputs:
        report = partition_report(edge.exported_program(method))
        assert len(report.delegates) == 1 and not report.cpu_nodes, f"{method}:\n{report}"


PROMPT = torch.tensor([3, 1, 4, 1, 5, 9])


@pytest.mark.parametrize(("layers", "max_len", "steps"), [(1, 16, 8), pytest.param(2, 48, 32, marks=pytest.mark.slow)])
def test_static_cache_llama_fp_is_one_partition_and_decodes_as_eager(layers, max_len, steps):
    model = build_hf_static_cache_llama(layers=layers, max_len=max_len)
    edge = to_edge_transform_and_lower(export_hf_methods(model, prompt_len=PROMPT.numel()),
                                       partitioner=[TOSAPartitioner(TosaCompileSpec("TOSA-1.0+FP"))],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    for method in ("prefill", "decode"):
        report = partition_report(edge.exported_program(method))
        assert len(report.delegates) == 1 and not report.cpu_nodes, f"{method}:\n{report}"
        assert report.delegates[0].ops.get("SCATTER", 0) == 2 * layers, report
    assert_greedy_decodes_alike(hf_runner(pte_runner(methods_to_pte(edge))), hf_eager_runner(model), PROMPT, steps,
                                max_len, rel=1e-5)


class _EvenPositions(_BufferedPositions):
    """`_BufferedPositions` with other values under the same buffer names and shapes."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.arange(3) * 2)


def test_a_reused_partitioner_judges_each_program_by_its_own_constants():
    """The partitioner kept every program's integer constants for its whole life: lowering a second
    program with an equal-named `steps` of other values made it unknown (the two records disagree),
    and its positions went to the CPU. Each lowering now starts its own records."""
    partitioner = TOSAPartitioner(TosaCompileSpec("TOSA-1.0+FP"))
    new, cache_position = torch.randn(1, 2, 3, 4), torch.tensor([2, 3, 4])
    for model_class in (_BufferedPositions, _EvenPositions):
        edge = to_edge_transform_and_lower(torch.export.export(model_class(), (new, cache_position)),
                                           partitioner=[partitioner],
                                           compile_config=EdgeCompileConfig(_check_ir_validity=False))
        report = partition_report(edge.exported_program())
        assert len(report.delegates) == 1 and not report.cpu_nodes, f"{model_class.__name__}:\n{report}"
        assert len(partitioner._integer_constants) == 1  # the program being lowered only
        got = run_on_reference_model(edge, new, cache_position)
        assert torch.equal(got, model_class()(new, cache_position))
