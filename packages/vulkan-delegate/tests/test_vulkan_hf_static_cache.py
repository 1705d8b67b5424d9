"""transformers' own StaticCache (a random-init Llama through `TorchExportableModuleWithStaticCache`,
exported by `arm_tosa_core.hf_static_cache`) on Vulkan: `prefill` and `decode` fully delegated (the
int64 positions and causal mask built from `cache_position` are proved within int32 by the cache they
index), greedy tokens through the `.pte` on lavapipe equal eager's."""

import pytest
import torch
from executorch.exir import to_edge_transform_and_lower

from arm_tosa_core.hf_static_cache import (
    build_hf_static_cache_llama,
    export_hf_methods,
    hf_eager_runner,
    hf_runner,
)
from arm_tosa_core.kv_cache_models import assert_greedy_decodes_alike
from vulkan_delegate import VulkanPartitioner, partition_report
from vulkan_delegate.kv_decoder import methods_to_pte, pte_runner

PROMPT = torch.tensor([3, 1, 4, 1, 5, 9])


# both slow (~70 s each on 2 cores): the default session decodes on Vulkan through kv_decoder (test_vulkan_kv_cache.py),
# and the range proof this model needs is in arm-tosa-core's default test_kv_cache_hf.py
@pytest.mark.slow
@pytest.mark.parametrize(("layers", "max_len", "steps"), [(1, 16, 8), (2, 48, 32)])
def test_static_cache_llama_fully_delegated_decodes_as_eager(layers, max_len, steps):
    model = build_hf_static_cache_llama(layers=layers, max_len=max_len)
    edge = to_edge_transform_and_lower(export_hf_methods(model, prompt_len=PROMPT.numel()),
                                       partitioner=[VulkanPartitioner()])
    for method in ("prefill", "decode"):
        report = partition_report(edge.exported_program(method))
        assert len(report.delegates) == 1 and not report.cpu_nodes, f"{method}:\n{report}"
    assert_greedy_decodes_alike(hf_runner(pte_runner(methods_to_pte(edge))), hf_eager_runner(model), PROMPT, steps,
                                max_len, rel=1e-4)
