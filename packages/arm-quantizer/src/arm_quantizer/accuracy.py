"""Per-layer quantization error: SQNR of every quantized layer's output against the float model.

A *layer* is a node of the converted (``convert_pt2e``) graph whose output is quantized, together
with the unquantized nodes feeding it inside its fused pattern (a conv and its ReLU are one layer),
the quantize/dequantize pairs of its inputs and weights, and its own output pair. The same graph is
evaluated three ways, so no second export or calibration is needed:

* float: every quantize -> dequantize pair passes its float input through (weights stay float);
* cumulative: every pair quantizes (the model as convert_pt2e made it);
* isolated: only the layer's own pairs quantize (its weights, its output, and the model input if
  it reads it); its inputs are the float run's values.

Weights that ``convert_pt2e`` folded to int8 constants stay int8 in every pass (their float values
are gone), so only activation rounding is measured for them; convert with ``fold_quantize=False``
to charge each layer its weight rounding too (its weight quantizers then count as the layer's).

SQNR = 10 log10(sum(ref^2) / sum((ref - x)^2)) in dB over all evaluation samples, ``inf`` when
exact. A sensitive layer has a low isolated SQNR; accumulated noise shows as a low cumulative SQNR
with a high isolated one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch
from torch import fx

from arm_tosa_core.builder import module_path, torch_op_name

from .accuracy_report import AccuracyReport, LayerError


def is_quantize(node: fx.Node) -> bool:
    """A quantize_per_tensor / quantize_per_channel node (not dequantize)."""
    name = str(node.target)
    return node.op == "call_function" and "quantize_per" in name and "dequantize" not in name


def is_dequantize(node: fx.Node) -> bool:
    return node.op == "call_function" and "dequantize_per" in str(node.target)


def sqnr_db(signal_power: float, noise_power: float) -> float:
    """10 log10(signal / noise); inf for no noise."""
    if noise_power <= 0.0:
        return math.inf
    if signal_power <= 0.0:
        return -math.inf
    return 10.0 * math.log10(signal_power / noise_power)


def _flat(value) -> torch.Tensor:
    leaves = [v for v in torch.utils._pytree.tree_leaves(value) if isinstance(v, torch.Tensor)]
    return torch.cat([v.detach().double().reshape(-1) for v in leaves]) if leaves else torch.zeros(0)


class _QuantInterpreter(fx.Interpreter):
    """Runs a converted graph quantizing only the quantize nodes in ``active`` (None: all of them).

    Quantize nodes in ``int16`` are simulated as symmetric int16 over the same range (a16w8);
    dequantize nodes in ``int16_reads`` read their quantize node's input at int16 that way while
    the quantize node's other dequantize nodes read it at int8 (an int16 value requantized to int8
    for the readers that stay int8).
    """

    def __init__(self, gm: fx.GraphModule, active: set[fx.Node] | None = None,
                 int16: set[fx.Node] | None = None, int16_reads: set[fx.Node] | None = None) -> None:
        super().__init__(gm, garbage_collect_values=False)
        self.active = active
        self.int16 = int16 or set()
        self.int16_reads = int16_reads or set()
        self.passthrough: set[fx.Node] = set()

    def run_node(self, n: fx.Node):
        if n in self.int16_reads and isinstance(n.args[0], fx.Node) and n.args[0] not in self.passthrough:
            q = n.args[0]
            return _fake_int16(self.env[q.args[0]], q, self)
        if is_quantize(n) and ((self.active is not None and n not in self.active) or n in self.int16):
            self.passthrough.add(n)
            x = self.env[n.args[0]] if isinstance(n.args[0], fx.Node) else n.args[0]
            return _fake_int16(x, n, self) if n in self.int16 else x
        if is_dequantize(n) and isinstance(n.args[0], fx.Node) and n.args[0] in self.passthrough:
            return self.env[n.args[0]]
        return super().run_node(n)


def _is_activation(q: fx.Node) -> bool:
    """A per-tensor quantize of a run-time value (not of a weight or bias constant)."""
    src = q.args[0]
    return "per_tensor" in str(q.target) and isinstance(src, fx.Node) and src.op != "get_attr"


def _fake_int16(x: torch.Tensor, q: fx.Node, interp: fx.Interpreter) -> torch.Tensor:
    """Symmetric int16 fake quantization over the range the int8 quantize node covers."""
    scale, zp, qmin, qmax = (interp.env[a] if isinstance(a, fx.Node) else a for a in q.args[1:5])
    scale = torch.as_tensor(scale, dtype=torch.float64)
    zp = torch.as_tensor(zp, dtype=torch.float64)
    if scale.dim() > 0:  # per-channel (weights): keep the weights' own quantization
        return x
    bound = torch.maximum((qmin - zp).abs(), (qmax - zp).abs()) * scale
    s16 = float(bound) / 32767.0
    return (torch.clamp(torch.round(x.double() / s16), -32768, 32767) * s16).to(x.dtype)


@dataclass
class Layer:
    """One quantized layer: the node whose output is quantized and the nodes it owns."""

    name: str  # the node whose output is quantized
    main: str  # the compute node the layer is named after (the conv of conv+relu)
    module: str  # PyTorch module path of ``main`` ("" for the model's own forward)
    op: str
    quantizers: list[str]  # the quantize nodes that are this layer's (inputs, weights, output)
    owner: str = ""  # the innermost module holding all its nodes: what set_module_name moves
    modules: list[str] = field(default_factory=list)  # module paths of its nodes ("" top level)
    nodes: list[str] = field(default_factory=list)  # its compute nodes (``name`` and the fused ones)
    ops: list[str] = field(default_factory=list)  # their short op names, as ``nodes``

    @property
    def label(self) -> str:
        return f"{self.module or '(top level)'} · {self.op}"


def quantized_layers(gm: fx.GraphModule) -> list[Layer]:
    """The quantized layers of a converted graph, in graph order."""
    layers = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or is_quantize(node) or is_dequantize(node):
            continue
        out_q = [u for u in node.users if is_quantize(u)]
        if not out_q:
            continue
        owned, stack, quantizers = [], [node], list(out_q)
        while stack:  # walk back through unquantized inputs of the fused pattern
            cur = stack.pop()
            owned.append(cur)
            for arg in cur.all_input_nodes:
                if is_dequantize(arg):
                    src = arg.args[0]
                    # its weights' and the model input's quantizers; an activation's belongs to
                    # the layer that produced it (so each rounding is charged to one layer)
                    if isinstance(src, fx.Node) and is_quantize(src) and (
                            not isinstance(src.args[0], fx.Node) or src.args[0].op != "call_function"):
                        quantizers.append(src)
                elif arg.op == "call_function" and arg not in owned and not any(
                        is_quantize(u) for u in arg.users):
                    stack.append(arg)
        main = min(owned, key=lambda n: list(gm.graph.nodes).index(n))
        paths = [module_path(n).split(".") for n in owned if module_path(n)]
        owner = []
        if paths and len(paths) == len(owned):
            for parts in zip(*paths, strict=False):
                if len(set(parts)) > 1:
                    break
                owner.append(parts[0])
        layers.append(Layer(node.name, main.name, module_path(main), torch_op_name(main),
                            sorted({q.name for q in quantizers}), ".".join(owner),
                            sorted({module_path(n) for n in owned}), [n.name for n in owned],
                            [torch_op_name(n) for n in owned]))
    return layers


def _run(gm: fx.GraphModule, sample: tuple, active=None, int16=None, int16_reads=None) -> tuple[dict, object]:
    interp = _QuantInterpreter(gm, active, int16, int16_reads)
    with torch.no_grad():
        out = interp.run(*sample)
    return interp.env, out


def _dequantized_output(gm_nodes: dict[str, fx.Node], layer: Layer, env: dict) -> torch.Tensor:
    node = gm_nodes[layer.name]
    q = next(u for u in node.users if is_quantize(u))
    dq = next((u for u in q.users if is_dequantize(u)), q)
    return _flat(env[dq])


def float_output(gm: fx.GraphModule, sample: tuple) -> torch.Tensor:
    """The converted model's outputs with every quantize/dequantize passed through, flattened."""
    return _flat(_run(gm, sample, active=set())[1])


