"""Mixed precision for a KV-cache decoder on Ethos-U: a8w4 / a8w8 / a16w8 per projection
(`arm_quantizer.decoder_precision`), the same in `prefill` and `decode`, then vela's numbers for the mix.

    python -m arm_ethosu.decoder_precision_cli --target-sqnr 30                 # our StaticCacheDecoder
    python -m arm_ethosu.decoder_precision_cli --target-sqnr 30 --model hf-llama --compile

Prints the per-projection report and the quantizer configuration; `--compile` lowers the chosen mix for
the target and prints each method's partitions, NPU cycles and vela's weight bytes. The SQNR is that of
every step's last-position logits (prefill, then `--steps` decodes fed the float model's greedy tokens)
vs the float model.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch

MODELS = ("static-cache", "hf-llama")


@dataclass
class DecoderCase:
    """A float decoder, its exported methods and the deterministic method sequence (``Drive``)."""

    model: torch.nn.Module
    programs: dict
    drive: Callable
    examples: dict  # method -> example inputs (re-export of the quantized modules)
    cache_suffix: str | None  # the cache buffers' name suffix (stored quantized), None: a float cache


def decoder_case(kind: str = "static-cache", dim: int = 64, layers: int = 1, prompt_len: int = 32,
                 steps: int = 8, vocab: int = 64, max_len: int | None = None) -> DecoderCase:
    from arm_tosa_core import kv_cache_models as km

    if kind not in MODELS:
        raise ValueError(f"unknown decoder {kind!r}; valid: {MODELS}")
    max_len = max_len or prompt_len + steps
    prompt = torch.randint(0, vocab, (prompt_len,), generator=torch.Generator().manual_seed(0))
    if kind == "static-cache":
        model = km.StaticCacheDecoder(vocab=vocab, dim=dim, heads=2, layers=layers, max_len=max_len).eval()
        adapt, suffix = (lambda run: run), "_cache"
        programs = km.export_methods(model, prompt_len, max_len)
        examples = {"prefill": km.step_inputs(0, torch.zeros(prompt_len, dtype=torch.int64), max_len),
                    "decode": km.step_inputs(prompt_len, torch.zeros(1, dtype=torch.int64), max_len)}
    else:
        from arm_tosa_core.hf_static_cache import (
            build_hf_static_cache_llama,
            export_hf_methods,
            hf_runner,
            hf_step_inputs,
        )

        model = build_hf_static_cache_llama(vocab=vocab, hidden=dim, layers=layers, max_len=max_len)
        adapt, suffix = hf_runner, None
        programs = export_hf_methods(model, prompt_len)
        examples = {"prefill": hf_step_inputs(0, prompt_len), "decode": hf_step_inputs(prompt_len, 1)}
    tokens, _ = km.greedy_decode(adapt(km.eager_runner(model)), prompt, steps, max_len)
    model.reset_cache()

    def drive(run):
        return km.forced_decode(adapt(run), prompt, tokens, max_len)

    return DecoderCase(model, programs, drive, examples, suffix)


def search(case: DecoderCase, target: str, goal_db: float, log=None):
    """`search_decoder_precision` with `EthosUQuantizer` / `EthosUPartitioner` for `target`; a cache
    stored int8 (int16 under an a16w8 rest) with calibrated fixed scales where the model has one."""
    from arm_quantizer.decoder_precision import search_decoder_precision
    from arm_quantizer.kv_cache import calibrate_cache_qparams

    from .compile_spec import EthosUCompileSpec
    from .partitioner import EthosUPartitioner
    from .quantizer import EthosUQuantizer

    spec = EthosUCompileSpec(target)

    def cache_qparams(rest: str):
        if case.cache_suffix is None:
            return None
        dtype = torch.int16 if rest == "a16w8" else torch.int8
        return calibrate_cache_qparams(case.model, case.drive, dtype, case.cache_suffix)

    return search_decoder_precision(case.model, case.programs, lambda: EthosUQuantizer(spec), case.drive, goal_db,
                                    partitioner=EthosUPartitioner(spec), cache_qparams=cache_qparams, log=log)


def compile_methods(case: DecoderCase, converted: dict, target: str) -> dict:
    """The quantized methods lowered for `target`: per method its partitions, CPU nodes, vela's NPU
    cycles, SRAM peak and weight bytes, and the memory configuration."""
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    from arm_quantizer.kv_cache import reset_buffers
    from arm_tosa_core import partition_report

    from .compile_spec import EthosUCompileSpec
    from .partitioner import EthosUPartitioner
    from .program_report import ethosu_report

    programs = {m: torch.export.export(converted[m], case.examples[m], strict=True) for m in converted}
    reset_buffers(converted)
    edge = to_edge_transform_and_lower(programs, partitioner=[EthosUPartitioner(EthosUCompileSpec(target))],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    out = {}
    for method in converted:
        ep = edge.exported_program(method)
        parts = ethosu_report(ep).partitions
        out[method] = {"partitions": len(parts), "cpu_nodes": len(partition_report(ep).cpu_nodes),
                       "cycles_npu": sum(p.cycles_npu for p in parts),
                       "sram_bytes": max((p.sram_memory_used_bytes for p in parts), default=0),
                       "weight_bytes": sum(p.weight_bytes for p in parts),
                       "memory_config": f"{parts[0].system_config} / {parts[0].memory_mode}" if parts else "-"}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target-sqnr", type=float, required=True, metavar="DB",
                    help="SQNR (dB) of the logits vs float to reach with the fewest weight bytes")
    ap.add_argument("-t", "--target", default="ethos-u85-256")
    ap.add_argument("--model", choices=MODELS, default="static-cache",
                    help="our StaticCacheDecoder or transformers' Llama with its StaticCache (random init)")
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--compile", action="store_true", help="lower the chosen mix and print vela's numbers")
    args = ap.parse_args(argv)
    case = decoder_case(args.model, args.dim, args.layers, args.prompt_len, args.steps)
    result = search(case, args.target, args.target_sqnr, log=lambda line: print(line, file=sys.stderr))
    print(result.report())
    print("\n# quantizer configuration (every method):")
    print(result.config_python())
    if args.compile:
        for method, row in compile_methods(case, result.converted, args.target).items():
            print(f"{method}: {row['partitions']} partition(s), {row['cycles_npu']:,} NPU cycles, "
                  f"{row['weight_bytes']:,} weight bytes, SRAM {row['sram_bytes']:,} B ({row['memory_config']})")
    return 0 if result.met else 1


if __name__ == "__main__":
    sys.exit(main())
