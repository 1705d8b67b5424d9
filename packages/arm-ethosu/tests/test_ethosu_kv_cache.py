"""Static KV cache on ethos-u85-256: `StaticCacheDecoder`'s `prefill` (8 tokens) and `decode` (one token),
quantized a8w8 and a8w4 with `EthosUQuantizer`, each method one Ethos-U partition (vela places the cache
SCATTERs and the embedding GATHERs), run as one `.pte` through the ExecuTorch runtime (EthosUBackend runs
the host graph bit-exactly): greedy tokens equal the fake-quant modules', logits 0 LSB off; vela's numbers
printed (NPU cycles per prefill and per decoded token, SRAM, weight bytes).

Measured (vela 5.2 estimates, Ethos_U85_SYS_DRAM_Mid / Dedicated_Sram_384KB, 1 layer, dim 32, vocab 64,
48 cache positions): a8w8 prefill 31,235 cycles, decode 23,699 cycles/token, SRAM 7,760 / 6,640 bytes,
weights 26,368 bytes; a8w4 prefill 32,009, decode 22,418, weights 19,696 / 19,760 bytes (0.75x: at dim 32
the int8 embedding tables and the per-channel bias/scale words are a large share)."""

import sys
from pathlib import Path

import pytest
import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer, ethosu_report
from arm_quantizer import get_symmetric_a8w4_quantization_config, get_symmetric_quantization_config
from arm_quantizer.int16_fallback import KEPT_INT8_META
from arm_quantizer.kv_cache import (
    module_runner,
    quantize_and_lower_decoder_methods,
    quantize_and_lower_hf_methods,
    quantize_methods,
    reset_buffers,
)
from arm_tosa_core import partition_report
from arm_tosa_core.hf_static_cache import build_hf_static_cache_llama, hf_runner
from arm_tosa_core.kv_cache_models import (
    CacheWrite,
    StaticCacheDecoder,
    assert_greedy_decodes_alike,
    assert_one_delegate_per_method,
    greedy_decode,
    methods_to_pte,
    pte_runner,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "arm-quantizer" / "tests"))
from test_kv_cache_int import BOUNDARY, PROMPT, logits_lsb  # noqa: E402

STEPS = 32  # greedy steps through the .pte (8 prompt tokens + 32 of the 48 cache positions)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["a8w8", "a8w4"])
def test_decoder_on_ethos_u85_equals_fake_quant(name):
    config = {"a8w8": get_symmetric_quantization_config(),
              "a8w4": get_symmetric_a8w4_quantization_config(is_per_channel=True)}[name]
    model = StaticCacheDecoder(layers=1, max_len=48).eval()
    spec = EthosUCompileSpec("ethos-u85-256").include_host_graph()
    converted, edge = quantize_and_lower_decoder_methods(model, PROMPT, 16, lambda: EthosUQuantizer(spec).set_global(config),
                                                         EthosUPartitioner(spec))
    fq_tokens, fq_logits = greedy_decode(module_runner(converted), PROMPT, STEPS, model.max_len)
    numbers = {}
    for method in assert_one_delegate_per_method(edge, BOUNDARY):
        (part,) = ethosu_report(edge.exported_program(method)).partitions
        numbers[method] = (part.cycles_npu, part.sram_memory_used_bytes, part.weight_bytes)
    print(name, "(cycles_npu, sram bytes, weight bytes):", numbers)
    tokens, logits = greedy_decode(pte_runner(methods_to_pte(edge)), PROMPT, STEPS, model.max_len)
    assert tokens == fq_tokens
    worst = max(float((a - b).abs().max()) for a, b in zip(logits, fq_logits, strict=True))
    assert worst <= logits_lsb(converted) * 1.0001


#: the a16w8 decoder's logits on U85 vs fake-quant, in int16 LSBs (measured, 33 steps): 27 steps within
#: 1.002, 2.0 at steps 2, 7, 20, 30 and 32, and 17.0 at step 26 (tokens equal). Traced node by node
#: (2026-11-28: every quantize of the partition exposed on the reference model, the host twin's graph, vs
#: the fake-quant module's codes; the same numbers as the .pte): at step 26 the int16 exp TABLE (interpolated,
#: within 1 LSB by construction) is 1 LSB off, so softmax's int16 row sum is 28966 where fake-quant has 28967;
#: its requantization to int8 for the reciprocal TABLE (kept int8: the interpolated int16 one would be 65,019
#: LSB off, 1/x near 0) lands on 97 (225.493 - 128) where fake-quant's lands on 98 (225.501 - 128),
#: one int8 step, 25.4 int16 codes of the reciprocal; the softmax weights move 131 codes, the attention
#: output 345, the logits 17 LSB. The same partitions lowered with 32-bit multipliers (TOSA INT / VGF's form,
#: no `int16_fc_rescale16`) give 17.0 at step 26 too, and `run_exactly` (float64 fake-quant) 17.0: not the
#: U85 multiplier, not a rounding mode, not fake-quant's float32. Inherent to an int8 TABLE inside an int16
#: model: any 1-LSB int16 difference upstream (allowed everywhere) crosses an int8 rounding boundary with
#: probability ~1/128 per value, and one int8 step is ~256 int16 steps. The issue's 1 LSB is not met here.
U85_A16W8_STEPS_PAST_1_LSB, U85_A16W8_LOGITS_LSB = 6, 17