def output_error_db(gm: fx.GraphModule, samples: Sequence[tuple], run) -> float:
    """SQNR (dB) of ``run(*sample)`` (e.g. a .pte on the reference model) vs the float model."""
    sig = noise = 0.0
    for sample in samples:
        ref, got = float_output(gm, sample), _flat(run(*sample))
        sig += float((ref ** 2).sum())
        noise += float(((ref - got) ** 2).sum())
    return sqnr_db(sig, noise)


def output_sqnr(gm: fx.GraphModule, samples: Sequence[tuple], int16: Iterable[str] = (),
                reference: Sequence[torch.Tensor] | None = None) -> float:
    """End-to-end SQNR (dB) of the converted model vs its float evaluation, with the quantize
    nodes of the layers named in ``int16`` simulated as int16 activations (a16w8).

    ``reference``: the float outputs per sample (``float_output``), when already computed."""
    return sqnr_db(*output_power(gm, samples, int16, reference))


def output_power(gm: fx.GraphModule, samples: Sequence[tuple], int16: Iterable[str] = (),
                 reference: Sequence[torch.Tensor] | None = None,
                 layers: Sequence[Layer] | None = None) -> tuple[float, float]:
    """(signal, noise) power summed over ``samples`` behind ``output_sqnr``; ``layers``: the
    graph's ``quantized_layers`` when already computed."""
    nodes = {n.name: n for n in gm.graph.nodes}
    names = set(int16)
    sim = {q for layer in (layers if layers is not None else quantized_layers(gm))
           if layer.name in names for q in layer.quantizers if _is_activation(nodes[q])}
    return power_with_int16(gm, samples, sim, reference)


