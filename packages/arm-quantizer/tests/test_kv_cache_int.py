"""Static KV cache under TOSA-1.0+INT (a8w8): `prefill` and `decode` of `StaticCacheDecoder` quantized with
`quantize_methods` (one quantizer per method, calibrated along one greedy sequence over a shared cache),
each lowered as one partition (the cache writes are int8 SCATTERs; the float cache buffer is quantized and
dequantized at the program boundary), run as one `.pte` through the ExecuTorch runtime: greedy tokens equal
the fake-quant modules' and every step's logits within 1 LSB of them."""

import pytest
import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

from arm_quantizer import TOSAQuantizer, get_symmetric_quantization_config
from arm_quantizer.kv_cache import module_runner, quantize_methods, reset_buffers
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report
from arm_tosa_core.kv_cache_models import (
    StaticCacheDecoder,
    export_methods,
    greedy_decode,
    methods_to_pte,
    pte_runner,
    step_inputs,
)

SPEC = "TOSA-1.0+INT"
PROMPT = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6])
BOUNDARY = "at the float boundary of the program"


def quantized_decoder(model, spec=SPEC, config=None, calibration_steps=16):
    programs = export_methods(model, PROMPT.numel(), model.max_len)
    config = config or get_symmetric_quantization_config()
    converted = quantize_methods(programs, lambda: TOSAQuantizer(TosaCompileSpec(spec)).set_global(config),
                                 lambda run: greedy_decode(run, PROMPT, calibration_steps, model.max_len))
    return converted


def reexport(converted, max_len):
    examples = {"prefill": step_inputs(0, torch.zeros(PROMPT.numel(), dtype=torch.int64), max_len),
                "decode": step_inputs(PROMPT.numel(), torch.zeros(1, dtype=torch.int64), max_len)}
    programs = {name: torch.export.export(converted[name], examples[name], strict=True) for name in converted}
    reset_buffers(converted)  # export ran the modules
    return programs


def logits_lsb(converted) -> float:
    out = [n for n in converted["decode"].graph.nodes if n.op == "output"][0].args[0]
    node = out[0] if isinstance(out, (tuple, list)) else out
    return float(node.args[1])


@pytest.mark.slow
def test_int_decoder_32_greedy_steps_equal_fake_quant():
    model = StaticCacheDecoder(layers=1, max_len=48).eval()
    converted = quantized_decoder(model)
    fq_tokens, fq_logits = greedy_decode(module_runner(converted), PROMPT, 32, model.max_len)
    reset_buffers(converted)
    edge = to_edge_transform_and_lower(reexport(converted, model.max_len),
                                       partitioner=[TOSAPartitioner(TosaCompileSpec(SPEC))],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    for method in ("prefill", "decode"):
        report = partition_report(edge.exported_program(method))
        assert len(report.delegates) == 1, f"{method}:\n{report}"
        assert all(BOUNDARY in c.reason for c in report.cpu_nodes), f"{method}:\n{report}"
        assert report.delegates[0].ops.get("SCATTER") == 2, report
    tokens, logits = greedy_decode(pte_runner(methods_to_pte(edge)), PROMPT, 32, model.max_len)
    assert tokens == fq_tokens
    lsb = logits_lsb(converted)
    worst = max(float((a - b).abs().max()) for a, b in zip(logits, fq_logits, strict=True))
    assert all(torch.isfinite(a).all() for a in logits)
    assert worst <= lsb * 1.0001, f"{worst / lsb:.2f} LSB"
