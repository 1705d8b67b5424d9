"""PT2E quantization of a decoder exported as several methods that share a KV cache (`prefill`, `decode`).

Each method's graph is prepared with its own quantizer, but the prepared (and converted) modules are
given the *same* cache buffers, so calibration runs the real sequence (prefill, then decode steps that
read what prefill wrote) and the converted modules form the fake-quant reference a lowered program is
compared with.

With `cache_qparams` the caches are stored quantized in the program itself (`store_caches_quantized`):
int8 (int16 under a16w8) buffers with fixed scales that every method shares, read by a dequantize
and written by a quantize that both lower into the method's partition, so no float cache and no
quantize/dequantize between calls remain on the CPU. The scales are stated or calibrated once on the
float model (`calibrate_cache_qparams`); the rescale from the cache's scale into the attention's
happens in the attention's own integer rules (the matmuls' output RESCALE)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from torch.fx import GraphModule
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from arm_tosa_core.hf_static_cache import export_hf_methods, hf_runner, hf_step_inputs
from arm_tosa_core.kv_cache_models import export_methods, greedy_decode, method_inputs
from arm_tosa_core.quantized import is_dequantize, is_quantize

from .config import get_symmetric_quantization_config
from .int16_fallback import KEPT_INT8_META, MAX_ROUNDS, int16_nodes, own_cpu_reasons

#: the buffers some method writes (`_mutated_state`), on each module `quantize_methods` returns
STATE_META = "arm_state_buffers"


def share_buffers(modules: dict[str, GraphModule], suffix: str = "_cache", names: set[str] = frozenset()) -> None:
    """Make every module use the first module's buffers whose names end with `suffix` or are in `names`."""
    first, *rest = modules.values()
    for name, buf in first.named_buffers():
        if not name.endswith(suffix) and name not in names:
            continue
        *path, leaf = name.split(".")
        for module in rest:
            owner = module
            for part in path:
                owner = getattr(owner, part)
            setattr(owner, leaf, buf)


def reset_buffers(modules: dict[str, GraphModule], suffix: str = "_cache", names: set[str] = frozenset()) -> None:
    """Zero the buffers whose names end with `suffix` or are in `names`, and the state a method of
    `quantize_methods` writes (`STATE_META`: e.g. transformers' `key_cache_0`, `cumulative_length_0`)."""
    for module in modules.values():
        state = module.meta.get(STATE_META, ()) if hasattr(module, "meta") else ()
        for name, buf in module.named_buffers():
            if name.endswith(suffix) or name in names or name in state:
                buf.zero_()


def quantize_methods(programs: dict[str, torch.export.ExportedProgram], make_quantizer: Callable,
                     calibrate: Callable[[Callable[[str, tuple], torch.Tensor]], object],
                     cache_qparams: dict[str, tuple[float, int]] | None = None,
                     partitioner=None) -> dict[str, GraphModule]:
    """prepare every method, share their caches, `calibrate(run)` (run(method, inputs) on the prepared
    modules), convert, share again and zero the caches. Returns the converted modules by method.

    `cache_qparams` (buffer name -> (scale, zero_point), e.g. from `calibrate_cache_qparams`) fixes the
    caches' qparams in every method and stores the caches quantized (`store_caches_quantized`).

    With the target's `partitioner` (a `TOSAPartitioner`), int16 goes only where it lowers, as in mixed
    precision (`int16_fallback`): the single int16 ops a method's partitioner leaves on the CPU by their
    own rules (an int16 TABLE more than 1 LSB off: RMSNorm's rsqrt, softmax's exp and reciprocal) are set
    back to int8 (RESCALEs around them stay in the partition), so an a16w8 decoder is one partition per
    method. Each module's `meta[KEPT_INT8_META]` lists them with the reasons."""
    return _int16_where_it_lowers(programs, partitioner, lambda kept: _quantize_once(
        programs, make_quantizer, calibrate, cache_qparams, kept))


