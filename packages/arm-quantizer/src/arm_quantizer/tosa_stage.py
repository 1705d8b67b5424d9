"""The TOSA stage of the quantization error report: each layer's output on the reference model.

Given the program lowered from the ``convert_pt2e`` model (``to_edge_transform_and_lower`` of its
export, with any of this toolkit's partitioners), each layer's output quantize node is found in the
delegate partitions through torch's provenance (``meta["from_node"]``), and:

* cumulative: the whole program runs once per sample on the reference model with every layer's
  int8 output exposed as an extra TOSA output (``arm_tosa_core.intermediates``; the program's own
  arithmetic is unchanged), dequantized and compared with the float model's value;
* isolated: the layer alone (``lower_region``: its nodes between the int8 values it reads and its
  output) runs on the reference model, fed the float model's inputs rounded to int8 at the scales
  of the quantize nodes producing them. An integer graph takes only integer inputs, so that rounding
  cannot be left out; it is charged to the producer as in the fake-quant stage: the reference is the
  float layer on the same rounded inputs (the model input's rounding stays the first layer's).

Layers whose output stays on the CPU (outside every delegate) have no TOSA stage (None).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import fx

from arm_tosa_core.intermediates import (
    DelegatePartition,
    IntermediateRunner,
    delegate_partitions,
    dequantized,
    lower_region,
    quiet_stdout,
    source_names,
)
from arm_tosa_core.lowering import constant_of
from arm_tosa_core.reference import run_tosa

from .accuracy import Layer, _flat, _run, is_quantize, isolated_env, sqnr_db


class _Power:
    """Signal and noise power summed over samples."""

    def __init__(self) -> None:
        self.signal = self.noise = 0.0

    def add(self, ref: torch.Tensor, got: torch.Tensor) -> None:
        self.signal += float((ref ** 2).sum())
        self.noise += float(((ref - got.reshape(-1)) ** 2).sum())

    @property
    def db(self) -> float:
        return sqnr_db(self.signal, self.noise)


def _partition_nodes(quantized: fx.GraphModule, parts: list[DelegatePartition]
                     ) -> tuple[dict[fx.Node, tuple[DelegatePartition, fx.Node]], dict[fx.Node, fx.Node]]:
    """(quantize node of ``quantized`` -> the partition node computing it, or else one reading it;
    every partition quantize node or runtime placeholder -> the quantize node of ``quantized``)."""
    gm_nodes = {n.name: n for n in quantized.graph.nodes}
    gid = id(quantized.graph)
    found: dict[fx.Node, tuple[DelegatePartition, fx.Node]] = {}
    back: dict[fx.Node, fx.Node] = {}
    for part in parts:
        for node in part.program.graph.nodes:
            chain = source_names(node)
            # the user's graph by identity; by name only when the chain never reaches it
            names = [n for n, g in chain if g == gid] or [n for n, _ in chain]
            source = next((gm_nodes[n] for n in names if n in gm_nodes), None)
            if source is not None and is_quantize(source) and (
                    node.op == "placeholder" or is_quantize(node)):
                back[node] = source
                # a value read by a later partition is that partition's placeholder: keep the producer
                if node.op != "placeholder" or source not in found:
                    found[source] = (part, node)
    return found, back


def _region_feed(part: DelegatePartition, out: fx.Node) -> list[fx.Node]:
    """The int8 values (quantize nodes, runtime placeholders) the layer ending in ``out`` reads."""
    feed, seen, stack = [], set(), list(out.all_input_nodes)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.op == "placeholder":
            if constant_of(part.program, node) is None:
                feed.append(node)
        elif is_quantize(node):
            feed.append(node)
        elif node.op == "call_function":
            stack.extend(node.all_input_nodes)
    order = {n: i for i, n in enumerate(part.program.graph.nodes)}
    return sorted(feed, key=order.__getitem__)


def _quantize_like(q: fx.Node, env: dict) -> torch.Tensor:
    """``q``'s int codes for the float value its input has in ``env``."""
    args = [env[a] if isinstance(a, fx.Node) else a for a in q.args]
    return q.target(*args)


def tosa_stages(quantized: fx.GraphModule, layers: Sequence[Layer], samples: Sequence[tuple],
                lowered: Any, isolated: bool = True) -> tuple[dict[str, tuple[float | None, float | None]],
                                                              float]:
    """{layer name: (cumulative dB, isolated dB)} on the reference model, and the output's SQNR.

    ``lowered``: the EdgeProgramManager (or ExportedProgram) from ``to_edge_transform_and_lower``
    of ``torch.export.export(quantized, ...)``."""
    nodes = {n.name: n for n in quantized.graph.nodes}
    parts = delegate_partitions(lowered)
    where, back = _partition_nodes(quantized, parts)
    out_q = {layer.name: next(u for u in nodes[layer.name].users if is_quantize(u)) for layer in layers}
    on_npu = {name: where[q] for name, q in out_q.items()
              if q in where and where[q][1].op != "placeholder"}
    chosen = {pn for _, pn in on_npu.values()}
    regions: dict[str, tuple[Any, list[fx.Node]] | None] = {}
    if isolated:
        for name, (part, pn) in on_npu.items():
            feed = _region_feed(part, pn)
            if all(f in back for f in feed):
                regions[name] = (lower_region(part, feed, [pn]), [back[f] for f in feed])
    cum = {name: _Power() for name in on_npu}
    iso = {name: _Power() for name in regions}
    output = _Power()
    by_name = {layer.name: layer for layer in layers}
    runner = IntermediateRunner(lowered, chosen.__contains__)
    with quiet_stdout():  # one version note per reference-model run otherwise
        for sample in samples:
            float_env, float_out = _run(quantized, sample, active=set())
            got_out, seen = runner.run(sample)
            output.add(_flat(float_out), _flat(got_out))
            for name, (_, pn) in on_npu.items():
                cum[name].add(_flat(float_env[nodes[name]]), seen[pn].reshape(-1))
            for name, (graph, feed_gm) in regions.items():
                layer = by_name[name]
                codes = [_quantize_like(q, float_env) for q in feed_gm]
                (got,) = run_tosa(graph.flatbuffer, codes)
                got = dequantized(got, graph.outputs[0])
                rounded_inputs = {q for q in feed_gm if q.name not in layer.quantizers}
                ref_env = isolated_env(quantized, layer, nodes, float_env, active=rounded_inputs)
                iso[name].add(_flat(ref_env[nodes[name]]), got)
    stages = {layer.name: (cum[layer.name].db if layer.name in cum else None,
                           iso[layer.name].db if layer.name in iso else None) for layer in layers}
    return stages, output.db
