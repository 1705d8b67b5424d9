"""Which export form of the decoder bench's model the competitor's Ethos-U backend lowers (issue 21).

    uv run python bench/decoder_competitor_forms.py                 # every form, decode and prefill, a8w8
    uv run python bench/decoder_competitor_forms.py --forms functional --methods decode

`bench_decoder.py`'s competitor side fails on the `StaticCacheDecoder` (the cache as mutable buffers written
by `index_copy_`) with "Invalid partition, found dependency cycles". This script runs, in one process of the
competitor's own (`executorch.backends.arm` is imported only here), the same model (same weights, a8w8
per-channel, `ethos-u85-256`, the bench's memory config `bench_decoder.MEMORY`) in simpler export forms:

- `buffer_index_copy`: the bench's form (the cache a buffer, `cache.index_copy_(2, pos, new)`);
- `buffer_index_put`: the cache a buffer written by slice assignment (`cache[:, :, pos] = new`, exported as
  `index_put_`), the form of the competitor's own static-cache tests;
- `functional`: no mutable buffer: the caches are inputs and the updated caches outputs
  (`cache.index_copy(2, pos, new)`, out of place);
- `no_cache`: attention over the step's own tokens only (no cache at all): whether the rest of the decoder
  lowers.

Per form and method: delegates, compute nodes left on the CPU, vela's NPU cycles, or the exception and
the frame that raised it. Writes `results/decoder/competitor_forms.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_decoder as bd  # noqa: E402  (its model file loader, sizes and vela summary reader)

FORMS = ("buffer_index_copy", "buffer_index_put", "functional", "no_cache")


def _example(km, method: str, form: str, model) -> tuple:
    """The method's inputs; for `functional` decode, the caches the float model's prefill of the bench's
    prompt leaves (so the cache inputs calibrate on real values), for prefill zero caches."""
    n = bd.PROMPT_LEN if method == "prefill" else 1
    start = 0 if method == "prefill" else bd.PROMPT_LEN
    tokens = torch.randint(0, bd.MODEL["vocab"], (n,), generator=torch.Generator().manual_seed(n))
    inputs = km.step_inputs(start, tokens, bd.MODEL["max_len"])
    if form == "functional":
        model.reset_cache()
        if method == "decode":
            with torch.no_grad():
                model(*km.step_inputs(0, bd._prompt(), bd.MODEL["max_len"]))
        inputs += tuple(b.clone() for name, b in model.named_buffers() if name.endswith("_cache"))
        model.reset_cache()
    return inputs


def _op_name(node) -> str:
    return getattr(node.target, "__name__", str(node.target))


QCONFIGS = ("a8w8", "a8w4", "a16w8")


def lower_form(form: str, method: str, config: str = "a8w8") -> dict:
    import executorch.backends.arm.quantizer as uq
    from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
    from executorch.backends.arm.quantizer import (
        arm_quantizer as uq_configs,  # a8w4: not re-exported (1.5)
    )
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.lowered_backend_module import get_lowered_submodules
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    km = bd._models()
    update = "index_put" if form == "buffer_index_put" else "index_copy"
    model = km.StaticCacheDecoder(**bd.MODEL, update=update).eval()
    module = model if form.startswith("buffer") else km.FunctionalCacheDecoder(model, cache=form == "functional").eval()
    inputs = _example(km, method, form, model)
    out: dict = {"side": "competitor", "form": form, "method": method, "config": config}
    t0 = time.perf_counter()
    try:
        spec = EthosUCompileSpec(bd.TARGET, **bd.MEMORY)
        ep = torch.export.export(module, inputs, strict=True)
        model.reset_cache()
        qconfig = {"a8w8": lambda: uq.get_symmetric_quantization_config(is_per_channel=True),
                   "a8w4": lambda: uq_configs.get_symmetric_a8w4_quantization_config(is_per_channel=True,
                                                                                     is_qat=False),
                   "a16w8": lambda: uq.get_symmetric_a16w8_quantization_config(is_per_channel=True)}[config]()
        prepared = prepare_pt2e(ep.module(check_guards=False), uq.EthosUQuantizer(spec).set_global(qconfig))
        with torch.no_grad():
            prepared(*inputs)  # one calibration step (the numbers of interest are whether and how it lowers)
        converted = convert_pt2e(prepared)
        model.reset_cache()
        ep = torch.export.export(converted, inputs, strict=True)
        with tempfile.TemporaryDirectory() as tmp:
            spec.dump_intermediate_artifacts_to(tmp)
            edge = to_edge_transform_and_lower(ep, partitioner=[EthosUPartitioner(spec)])
            gm = edge.exported_program().graph_module
            cpu = sorted(_op_name(n) for n in gm.graph.nodes if n.op == "call_function"
                         and "executorch_call_delegate" not in str(n.target) and "getitem" not in str(n.target))
            out |= bd._vela_csv(Path(tmp)) | {"delegates": len(get_lowered_submodules(gm)), "cpu_nodes": len(cpu),
                                              "cpu_ops": sorted(set(cpu)),
                                              "memory_config": " ".join(spec.compiler_flags)}
    except Exception as exc:  # noqa: BLE001  (the competitor's failure is the result)
        frames = traceback.extract_tb(exc.__traceback__)
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        out["raised_at"] = [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames[-4:]]
    out["seconds"] = time.perf_counter() - t0
    return out


def ours_functional(method: str, config: str = "a8w8") -> dict:
    """Our side on the `functional` form (the same module, inputs and one calibration step), for a like-for-like
    row beside the competitor's; run in a process of its own (`--side ours`). Both sides in the bench's memory
    config (`bench_decoder.MEMORY`; cycles depend on where tensors live)."""
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer, ethosu_report
    from arm_quantizer import (
        get_symmetric_a8w4_quantization_config,
        get_symmetric_a16w8_quantization_config,
        get_symmetric_quantization_config,
    )
    from arm_quantizer.kv_cache import quantize_methods
    from arm_tosa_core import partition_report

    km = bd._models()
    model = km.StaticCacheDecoder(**bd.MODEL).eval()
    module = km.FunctionalCacheDecoder(model).eval()
    inputs = _example(km, method, "functional", model)
    qconfig = {"a8w8": get_symmetric_quantization_config, "a16w8": get_symmetric_a16w8_quantization_config,
               "a8w4": lambda: get_symmetric_a8w4_quantization_config(is_per_channel=True)}[config]()
    out: dict = {"side": "ours", "form": "functional", "method": method, "config": config}
    t0 = time.perf_counter()
    try:
        spec = EthosUCompileSpec(bd.TARGET, **bd.MEMORY)
        # int16 only where it lowers, as the bench's rows (`functional_row`)
        converted = quantize_methods({method: torch.export.export(module, inputs, strict=True)},
                                     lambda: EthosUQuantizer(spec).set_global(qconfig),
                                     lambda run: run(method, inputs), partitioner=EthosUPartitioner(spec))[method]
        ep = torch.export.export(converted, inputs, strict=True)
        edge = to_edge_transform_and_lower(ep, partitioner=[EthosUPartitioner(spec)],
                                           compile_config=EdgeCompileConfig(_check_ir_validity=False))
        lowered = edge.exported_program()
        parts = ethosu_report(lowered).partitions
        cpu = partition_report(lowered).cpu_nodes
        out |= {"partitions": len(parts), "delegates": len(parts), "cycles_npu": sum(p.cycles_npu for p in parts),
                "sram_bytes": max(p.sram_memory_used_bytes for p in parts),
                "weight_bytes": sum(p.weight_bytes for p in parts), "cpu_nodes": len(cpu),
                "cpu_ops": sorted({str(getattr(n, "target", n)) for n in cpu}),
                "memory_config": f"{parts[0].system_config} / {parts[0].memory_mode}"}
    except Exception as exc:  # noqa: BLE001
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    out["seconds"] = time.perf_counter() - t0
    return out


def _call(modules: dict) -> Callable[[str, tuple], tuple]:
    def call(method: str, inputs: tuple) -> tuple:
        with torch.no_grad():
            return modules[method](*inputs)

    return call


def _side_api(side: str, config: str):
    """(quantizer factory, partitioner class, compile spec class) of `side` at `config`; the competitor's
    modules are imported only when it is asked for."""
    if side == "competitor":
        import executorch.backends.arm.quantizer as uq
        from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
        from executorch.backends.arm.quantizer import (
            arm_quantizer as uq_configs,  # a8w4: not re-exported (1.5)
        )

        qconfig = {"a8w8": lambda: uq.get_symmetric_quantization_config(is_per_channel=True),
                   "a8w4": lambda: uq_configs.get_symmetric_a8w4_quantization_config(is_per_channel=True,
                                                                                     is_qat=False),
                   "a16w8": lambda: uq.get_symmetric_a16w8_quantization_config(is_per_channel=True)}[config]()
        return lambda spec: uq.EthosUQuantizer(spec).set_global(qconfig), EthosUPartitioner, EthosUCompileSpec
    from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer
    from arm_quantizer import (
        get_symmetric_a8w4_quantization_config,
        get_symmetric_a16w8_quantization_config,
        get_symmetric_quantization_config,
    )

    qconfig = {"a8w8": get_symmetric_quantization_config, "a16w8": get_symmetric_a16w8_quantization_config,
               "a8w4": lambda: get_symmetric_a8w4_quantization_config(is_per_channel=True)}[config]()
    return lambda spec: EthosUQuantizer(spec).set_global(qconfig), EthosUPartitioner, EthosUCompileSpec


def functional_row(side: str, config: str, keep: Path | None = None) -> dict:
    """One bench row (`bench_decoder`'s cell) of `side` on the functional form: both methods quantized with
    the side's own quantizer, calibrated on the bench's prompt and greedy steps (as `bench_decoder.ours`), the
    SQNR of the last-step logits vs float, then each method lowered in the bench's memory config; vela's
    numbers read from the dumped outputs the same way for both sides. `keep`: copy those outputs there."""
    import shutil

    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from executorch.exir.lowered_backend_module import get_lowered_submodules
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    km = bd._models()
    model = km.StaticCacheDecoder(**bd.MODEL).eval()
    float_tokens, float_last = bd._float_reference(km, model)
    module = km.FunctionalCacheDecoder(model).eval()
    shapes = module.cache_shapes()
    examples = {m: _example(km, m, "functional", model) for m in ("prefill", "decode")}
    quantizer, partitioner, compile_spec = _side_api(side, config)
    out: dict = {"config": config, "form": "functional"}
    t0 = time.perf_counter()
    if side == "ours":
        # as the buffer form (`bench_decoder.ours`): `quantize_methods` with the target's partitioner, so an
        # a16w8 op whose int16 form the target leaves on the CPU (an int16 TABLE more than 1 LSB off) stays
        # int8 inside the partition (`arm_quantizer.int16_fallback`); a8w8/a8w4 are unchanged by it
        from arm_quantizer.int16_fallback import KEPT_INT8_META
        from arm_quantizer.kv_cache import quantize_methods

        converted = quantize_methods(
            {m: torch.export.export(module, examples[m], strict=True) for m in examples},
            lambda: quantizer(compile_spec(bd.TARGET, **bd.MEMORY)),
            lambda run: km.greedy_decode(km.functional_runner(run, shapes), bd._prompt(),
                                         bd.STEPS, bd.MODEL["max_len"]),
            partitioner=partitioner(compile_spec(bd.TARGET, **bd.MEMORY)))
        out["kept_int8"] = sorted({n for m in converted.values() for n in m.meta.get(KEPT_INT8_META, {})})
    else:
        prepared = {m: prepare_pt2e(torch.export.export(module, examples[m], strict=True).module(
            check_guards=False), quantizer(compile_spec(bd.TARGET, **bd.MEMORY))) for m in examples}
        km.greedy_decode(km.functional_runner(_call(prepared), shapes), bd._prompt(), bd.STEPS, bd.MODEL["max_len"])
        converted = {m: convert_pt2e(p) for m, p in prepared.items()}
    tokens, logits = km.greedy_decode(km.functional_runner(_call(converted), shapes), bd._prompt(), bd.STEPS,
                                      bd.MODEL["max_len"])
    out |= {"sqnr_db": bd.sqnr_db(float_last, logits[-1]),
            "token_agreement": sum(a == b for a, b in zip(tokens, float_tokens, strict=True)) / bd.STEPS}
    for method, example in examples.items():
        ep = torch.export.export(converted[method], example, strict=True)
        with tempfile.TemporaryDirectory() as tmp:
            spec = compile_spec(bd.TARGET, **bd.MEMORY)
            spec.dump_intermediate_artifacts_to(tmp)
            try:
                edge = to_edge_transform_and_lower(ep, partitioner=[partitioner(spec)],
                                                   compile_config=EdgeCompileConfig(_check_ir_validity=False))
            except Exception as exc:  # noqa: BLE001  (a side's failure is its result)
                out[method] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
                continue
            gm = edge.exported_program().graph_module
            cpu = sorted(_op_name(n) for n in gm.graph.nodes if n.op == "call_function"
                         and "executorch_call_delegate" not in str(n.target) and "getitem" not in str(n.target))
            out[method] = bd._vela_csv(Path(tmp)) | {"delegates": len(get_lowered_submodules(gm)),
                                                     "cpu_nodes": len(cpu), "cpu_ops": sorted(set(cpu)),
                                                     "memory_config": f"{bd.MEMORY['system_config']} / "
                                                                      f"{bd.MEMORY['memory_mode']}"}
            if keep is not None:
                shutil.copytree(tmp, keep / f"{side}-{config}-{method}", dirs_exist_ok=True)
    out["compile_s"] = time.perf_counter() - t0
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forms", nargs="+", default=list(FORMS), choices=FORMS)
    ap.add_argument("--methods", nargs="+", default=["decode", "prefill"], choices=["decode", "prefill"])
    ap.add_argument("--configs", nargs="+", default=["a8w8"], choices=QCONFIGS)
    ap.add_argument("--side", default="competitor", choices=["competitor", "ours"],
                    help="ours: the functional form only (each side in a process of its own)")
    ap.add_argument("--out", type=Path, default=bd.CELLS / "competitor_forms.json")
    args = ap.parse_args(argv)
    rows = json.loads(args.out.read_text())["rows"] if args.out.exists() else []
    key = ("side", "form", "method", "config")
    for config in args.configs:
        for form in args.forms if args.side == "competitor" else ["functional"]:
            for method in args.methods:
                row = lower_form(form, method, config) if args.side == "competitor" else ours_functional(method, config)
                rows = [r for r in rows if tuple(r.get(k, "competitor" if k == "side" else "a8w8") for k in key)
                        != tuple(row[k] for k in key)] + [row]
                print(json.dumps(row), flush=True)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps({"target": bd.TARGET, "model": bd.MODEL, "rows": rows}, indent=1,
                                               default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
