"""Intermediate values of a lowered program on the TOSA reference model (a debugging lowering).

A delegate's TOSA graph returns only what the rest of the program reads. To look inside it:

- `run_with_intermediates` lowers each delegate's partition again, with the same `lower_program`,
  spec and settings its backend used, plus the chosen nodes' values as extra graph outputs
  (`lower_program(..., expose=...)`); runs the program with those graphs on the reference model;
  and returns the chosen values dequantized with their qparams, keyed by the partition's node.
  The program's own outputs are what `run_on_reference_model` returns (the extra outputs only keep
  tensors alive; they change no arithmetic).
- `StatefulIntermediateRunner` does the same for the methods of a multi-method program that share
  buffers (a decoder's `prefill` and `decode` with a KV cache), one call at a time, keeping the buffers
  between calls: the per-node trace of one decode step (`arm-ethosu`'s a16w8 decoder test says what one found).
- `lower_region` lowers just the part of a partition between chosen inputs and outputs, so one
  layer can run alone on inputs the caller gives (fed in the nodes' storage dtype: int8 codes for a
  quantize node).

Partition nodes keep torch's provenance (`node.meta["from_node"]`), so `source_names` maps them back
to the nodes of the graph the user exported (the `convert_pt2e` model, for instance).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from executorch.exir.lowered_backend_module import LoweredBackendModule
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind
from torch.fx import Node

from .builder import TosaGraphBuilder
from .compile_spec import TosaCompileSpec
from .context import LoweringContext
from .lowering import TosaGraph, constant_of, emit_outputs, lower_node, lower_program
from .quantized import is_quantize, mark_quantized_region
from .reference import _DelegatingInterpreter, _run_exported, run_tosa
from .specification import TosaSpecification
from .trial_lowering import _external_value


@dataclass
class DelegatePartition:
    """One delegate of a lowered program: its partition program and how its backend lowered it."""

    name: str  # the delegate's attribute in the program (lowered_module_0, ...)
    program: ExportedProgram
    spec: TosaSpecification
    fold_rescales: bool
    processed: bytes
    int16_fc_rescale16: bool = False

    def lower(self, expose: Sequence[Node] = ()) -> TosaGraph:
        """The partition's TOSA graph, as its backend lowered it, plus `expose` as extra outputs."""
        mark_quantized_region(self.program.graph)
        return lower_program(self.program, self.spec, self.fold_rescales, expose, self.int16_fc_rescale16)


def delegate_partitions(program: Any) -> list[DelegatePartition]:
    """The delegates of an EdgeProgramManager or ExportedProgram (after to_edge_transform_and_lower)
    whose compile specs are this toolkit's (TOSA, Ethos-U, VGF), in graph order."""
    ep = program.exported_program() if hasattr(program, "exported_program") else program
    out = []
    for node in ep.graph_module.graph.nodes:
        if node.op != "get_attr":
            continue
        lowered = getattr(ep.graph_module, node.target)
        if not isinstance(lowered, LoweredBackendModule):
            continue
        try:
            settings = TosaCompileSpec.settings_from_list(list(lowered.compile_specs))
        except ValueError:
            continue  # another toolkit's delegate: no TOSA graph to look into
        spec = TosaSpecification.create_from_string(settings["tosa_spec"])
        out.append(DelegatePartition(node.target, lowered.original_module, spec,
                                     bool(settings.get("fold_rescales", False)), bytes(lowered.processed_bytes),
                                     bool(settings.get("int16_fc_rescale16", False))))
    return out


def dequantized(tensor: torch.Tensor, entry: dict) -> torch.Tensor:
    """A graph output as real numbers: (q - zero_point) * scale when its description has qparams."""
    q = entry.get("qparams")
    if q is None:
        return tensor.double()
    return (tensor.double() - q["zero_point"]) * q["scale"]


class IntermediateRunner:
    """A program whose delegates' chosen nodes are exposed: lowered once, run per call (see
    ``run_with_intermediates``)."""

    def __init__(self, program: Any, select: Callable[[Node], bool]) -> None:
        self.ep = program.exported_program() if hasattr(program, "exported_program") else program
        self.graphs: dict[bytes, tuple[TosaGraph, list[Node]]] = {}
        for part in delegate_partitions(self.ep):
            chosen = [n for n in part.program.graph.nodes if n.op == "call_function" and select(n)]
            self.graphs[part.processed] = (part.lower(chosen), chosen)

    def run(self, inputs: Sequence[Any]) -> tuple[Any, dict[Node, torch.Tensor]]:
        seen: dict[Node, torch.Tensor] = {}
        return _run_exported(self.ep, inputs, _exposing_runner(self.graphs, seen)), seen


def _exposing_runner(graphs: dict[bytes, tuple[TosaGraph, list[Node]]], seen: dict[Node, torch.Tensor]):
    """A delegate runner over the exposing graphs (by the delegate's processed bytes): runs one on the
    reference model, records its extra outputs dequantized in `seen`, returns the delegate's own."""

    def runner(backend_id: str, processed: bytes, compile_specs: list, args: list) -> list[torch.Tensor]:
        graph, chosen = graphs[bytes(processed)]
        outs = run_tosa(graph.flatbuffer, args)
        n_own = len(outs) - len(chosen)
        for node, out, entry in zip(chosen, outs[n_own:], graph.outputs[n_own:], strict=True):
            seen[node] = dequantized(out, entry)
        return outs[:n_own]

    return runner