def _int16_where_it_lowers(programs: dict[str, torch.export.ExportedProgram], partitioner,
                           quantize: Callable[[dict[str, dict[str, str]]], dict[str, GraphModule]]
                           ) -> dict[str, GraphModule]:
    """`quantize(kept)` (method -> {node name: reason}, those nodes int8) with none kept, then with the
    int16 nodes each method's partitioner leaves on the CPU, until none is new (`MAX_ROUNDS`). No int8
    reference is asked for (`keep_int8_where_int16_stays_on_cpu` asks one): a node the target leaves on
    the CPU at int8 too would also be set int8, which costs precision only on a CPU node."""
    kept: dict[str, dict[str, str]] = {name: {} for name in programs}
    converted = quantize(kept)
    if partitioner is None:
        return converted
    reasons = {name: own_cpu_reasons(partitioner, ep.example_inputs[0]) for name, ep in programs.items()}
    for _ in range(MAX_ROUNDS):
        new = False
        for name, module in converted.items():
            wide = int16_nodes(module)
            cpu = reasons[name](module) if wide else {}
            reset_buffers(converted, names=_mutated_state(programs))  # the decision ran the module on the shared state
            for node, reason in cpu.items():
                if node in wide and node not in kept[name]:
                    kept[name][node], new = reason, True
        if not new:
            break
        converted = quantize(kept)
    for name, module in converted.items():
        module.meta[KEPT_INT8_META] = dict(kept[name])
    return converted


def _mutated_state(programs: dict[str, torch.export.ExportedProgram]) -> set[str]:
    """The buffers some method writes: its signature's mutations (a functionalized program) and every
    buffer an in-place op writes, directly or through a view. `torch.export.export`'s program keeps
    `index_copy_` / `copy_` on the buffer and its `buffers_to_mutate` is empty, so the signature alone
    found nothing, and the state of transformers' StaticCache (`key_cache_0`, `cumulative_length_0`: no
    `_cache` suffix) was neither shared, nor zeroed after calibration."""
    names = set()
    for ep in programs.values():
        names |= set(ep.graph_signature.buffers_to_mutate.values())
        buffers = ep.graph_signature.inputs_to_buffers
        names |= {buffers[n.name] for n in ep.graph.nodes if n.op == "placeholder" and n.name in buffers
                  and _written(n)}
    return names


def _written(node: torch.fx.Node) -> bool:
    """Whether an in-place op writes `node`'s tensor, or a view of it (its schema's alias annotations)."""
    for user in node.users:
        schema = getattr(user.target, "_schema", None)
        if user.op != "call_function" or schema is None:
            continue
        for i, arg in enumerate(schema.arguments):
            value = user.args[i] if i < len(user.args) else user.kwargs.get(arg.name)
            if value is node and arg.alias_info is not None and arg.alias_info.is_write:
                return True
        if any(r.alias_info is not None for r in schema.returns) and user.args and user.args[0] is node \
                and _written(user):
            return True  # a view of the buffer, written in place
    return False


def _quantize_once(programs: dict[str, torch.export.ExportedProgram], make_quantizer: Callable,
                   calibrate: Callable[[Callable[[str, tuple], torch.Tensor]], object],
                   cache_qparams: dict[str, tuple[float, int]] | None,
                   kept: dict[str, dict[str, str]]) -> dict[str, GraphModule]:
    # the state every method writes (transformers' StaticCache also keeps a `cumulative_length_<i>`)
    state = _mutated_state(programs)
    prepared = {}
    for name, ep in programs.items():
        quantizer = _with_cache_qparams(make_quantizer(), cache_qparams)
        for node in kept.get(name, ()):
            quantizer.set_node_name(node, get_symmetric_quantization_config())
        prepared[name] = prepare_pt2e(ep.module(), quantizer)
    share_buffers(prepared, names=state)
    reset_buffers(prepared, names=state)
    calibrate(module_runner(prepared))
    converted = {name: convert_pt2e(module) for name, module in prepared.items()}
    for module in converted.values():
        module.meta[STATE_META] = sorted(state)
    if cache_qparams:
        store_caches_quantized(converted, names=set(cache_qparams))
    share_buffers(converted, names=state)
    reset_buffers(converted, names=state)
    return converted