@pytest.mark.slow
def test_a16w8_decoder_on_ethos_u85_equals_fake_quant():
    """`StaticCacheDecoder` a16w8 on ethos-u85-256: its linears run on the NPU (their INT48 accumulators
    RESCALEd to int16 with 16-bit multipliers, `EthosUCompileSpec.int16_fc_rescale16`); `int16_partitioner`
    sets the int16 TABLEs the target leaves on the CPU back to int8. One partition per method, and 32
    greedy steps through the `.pte` give the fake-quant tokens, with logits within 1 int16 LSB at most
    steps (1.01: an int16 LSB of these logits is near float32's own rounding of the dequantized values)
    and the measured outliers below (`U85_A16W8_LOGITS_LSB`: an int8 step of softmax's reciprocal TABLE,
    traced; inherent to int8 tables in an int16 model, not to U85).

    On runtime-cpp's U85 simulator (vela's command streams): it refused the decode stream's compare/bitwise
    NPU_OP_ELEMENTWISE until those modes landed, so this ran through the host twin (the payload's TOSA
    graph on the reference model); now both methods' streams run, and on 4 greedy steps their logits
    equal the host twin's bit for bit (2026-11-27, streams with the host graphs stripped).
    Measured (vela 5.2, the a8w8 case's config): prefill 49,060 NPU cycles, decode 33,831 cycles/token
    (a8w8: 23,699), SRAM 13,776 / 11,536 B, weights 31,312 / 34,896 B."""
    from arm_quantizer import get_symmetric_a16w8_quantization_config

    model = StaticCacheDecoder(layers=1, max_len=48).eval()
    spec = EthosUCompileSpec("ethos-u85-256").include_host_graph()
    make_quantizer = lambda: EthosUQuantizer(spec).set_global(get_symmetric_a16w8_quantization_config())  # noqa: E731
    converted, edge = quantize_and_lower_decoder_methods(model, PROMPT, 16, make_quantizer, EthosUPartitioner(spec),
                                                         int16_partitioner=EthosUPartitioner(spec))
    numbers = {}
    for method in assert_one_delegate_per_method(edge, BOUNDARY):
        (part,) = ethosu_report(edge.exported_program(method)).partitions
        numbers[method] = (part.cycles_npu, part.sram_memory_used_bytes, part.weight_bytes)
    print("a16w8 (cycles_npu, sram bytes, weight bytes):", numbers)
    kept = {m: sorted(converted[m].meta.get(KEPT_INT8_META, {})) for m in converted}
    print("a16w8 ops kept int8:", kept)
    fq_tokens, fq_logits = greedy_decode(module_runner(converted), PROMPT, STEPS, model.max_len)
    reset_buffers(converted)
    tokens, logits = greedy_decode(pte_runner(methods_to_pte(edge)), PROMPT, STEPS, model.max_len)
    lsbs = [float((a - b).abs().max()) / logits_lsb(converted) for a, b in zip(logits, fq_logits, strict=True)]
    print("a16w8 U85 logits vs fake-quant per step (LSB):", [round(x, 3) for x in lsbs])
    assert tokens == fq_tokens
    assert all(torch.isfinite(x).all() for x in logits)
    assert sum(x > 1.01 for x in lsbs) <= U85_A16W8_STEPS_PAST_1_LSB, lsbs
    assert max(lsbs) <= U85_A16W8_LOGITS_LSB * 1.01, lsbs


