"""Static KV cache through VGF on lavapipe: our `StaticCacheDecoder` and transformers' own StaticCache
Llama (`arm_tosa_core.hf_static_cache`) exported as `prefill` + `decode`, each one VGF partition under
TOSA-1.0+FP (the cache writes are SCATTERs; the new cache is a delegate output the ExecuTorch runtime
writes back into the program's shared buffer), run as one `.pte` through runtime_cpp's VgfBackend:
greedy tokens equal eager's, logits within 1e-5 of eager's largest."""

import pytest
import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

from arm_tosa_core.hf_static_cache import (
    build_hf_static_cache_llama,
    export_hf_methods,
    hf_eager_runner,
    hf_runner,
)
from arm_tosa_core.kv_cache_models import (
    StaticCacheDecoder,
    assert_greedy_decodes_alike,
    assert_one_delegate_per_method,
    eager_runner,
    export_methods,
    methods_to_pte,
    pte_runner,
)
from arm_vgf import VgfCompileSpec, VgfPartitioner
from arm_vgf.environment import layer_environment

PROMPT = torch.tensor([3, 1, 4, 1, 5, 9])
BOUNDARY = "at the float boundary of the program"


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
    assert_one_delegate_per_method(edge, None)
    with layer_environment():  # VgfBackend makes its Vulkan instance while the methods load
        run = adapt(pte_runner(methods_to_pte(edge)))
    assert_greedy_decodes_alike(run, eager, PROMPT, steps, max_len, rel=1e-5)


def _logits_lsb(converted) -> float:
    """The scale of the dequantize that gives `decode`'s logits: one LSB of the fake-quant reference."""
    out = [n for n in converted["decode"].graph.nodes if n.op == "output"][0].args[0]
    return float((out[0] if isinstance(out, (tuple, list)) else out).args[1])


@pytest.mark.slow  # ~3 min on idle 2 cores; 2,088 s at load ~20 under nice 15 (2026-11-27): 2 x 32 greedy steps
def test_transformers_llama_int8_on_vgf_equals_fake_quant():
    """transformers' StaticCache Llama (1 layer, 40 positions) a8w8 with `VgfQuantizer`, lowered for
    TOSA-1.0+INT: each method one VGF partition, 32 greedy steps on lavapipe with tokens equal to the
    fake-quant modules' and every step's logits within 1 LSB of theirs."""
    from arm_quantizer import get_symmetric_quantization_config
    from arm_quantizer.kv_cache import module_runner, quantize_and_lower_hf_methods
    from arm_vgf import VgfQuantizer

    steps, max_len = 32, 40
    spec = VgfCompileSpec("TOSA-1.0+INT")
    converted, edge = quantize_and_lower_hf_methods(
        build_hf_static_cache_llama(layers=1, max_len=max_len), PROMPT, steps,
        lambda: VgfQuantizer(spec).set_global(get_symmetric_quantization_config()), VgfPartitioner(spec))
    assert_one_delegate_per_method(edge, BOUNDARY)
    lsb = _logits_lsb(converted)
    with layer_environment():
        run = hf_runner(pte_runner(methods_to_pte(edge)))
    assert_greedy_decodes_alike(run, hf_runner(module_runner(converted)), PROMPT, steps, max_len, atol=lsb * 1.0001)


@pytest.mark.slow  # 4 steps: 280 s at load 14; 32 steps: 1,622 s at load ~20 under nice 15 (lavapipe)
@pytest.mark.parametrize(("layers", "max_len", "steps"), [(1, 12, 4), (1, 40, 32)], ids=["4", "32"])
def test_our_decoder_int8_on_vgf_equals_fake_quant(layers, max_len, steps):
    """`StaticCacheDecoder` a8w8 with `VgfQuantizer`, lowered for TOSA-1.0+INT: each method one VGF partition,
    greedy steps on lavapipe with tokens equal to the fake-quant modules' and every step's logits within 1 LSB."""
    from arm_quantizer import get_symmetric_quantization_config
    from arm_quantizer.kv_cache import module_runner, quantize_and_lower_decoder_methods
    from arm_vgf import VgfQuantizer

    model = StaticCacheDecoder(vocab=32, dim=16, heads=2, layers=layers, max_len=max_len).eval()
    spec = VgfCompileSpec("TOSA-1.0+INT")
    converted, edge = quantize_and_lower_decoder_methods(
        model, PROMPT, steps, lambda: VgfQuantizer(spec).set_global(get_symmetric_quantization_config()),
        VgfPartitioner(spec))
    assert_one_delegate_per_method(edge, BOUNDARY)
    lsb = _logits_lsb(converted)
    with layer_environment():
        run = pte_runner(methods_to_pte(edge))
    assert_greedy_decodes_alike(run, module_runner(converted), PROMPT, steps, max_len, atol=lsb * 1.0001)