def _with_cache_qparams(quantizer, cache_qparams: dict[str, tuple[float, int]] | None):
    for name, (scale, zero_point) in (cache_qparams or {}).items():
        quantizer.set_buffer_qparams(name, scale, zero_point)
    return quantizer


def calibrate_cache_qparams(model: torch.nn.Module, calibrate: Callable[[Callable[[str, tuple], torch.Tensor]], object],
                            dtype: torch.dtype = torch.int8, suffix: str = "_cache") -> dict[str, tuple[float, int]]:
    """Symmetric qparams (zero point 0, so a zeroed buffer is 0.0) for every cache buffer of the float
    `model`, from the largest |value| each holds while `calibrate(run)` drives the eager model (the same
    sequence the quantizer is calibrated on). `dtype`: the activations' (int8, or int16 for a16w8)."""
    caches = {name: buf for name, buf in model.named_buffers() if name.endswith(suffix)}
    if not caches:
        raise ValueError(f"calibrate_cache_qparams: the model has no buffer whose name ends with {suffix!r}")
    peak = dict.fromkeys(caches, 0.0)
    for buf in caches.values():
        buf.zero_()

    def run(method: str, inputs: tuple) -> torch.Tensor:
        with torch.no_grad():
            out = model(*inputs)
        for name, buf in caches.items():
            peak[name] = max(peak[name], float(buf.abs().max()))
        return out

    calibrate(run)
    for buf in caches.values():
        buf.zero_()
    qmax = torch.iinfo(dtype).max
    return {name: (max(value, 1e-6) / qmax, 0) for name, value in peak.items()}


def store_caches_quantized(modules: dict[str, GraphModule], names: set[str] | None = None,
                           suffix: str = "_cache") -> dict[str, tuple]:
    """Rewrite converted modules so each cache buffer holds its integer codes.

    In a converted module a cache is read as `dequantize(quantize(buf))` and written as
    `buf.copy_(dequantize(q))` with `q = quantize(index_copy(...))`. Here the buffer becomes the codes
    (int8/int16), the read quantize goes (`dequantize(buf)`) and the write stores `q` itself. The fake-
    quant results are unchanged (the float cache only ever held those codes' values). Read and write,
    in every method, must use the same qparams (stated with `cache_qparams`). `names`: the buffers to
    rewrite (default: those ending with `suffix`). Returns name -> (scale, zero_point, dtype)."""
    seen: dict[str, tuple] = {}
    for method, module in modules.items():
        graph = module.graph
        for node in list(graph.nodes):
            if node.op != "get_attr" or not (str(node.target) in names if names is not None
                                             else str(node.target).endswith(suffix)):
                continue
            name = str(node.target)
            reads = [u for u in node.users if is_quantize(u)]
            writes = [u for u in node.users if u.target is torch.ops.aten.copy_.default]
            stored = [w.args[1].args[0] for w in writes if is_dequantize(w.args[1])]
            params = {tuple(q.args[1:]) for q in reads + stored}
            if len(reads) + len(writes) != len(node.users) or len(stored) != len(writes) or len(params) != 1:
                raise ValueError(f"{method}: cache {name!r} is not read and written through one set of qparams "
                                 f"({sorted(map(str, params))}); state them with quantize_methods(..., "
                                 "cache_qparams=calibrate_cache_qparams(...))")
            (qp,) = params
            if seen.setdefault(name, qp) != qp:
                raise ValueError(f"cache {name!r} is quantized with {seen[name]} in one method and {qp} in "
                                 f"{method!r}; state its qparams with cache_qparams")
            *path, leaf = name.split(".")
            owner = module.get_submodule(".".join(path))
            codes = torch.zeros_like(getattr(owner, leaf), dtype=qp[-1])
            owner.register_buffer(leaf, codes)
            node.meta["val"] = codes
            for read in reads:
                read.replace_all_uses_with(node)
                graph.erase_node(read)
            for write, q in zip(writes, stored, strict=True):
                dq = write.args[1]
                write.args = (node, q)
                if not dq.users:
                    graph.erase_node(dq)
        graph.lint()
        module.recompile()
    return {name: (qp[0], qp[1], qp[-1]) for name, qp in seen.items()}


