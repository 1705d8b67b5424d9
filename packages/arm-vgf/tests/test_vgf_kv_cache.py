"""Static KV cache through VGF on lavapipe: our `StaticCacheDecoder` and transformers' own StaticCache
Llama (`arm_tosa_core.hf_static_cache`) exported as `prefill` + `decode`, each one VGF partition under
TOSA-1.0+FP (the cache writes are SCATTERs; the new cache is a delegate output the ExecuTorch runtime
writes back into the program's shared buffer), run as one `.pte` through runtime_cpp's VgfBackend:
greedy tokens equal eager's, logits within 1e-5 of eager's largest."""

import pytest
import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

from arm_tosa_core import partition_report
from arm_tosa_core.hf_static_cache import (
    build_hf_static_cache_llama,
    export_hf_methods,
    hf_eager_runner,
    hf_runner,
)
from arm_tosa_core.kv_cache_models import (
    StaticCacheDecoder,
    assert_greedy_decodes_alike,
    eager_runner,
    export_methods,
    methods_to_pte,
    pte_runner,
)
from arm_vgf import VgfCompileSpec, VgfPartitioner
from arm_vgf.environment import layer_environment

PROMPT = torch.tensor([3, 1, 4, 1, 5, 9])


def _ours(max_len, layers):
    model = StaticCacheDecoder(vocab=32, dim=16, heads=2, layers=layers, max_len=max_len).eval()
    return export_methods(model, PROMPT.numel(), max_len), eager_runner(model), lambda run: run


def _transformers(max_len, layers):
    model = build_hf_static_cache_llama(layers=layers, max_len=max_len)
    return export_hf_methods(model, prompt_len=PROMPT.numel()), hf_eager_runner(model), hf_runner


@pytest.mark.parametrize(("build", "layers", "max_len", "steps"), [
    (_ours, 1, 16, 8),
    pytest.param(_ours, 2, 40, 32, marks=pytest.mark.slow),
    pytest.param(_transformers, 1, 16, 8, marks=pytest.mark.slow),
    pytest.param(_transformers, 2, 48, 32, marks=pytest.mark.slow),
], ids=["ours-8", "ours-32", "transformers-8", "transformers-32"])
def test_static_cache_decoder_on_vgf_decodes_as_eager(build, layers, max_len, steps):
    programs, eager, adapt = build(max_len, layers)
    edge = to_edge_transform_and_lower(programs, partitioner=[VgfPartitioner(VgfCompileSpec("TOSA-1.0+FP"))],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    for method in ("prefill", "decode"):
        report = partition_report(edge.exported_program(method))
        assert len(report.delegates) == 1 and not report.cpu_nodes, f"{method}:\n{report}"
    with layer_environment():  # VgfBackend makes its Vulkan instance while the methods load
        run = adapt(pte_runner(methods_to_pte(edge)))
    assert_greedy_decodes_alike(run, eager, PROMPT, steps, max_len, rel=1e-5)
