"""The decoder in its functional form (`FunctionalCacheDecoder`: the caches are inputs and the updated caches
outputs, the form the competitor's backend lowers and the decoder bench's `functional` rows) under a16w8 on
ethos-u85-256.

Plain PT2E (prepare, calibrate, convert) makes int16 TABLEs of RMSNorm's rsqrt and softmax's reciprocal
that are more than 1 LSB off fake-quant for the calibrated qparams (here rsqrt 15 LSB), so the partitioner leaves them
on the CPU and each method splits into several partitions (the bench measured 18/16 at its size).
`quantize_methods(..., partitioner=...)` is the same mechanism the buffer form uses (int16 only where it
lowers, `arm_quantizer.int16_fallback`): those ops are set back to int8 inside the partition, so each
method is one partition, whose only CPU nodes are the quantize/dequantize at the program's float boundary
(the token/position inputs' casts, the cache inputs and outputs)."""

from __future__ import annotations

import pytest
import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer
from arm_quantizer import get_symmetric_a16w8_quantization_config
from arm_quantizer.int16_fallback import KEPT_INT8_META, int16_nodes, own_cpu_reasons
from arm_quantizer.kv_cache import quantize_methods
from arm_tosa_core.kv_cache_models import (
    FunctionalCacheDecoder,
    StaticCacheDecoder,
    assert_one_delegate_per_method,
    functional_runner,
    greedy_decode,
    method_inputs,
)

PROMPT = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6])
BOUNDARY = "at the float boundary of the program"
MAX_LEN, STEPS = 16, 4


def _quantize(module: FunctionalCacheDecoder, spec: EthosUCompileSpec, partitioner):
    zeros = [torch.zeros(s) for s in module.cache_shapes()]
    examples = {m: (*x, *zeros) for m, x in method_inputs(PROMPT.numel(), MAX_LEN).items()}
    programs = {m: torch.export.export(module, x, strict=True) for m, x in examples.items()}
    converted = quantize_methods(
        programs, lambda: EthosUQuantizer(spec).set_global(get_symmetric_a16w8_quantization_config()),
        lambda run: greedy_decode(functional_runner(run, module.cache_shapes()), PROMPT, STEPS, MAX_LEN),
        partitioner=partitioner)
    return converted, examples


@pytest.mark.slow  # 666 s on 2 cores at load 15-18: three quantizations of both methods, the trial partitionings, vela
def test_functional_decoder_a16w8_is_one_partition_per_method_on_u85():
    module = FunctionalCacheDecoder(StaticCacheDecoder(layers=1, max_len=MAX_LEN).eval()).eval()
    spec = EthosUCompileSpec("ethos-u85-256")

    plain, examples = _quantize(module, spec, None)
    # what the mechanism is for: plain a16w8 leaves int16 TABLEs of both methods on the CPU
    for method, converted in plain.items():
        reasons = own_cpu_reasons(EthosUPartitioner(spec), examples[method])(converted)
        assert any("int16 TABLE" in r for r in reasons.values()), (method, reasons)

    fitted, _ = _quantize(module, spec, EthosUPartitioner(spec))
    for method, converted in fitted.items():
        kept = converted.meta[KEPT_INT8_META]
        ops = {str(n.target).split(".")[-2] for n in converted.graph.nodes if n.name in kept}
        assert "rsqrt" in ops and ops <= {"rsqrt", "exp", "reciprocal", "sigmoid"}, (method, kept)
        assert kept and all("int16 TABLE" in r for r in kept.values()), (method, kept)
        assert int16_nodes(converted) - set(kept), method  # the rest (linears, matmuls, adds) stays int16
    edge = to_edge_transform_and_lower(
        {m: torch.export.export(fitted[m], examples[m], strict=True) for m in fitted},
        partitioner=[EthosUPartitioner(spec)], compile_config=EdgeCompileConfig(_check_ir_validity=False))
    assert_one_delegate_per_method(edge, BOUNDARY)