def power_with_int16(gm: fx.GraphModule, samples: Sequence[tuple], quantizers: Iterable[str],
                     reference: Sequence[torch.Tensor] | None = None,
                     reads: Iterable[str] = ()) -> tuple[float, float]:
    """(signal, noise) power summed over ``samples`` with the activation quantize nodes named in
    ``quantizers`` simulated as int16 over their int8 range, and the dequantize nodes named in
    ``reads`` reading their quantize node's input that way (only those readers see int16)."""
    nodes = {n.name: n for n in gm.graph.nodes}
    sim = {nodes[q] for q in quantizers}
    sim_reads = {nodes[d] for d in reads}
    sig = noise = 0.0
    for i, sample in enumerate(samples):
        ref = reference[i] if reference is not None else float_output(gm, sample)
        got = _flat(_run(gm, sample, int16=sim, int16_reads=sim_reads)[1])
        sig += float((ref ** 2).sum())
        noise += float(((ref - got) ** 2).sum())
    return sig, noise


def quantization_error_report(quantized: fx.GraphModule, samples: Sequence[tuple],
                              isolated: bool = True, lowered=None, target_note: str = "") -> AccuracyReport:
    """SQNR of each quantized layer of a ``convert_pt2e`` model, cumulative and isolated, per stage.

    ``samples``: evaluation inputs, each a tuple of tensors as the model takes them. The float
    reference is the same graph with every quantize/dequantize passed through. ``lowered``: the
    program ``to_edge_transform_and_lower`` made of ``torch.export.export(quantized, ...)`` (any of
    this toolkit's partitioners): adds the TOSA reference-model stage (``tosa_stage.py``) and the
    output's ``output_db["tosa_reference"]``. ``target_note``: what the target column holds.
    """
    if not isinstance(quantized, fx.GraphModule):
        raise TypeError("quantization_error_report needs the GraphModule convert_pt2e returns, got "
                        f"{type(quantized).__name__}")
    if not samples:
        raise ValueError("quantization_error_report needs at least one evaluation sample")
    layers = quantized_layers(quantized)
    if not layers:
        raise ValueError("the model has no quantized layer: pass the module convert_pt2e returns")
    nodes = {n.name: n for n in quantized.graph.nodes}
    power = {k: [0.0, 0.0, 0.0] for k in [layer.name for layer in layers]}  # signal, cum, iso noise
    out_sig = out_noise = 0.0
    for sample in samples:
        float_env, float_out = _run(quantized, sample, active=set())
        quant_env, quant_out = _run(quantized, sample)
        ref_out, got_out = _flat(float_out), _flat(quant_out)
        out_sig += float((ref_out ** 2).sum())
        out_noise += float(((ref_out - got_out) ** 2).sum())
        for layer in layers:
            ref = _flat(float_env[nodes[layer.name]])
            acc = power[layer.name]
            acc[0] += float((ref ** 2).sum())
            acc[1] += float(((ref - _dequantized_output(nodes, layer, quant_env)) ** 2).sum())
            if isolated:
                iso_env = isolated_env(quantized, layer, nodes, float_env)
                acc[2] += float(((ref - _dequantized_output(nodes, layer, iso_env)) ** 2).sum())
    rows = [LayerError(layer.name, layer.label, layer.module, layer.op, sqnr_db(*power[layer.name][:2]),
                       sqnr_db(power[layer.name][0], power[layer.name][2]) if isolated else math.nan)
            for layer in layers]
    report = AccuracyReport(rows, {"fake_quant": sqnr_db(out_sig, out_noise)}, len(samples), target_note)
    if lowered is not None:
        from .tosa_stage import tosa_stages

        stages, report.output_db["tosa_reference"] = tosa_stages(quantized, layers, samples, lowered, isolated)
        for row in rows:
            row.tosa_cumulative_db, row.tosa_isolated_db = stages[row.name]
    return report


def isolated_env(gm: fx.GraphModule, layer: Layer, nodes: dict, float_env: dict,
                 active: set[fx.Node] | None = None) -> dict:
    """Re-evaluate only the layer's nodes over the float values, with the quantize nodes in
    ``active`` on (default: the layer's own quantizers: its weights, output, and model input)."""
    active = {nodes[q] for q in layer.quantizers} if active is None else active
    interp = _QuantInterpreter(gm, active)
    interp.env = dict(float_env)
    interp.passthrough = {n for n in nodes.values() if is_quantize(n) and n not in active}
    start = nodes[layer.main]
    order = list(gm.graph.nodes)
    # the layer's input/weight quantizers, then everything from its first node to its output pair
    first = min(order.index(n) for n in active | {start})
    out_q = next(u for u in nodes[layer.name].users if is_quantize(u))
    last = max(order.index(u) for u in out_q.users) if out_q.users else order.index(out_q)
    todo = {n for n in order[first:last + 1]}
    needed = _ancestors_within(nodes[layer.name], todo) | {out_q, *out_q.users}
    needed |= {u for q in active for u in q.users if is_dequantize(u)}
    needed |= active
    with torch.no_grad():
        for n in order[first:last + 1]:
            if n in needed:
                interp.env[n] = interp.run_node(n)
    return interp.env


def _ancestors_within(node: fx.Node, region: set[fx.Node]) -> set[fx.Node]:
    seen, stack = set(), [node]
    while stack:
        cur = stack.pop()
        if cur in seen or cur not in region:
            continue
        seen.add(cur)
        stack.extend(cur.all_input_nodes)
    return seen