def module_runner(modules: dict[str, GraphModule]) -> Callable[[str, tuple], torch.Tensor]:
    """`run(method, inputs)` over modules sharing a cache (for `greedy_decode`)."""

    def run(method: str, inputs: tuple) -> torch.Tensor:
        with torch.no_grad():
            return modules[method](*inputs)

    return run


def quantize_and_lower_methods(programs: dict[str, torch.export.ExportedProgram], examples: dict[str, tuple],
                               make_quantizer: Callable, calibrate: Callable[[Callable[[str, tuple], torch.Tensor]], object],
                               partitioner, *, int16_partitioner=None,
                               cache_qparams: dict[str, tuple[float, int]] | None = None
                               ) -> tuple[dict[str, GraphModule], object]:
    """`quantize_methods` (with `cache_qparams`, and `int16_partitioner` as its `partitioner`), export the
    converted modules again on `examples` (method -> example inputs) and lower them with `partitioner`.
    Returns (the converted modules: the fake-quant reference, their cache zeroed; the lowered
    `EdgeProgramManager`).

    `int16_partitioner` (a16w8) sets the int16 ops the target leaves on the CPU back to int8; a separate
    object from `partitioner`, whose per-program state it would otherwise share."""
    converted = quantize_methods(programs, make_quantizer, calibrate, cache_qparams=cache_qparams,
                                 partitioner=int16_partitioner)
    reexported = {m: torch.export.export(converted[m], examples[m], strict=True) for m in converted}
    reset_buffers(converted)  # export ran the modules
    edge = to_edge_transform_and_lower(reexported, partitioner=[partitioner],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    return converted, edge


def quantize_and_lower_hf_methods(model: torch.nn.Module, prompt: torch.Tensor, calibration_steps: int,
                                  make_quantizer: Callable, partitioner, int16_partitioner=None
                                  ) -> tuple[dict[str, GraphModule], object]:
    """`quantize_and_lower_methods` of transformers' StaticCache model (`arm_tosa_core.hf_static_cache`):
    `export_hf_methods`, calibrated on `calibration_steps` greedy steps after `prompt`."""
    n = prompt.numel()
    return quantize_and_lower_methods(
        export_hf_methods(model, prompt_len=n), {"prefill": hf_step_inputs(0, n), "decode": hf_step_inputs(n, 1)},
        make_quantizer, lambda run: greedy_decode(hf_runner(run), prompt, calibration_steps, model.max_len),
        partitioner, int16_partitioner=int16_partitioner)


def quantize_and_lower_decoder_methods(model: torch.nn.Module, prompt: torch.Tensor, calibration_steps: int,
                                       make_quantizer: Callable, partitioner, *, int16_partitioner=None,
                                       cache_qparams: dict[str, tuple[float, int]] | None = None
                                       ) -> tuple[dict[str, GraphModule], object]:
    """`quantize_and_lower_methods` of a `StaticCacheDecoder`-style model (`arm_tosa_core.kv_cache_models`:
    `forward(tokens, input_pos, cache_mask)`, `.max_len`), calibrated on `calibration_steps` greedy steps
    after `prompt`."""
    n = prompt.numel()
    return quantize_and_lower_methods(
        export_methods(model, n, model.max_len), method_inputs(n, model.max_len), make_quantizer,
        lambda run: greedy_decode(run, prompt, calibration_steps, model.max_len), partitioner,
        int16_partitioner=int16_partitioner, cache_qparams=cache_qparams)