class StatefulIntermediateRunner:
    """The methods of a multi-method lowered program (a decoder's `prefill` and `decode`: an
    EdgeProgramManager, before or after `to_executorch`) run one call at a time on the reference model,
    chosen delegate nodes exposed as in `IntermediateRunner`. The buffers live here (`state`, by name),
    shared between methods, so what one call writes (a KV cache) is what the next reads; a node-by-node
    trace of decode step k needs that (`ep.module()` cannot unlift a program whose delegate writes
    buffers). Each method's delegates are lowered once."""

    def __init__(self, program: Any, methods: Sequence[str], select: Callable[[Node], bool]) -> None:
        self.eps = {m: program.exported_program(m) for m in methods}
        self.graphs: dict[bytes, tuple[TosaGraph, list[Node]]] = {}
        self.state: dict[str, torch.Tensor] = {}
        for ep in self.eps.values():
            for part in delegate_partitions(ep):
                chosen = [n for n in part.program.graph.nodes if n.op == "call_function" and select(n)]
                self.graphs[part.processed] = (part.lower(chosen), chosen)
            for spec in ep.graph_signature.input_specs:
                if spec.kind == InputKind.BUFFER and spec.target not in self.state:
                    self.state[spec.target] = _lifted(ep, spec.target).clone()

    def run(self, method: str, inputs: Sequence[Any]) -> tuple[Any, dict[Node, torch.Tensor]]:
        """(the method's outputs, {partition node: value}) for one call on the current `state`."""
        ep, seen = self.eps[method], {}
        user = iter(inputs)
        args = [next(user) if spec.kind == InputKind.USER_INPUT
                else self.state[spec.target] if spec.kind == InputKind.BUFFER else _lifted(ep, spec.target)
                for spec in ep.graph_signature.input_specs]
        outs = _DelegatingInterpreter(ep.graph_module, _exposing_runner(self.graphs, seen)).run(*args)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        specs = ep.graph_signature.output_specs
        if len(outs) == len(specs):  # the lifted form returns each written buffer
            for spec, value in zip(specs, outs, strict=True):
                if spec.kind == OutputKind.BUFFER_MUTATION:
                    self.state[spec.target] = value
            outs = [v for spec, v in zip(specs, outs, strict=True) if spec.kind == OutputKind.USER_OUTPUT]
        # else to_executorch's form: it returns the user outputs and copy_'s each buffer in place
        return (outs[0] if len(outs) == 1 else tuple(outs)), seen


def _lifted(ep: ExportedProgram, name: str) -> torch.Tensor:
    """A lifted parameter, buffer or constant of `ep` by its signature name."""
    return ep.state_dict[name] if name in ep.state_dict else ep.constants[name]


def run_with_intermediates(program: Any, inputs: Sequence[Any], select: Callable[[Node], bool]
                           ) -> tuple[Any, dict[Node, torch.Tensor]]:
    """Run `program` (EdgeProgramManager or ExportedProgram) with its delegates on the reference
    model; return (its outputs, {partition node: value}) for every delegate node `select` picks
    (placeholders and outputs excluded), each value dequantized and in PyTorch's layout. For many
    runs, build one `IntermediateRunner` (it lowers once)."""
    return IntermediateRunner(program, select).run(inputs)


def lower_region(part: DelegatePartition, feed: Sequence[Node], outputs: Sequence[Node]) -> TosaGraph:
    """The TOSA graph computing `outputs` of a partition from `feed` (graph inputs, in that order,
    each in its node's storage dtype), with the partition's spec and settings. Only the nodes between
    them are lowered; other inputs the region reads (placeholders) become further graph inputs, after
    `feed`, and `graph.inputs` names them all."""
    ep = part.program
    mark_quantized_region(ep.graph)
    fed = set(feed)
    members: set[Node] = set()
    stack = list(outputs)
    while stack:
        node = stack.pop()
        if node in members or node in fed or node.op != "call_function":
            continue
        members.add(node)
        stack.extend(node.all_input_nodes)
    builder = TosaGraphBuilder()
    builder.fold_rescales = part.fold_rescales
    builder.int16_fc_rescale16 = part.int16_fc_rescale16
    ctx = LoweringContext(part.spec, builder)
    inputs = []
    for node in feed:
        ctx.values[node] = _external_value(ep, ctx, node)
        inputs.append({"name": node.name})
    for node in ep.graph.nodes:
        if node not in members:
            continue
        for arg in node.all_input_nodes:
            if arg not in members and arg not in ctx.values:
                ctx.values[arg] = _external_value(ep, ctx, arg)
                if constant_of(ep, arg) is None:
                    inputs.append({"name": arg.name})
        lower_node(ctx, node)
    builder.current_node = None
    described = emit_outputs(ctx, list(outputs))
    return TosaGraph(builder.serialize(), inputs, described, builder.op_counts(),
                     [r.__dict__ for r in builder.records])


def source_names(node: Node) -> list[tuple[str, int]]:
    """(name, id of its graph) of every node in `node`'s provenance chain (torch's `from_node`),
    nearest first: `id(gm.graph)` tells the user's graph from the intermediate ones."""
    names, stack = [], list(node.meta.get("from_node") or [])
    while stack:
        source = stack.pop(0)
        names.append((source.name, source.graph_id))
        stack.extend(source.from_node or [])
    return names


def quantize_nodes(part: DelegatePartition) -> list[Node]:
    """The partition's quantize nodes (its int8/int16 activations), in graph order."""
    return [n for n in part.program.graph.nodes if is_quantize(n)]


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Silence the process's stdout (file descriptor 1) for many reference-model runs: each prints a
    version note on reading a TOSA 1.0 graph with its 1.1 library. Failures still raise (the
    reference model's status is checked in Python), and stderr is untouched."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
