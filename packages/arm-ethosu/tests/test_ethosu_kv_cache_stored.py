"""The KV cache stored int8 in the program (`quantize_methods(..., cache_qparams=...)`) on ethos-u85-256:
each method one Ethos-U partition whose only CPU node is the logits' dequantize (the cache's read and
write are inside it), and greedy tokens through the `.pte` (EthosUBackend runs the host graph
bit-exactly) equal the fake-quant modules' with the same int8 cache, logits within 1 LSB."""

import sys
from pathlib import Path

import pytest
import torch

from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer
from arm_quantizer import get_symmetric_quantization_config
from arm_quantizer.kv_cache import (
    calibrate_cache_qparams,
    module_runner,
    quantize_and_lower_decoder_methods,
    reset_buffers,
)
from arm_tosa_core import partition_report
from arm_tosa_core.kv_cache_models import (
    StaticCacheDecoder,
    greedy_decode,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "arm-quantizer" / "tests"))
from test_kv_cache_int import BOUNDARY, PROMPT  # noqa: E402
from test_kv_cache_stored_int import assert_pte_equals_fake_quant  # noqa: E402


@pytest.mark.slow
def test_decoder_with_an_int8_cache_in_the_program_on_ethos_u85():
    model = StaticCacheDecoder(layers=1, max_len=48).eval()
    spec = EthosUCompileSpec("ethos-u85-256").include_host_graph()

    def calibrate(run):
        return greedy_decode(run, PROMPT, 16, model.max_len)

    converted, edge = quantize_and_lower_decoder_methods(
        model, PROMPT, 16, lambda: EthosUQuantizer(spec).set_global(get_symmetric_quantization_config()),
        EthosUPartitioner(spec), cache_qparams=calibrate_cache_qparams(model, calibrate))
    fq_tokens, fq_logits = greedy_decode(module_runner(converted), PROMPT, 8, model.max_len)
    reset_buffers(converted)
    for method in ("prefill", "decode"):
        ep = edge.exported_program(method)
        assert {ep.state_dict[b].dtype for b in ep.graph_signature.buffers if b.endswith("_cache")} == {torch.int8}
        report = partition_report(ep)
        assert len(report.delegates) == 1 and len(report.cpu_nodes) == 1, f"{method}:\n{report}"
        assert BOUNDARY in report.cpu_nodes[0].reason, report
    assert_pte_equals_fake_quant(edge, converted, fq_tokens, fq_logits, model.max_len)
