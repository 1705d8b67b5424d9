"""A KV cache stored quantized in the program itself (`quantize_methods(..., cache_qparams=...)`): the
cache buffers are int8 (int16 under a16w8) with fixed scales every method shares, the dequantize that
reads them and the quantize that writes them lower into the method's one partition, and nothing of the
cache is left on the CPU between calls. Compared through the `.pte` on the host with the fake-quant
modules that hold the same quantized cache."""

import pytest
import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from test_kv_cache_int import PROMPT, logits_lsb, reexport

from arm_quantizer import (
    TOSAQuantizer,
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)
from arm_quantizer.kv_cache import (
    calibrate_cache_qparams,
    module_runner,
    quantize_methods,
    reset_buffers,
    store_caches_quantized,
)
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report
from arm_tosa_core.kv_cache_models import (
    CacheWrite,
    StaticCacheDecoder,
    export_methods,
    greedy_decode,
    methods_to_pte,
    pte_runner,
)

LOGITS_BOUNDARY = "at the float boundary of the program"


def _lower(programs, spec):
    return to_edge_transform_and_lower(programs, partitioner=[TOSAPartitioner(TosaCompileSpec(spec))],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))


def _program_buffer_dtypes(ep) -> dict[str, torch.dtype]:
    return {name: ep.state_dict[name].dtype for name in ep.graph_signature.buffers if name.endswith("cache")}


def test_cache_write_keeps_int8_codes_across_calls():
    """The one-op cache write: the buffer is int8 in the exported program, the write is in the partition
    (no quantize/dequantize of the cache on the CPU), and two calls through the `.pte` (the second reads
    what the first wrote) equal the fake-quant module's outputs exactly."""
    calls = [(torch.tensor([1, 4]), torch.randn(1, 2, 2, 4, generator=torch.Generator().manual_seed(0))),
             (torch.tensor([0, 5]), torch.randn(1, 2, 2, 4, generator=torch.Generator().manual_seed(1)))]
    spec = TosaCompileSpec("TOSA-1.0+INT")
    converted = quantize_methods({"forward": torch.export.export(CacheWrite(), calls[0])},
                                 lambda: TOSAQuantizer(spec).set_global(get_symmetric_quantization_config()),
                                 lambda run: [run("forward", c) for c in calls], cache_qparams={"cache": (0.05, 0)})
    module = converted["forward"]
    assert module.cache.dtype == torch.int8
    expected = [module(*c).clone() for c in calls]
    reset_buffers(converted, suffix="cache")
    ep = torch.export.export(module, calls[0])
    reset_buffers(converted, suffix="cache")
    assert _program_buffer_dtypes(ep) == {"cache": torch.int8}
    edge = _lower({"forward": ep}, "TOSA-1.0+INT")
    report = partition_report(edge.exported_program("forward"))
    assert len(report.delegates) == 1 and report.delegates[0].ops.get("SCATTER") == 1, report
    # only the float input `new` and the float result cross the boundary; the cache never does
    assert all(LOGITS_BOUNDARY in c.reason for c in report.cpu_nodes) and len(report.cpu_nodes) == 2, report
    run = pte_runner(methods_to_pte(edge))
    for c, want in zip(calls, expected, strict=True):
        got = run("forward", c)
        assert torch.isfinite(got).all() and torch.equal(got, want), (got - want).abs().max()


def test_cache_observed_differently_by_two_methods_is_a_clear_error():
    """Without stated qparams each method observes its own cache range; one int8 buffer cannot mean two
    scales, so storing it quantized fails naming the fix."""
    pos, new = torch.tensor([1, 4]), torch.randn(1, 2, 2, 4, generator=torch.Generator().manual_seed(0))
    spec = TosaCompileSpec("TOSA-1.0+INT")
    programs = {m: torch.export.export(CacheWrite(), (pos, new)) for m in ("a", "b")}
    converted = quantize_methods(programs, lambda: TOSAQuantizer(spec).set_global(get_symmetric_quantization_config()),
                                 lambda run: (run("a", (pos, new)), run("b", (pos, new * 10))))
    with pytest.raises(ValueError, match="cache_qparams"):
        store_caches_quantized(converted, names={"cache"})


@pytest.mark.slow
# a16w8 (int16 cache) is not a case here: its int16 rsqrt/exp/reciprocal TABLEs stay on the CPU (named
# there), which splits the decoder into several partitions whatever the cache is stored as
@pytest.mark.parametrize("spec, dtype", [("TOSA-1.0+INT", torch.int8)])
def test_decoder_with_a_stored_int_cache_equals_fake_quant_for_32_steps(spec, dtype):
    """`StaticCacheDecoder` a8w8 (int8 cache): one partition per method whose only CPU node is the logits'
    dequantize, and 32 greedy steps through the `.pte` give the fake-quant tokens with logits within 1 LSB."""
    model = StaticCacheDecoder(layers=1, max_len=48).eval()
    config = get_symmetric_a16w8_quantization_config() if dtype == torch.int16 else get_symmetric_quantization_config()

    def calibrate(run):
        return greedy_decode(run, PROMPT, 16, model.max_len)

    converted = quantize_methods(export_methods(model, PROMPT.numel(), model.max_len),
                                 lambda: TOSAQuantizer(TosaCompileSpec(spec)).set_global(config), calibrate,
                                 cache_qparams=calibrate_cache_qparams(model, calibrate, dtype))
    fq_tokens, fq_logits = greedy_decode(module_runner(converted), PROMPT, 32, model.max_len)
    reset_buffers(converted)
    edge = _lower(reexport(converted, model.max_len), spec)
    for method in ("prefill", "decode"):
        ep = edge.exported_program(method)
        assert set(_program_buffer_dtypes(ep).values()) == {dtype}
        report = partition_report(ep)
        assert len(report.delegates) == 1 and len(report.cpu_nodes) == 1, f"{method}:\n{report}"
        assert LOGITS_BOUNDARY in report.cpu_nodes[0].reason, report
    assert_pte_equals_fake_quant(edge, converted, fq_tokens, fq_logits, model.max_len)


def assert_pte_equals_fake_quant(edge, converted, fq_tokens, fq_logits, max_len):
    """Greedy decoding through the `.pte` gives the fake-quant tokens, finite logits within 1 LSB."""
    tokens, logits = greedy_decode(pte_runner(methods_to_pte(edge)), PROMPT, len(fq_tokens), max_len)
    assert tokens == fq_tokens
    assert all(torch.isfinite(a).all() for a in logits)
    worst = max(float((a - b).abs().max()) for a, b in zip(logits, fq_logits, strict=True))
    assert worst <= logits_lsb(converted) * 1.0001, f"{worst / logits_lsb(converted):.2f} LSB"