def test_cache_write_stays_on_the_cpu_on_u55_with_the_reason():
    """U55/U65 run no SCATTER: the write is left on the CPU, named, instead of failing in vela."""

    inputs = (torch.tensor([1, 4]), torch.randn(1, 2, 2, 4))
    spec = EthosUCompileSpec("ethos-u55-128")
    converted = quantize_methods({"forward": torch.export.export(CacheWrite(), inputs)},
                                 lambda: EthosUQuantizer(spec), lambda run: run("forward", inputs))["forward"]
    edge = to_edge_transform_and_lower(torch.export.export(converted, inputs), partitioner=[EthosUPartitioner(spec)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    # exir decomposes index_copy where it is not kept whole (here), so the write arrives as index_put
    reasons = [c.reason for c in partition_report(edge).cpu_nodes if c.target.startswith("aten.index_")]
    assert reasons and all("SCATTER, which Ethos-U55/U65 do not run" in r for r in reasons), partition_report(edge)


@pytest.mark.slow  # 159 s on 2 cores at load 5 (546 s at load 15): quantization (32 calibration steps), the U85 lowering, 2 x 32 steps
def test_transformers_llama_on_ethos_u85_decodes_as_fake_quant():
    """transformers' StaticCache Llama (1 layer, 40 positions) a8w8 with `EthosUQuantizer`: each method one
    Ethos-U partition (it was two: the RoPE positions' cast stayed on the CPU, see `registry.int_range`),
    and 32 greedy steps through the deployable `.pte` (no host graph: runtime-cpp's U85 simulator runs
    vela's command streams, the GATHER/SCATTERs' indexed and 2-D/3-D DMAs included) give the fake-quant
    tokens with logits within 1 LSB, as the TOSA INT run does (`test_kv_cache_int.py`). Until 2026-11-27
    the simulator refused both streams (an NPU_OP_POOL and, in `prefill`, an NPU_OP_CONV after an
    elementwise MUL left IFM_BROADCAST set) and this ran through the host twin; on 4 steps the simulator's
    logits equal the host twin's bit for bit. The runtime refused the payload before: its vela stream
    had 4 inputs and its host graph 5 (`test_state_overwritten_before_it_is_read_runs_on_u85`)."""
    prompt, steps, max_len = torch.tensor([3, 1, 4, 1, 5, 9]), 32, 40
    spec = EthosUCompileSpec("ethos-u85-256")  # deployable: the simulator runs the streams, or the load fails
    converted, edge = quantize_and_lower_hf_methods(
        build_hf_static_cache_llama(layers=1, max_len=max_len), prompt, steps,
        lambda: EthosUQuantizer(spec).set_global(get_symmetric_quantization_config()), EthosUPartitioner(spec))
    for method in assert_one_delegate_per_method(edge, BOUNDARY):
        (part,) = ethosu_report(edge.exported_program(method)).partitions
        assert part.cycles_npu > 0
        print(method, "(cycles_npu, sram bytes, weight bytes):",
              (part.cycles_npu, part.sram_memory_used_bytes, part.weight_bytes))
    assert_greedy_decodes_alike(hf_runner(pte_runner(methods_to_pte(edge))), hf_runner(module_runner(converted)),
                                prompt, steps, max_len, atol=logits_lsb(converted) * 1.0001)

class _PositionState(torch.nn.Module):
    """transformers' StaticCache position state in small: `length.copy_(pos[0])` (the old value is never
    read), positions `arange(n) + length` index a table, then `length.add_(n)`."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("length", torch.zeros(1, dtype=torch.int64))
        self.table = torch.nn.Parameter(torch.randn(12, 4, generator=torch.Generator().manual_seed(0)))

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        self.length.copy_(pos[0])
        positions = torch.arange(x.shape[1]) + self.length
        self.length.add_(x.shape[1])
        return x + torch.index_select(self.table, 0, positions)


def test_state_overwritten_before_it_is_read_runs_on_u85():
    """A buffer the program overwrites before reading (`copy_`) was a partition input no TOSA operator
    read; vela dropped it, and the runtime refused the payload (4 vela inputs, 5 in the host graph:
    "assembled from different compiles"), which kept transformers' Llama from running on U85. Now the
    copy's destination is a constant of its shape: the .pte loads and equals the fake-quant module."""
    calls = [(torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(i)), torch.arange(s, s + 3))
             for i, s in enumerate((0, 3))]
    spec = EthosUCompileSpec("ethos-u85-256").include_host_graph()
    converted = quantize_methods({"forward": torch.export.export(_PositionState(), calls[0])},
                                 lambda: EthosUQuantizer(spec).set_global(get_symmetric_quantization_config()),
                                 lambda run: [run("forward", c) for c in calls])
    expected = [converted["forward"](*c).clone() for c in calls]
    reset_buffers(converted)
    ep = torch.export.export(converted["forward"], calls[0], strict=True)
    reset_buffers(converted)
    edge = to_edge_transform_and_lower({"forward": ep}, partitioner=[EthosUPartitioner(spec)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    report = partition_report(edge.exported_program("forward"))
    assert len(report.delegates) == 1 and all(BOUNDARY in c.reason for c in report.cpu_nodes), str(report)
    run = pte_runner(methods_to_pte(edge))
    for c, want in zip(calls, expected, strict=True):
        got = run("forward", c)
        assert torch.isfinite(got).all() and torch.equal(got, want), (got - want).abs().max()
