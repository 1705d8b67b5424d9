"""The partitioned graph of a lowered program, for Google's Model Explorer (`ai-edge-model-explorer`).

`write_model_explorer_files(lowered, out_dir)` writes

- `graph.json`: a Model Explorer graph collection (its JSON graph format, what the `graph_builder`
  dataclasses serialize to): one node per operator, each delegated partition's operators inside a
  layer named `partition <i> (<backend>)`, the CPU operators at the top level with their reason;
- one node-data file per measure (Model Explorer's node-data format, `node_data_builder`):
  `partition.json` (the partition index, -1 on the CPU) and whatever `node_values` holds (`arm-compile`
  adds `npu_cycles` for Ethos-U targets and `sqnr_db` with `--accuracy-report`).

Writing needs nothing beyond this package; viewing needs the `explore` extra
(`pip install "arm-tosa-core[explore]"`, which the workspace installs): `open_in_model_explorer(files)`
starts Model Explorer on them from a terminal, and elsewhere returns the command that does.
"""

from __future__ import annotations

import json
import math
import operator
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from executorch.exir import memory
from executorch.exir.lowered_backend_module import executorch_call_delegate
from torch.export import ExportedProgram

from .delegation import cpu_reason
from .intermediates import source_names

GRAPH_FILE = "graph.json"
# what to_executorch adds to a lowered program (it plans memory in place)
_MEMORY_PLANNING = {memory.alloc, memory.free, memory.view}
CPU_PARTITION = -1
# Colours per measure: (value, background) thresholds or two gradient stops (low, high).
_PARTITION_THRESHOLDS = [{"value": CPU_PARTITION, "bgColor": "#f6b4b4"}, {"value": 1e9, "bgColor": "#b4d7f6"}]
_GRADIENTS = {"npu_cycles": ("#ffffff", "#f39c32"), "sqnr_db": ("#e74c3c", "#2ecc71")}


@dataclass(frozen=True)
class ModelExplorerFiles:
    graph: Path
    node_data: dict[str, Path]

    def command(self) -> str:
        """The shell command that opens these files in Model Explorer."""
        data = ",".join(str(p) for p in self.node_data.values())
        return f"model-explorer {self.graph}" + (f" --node_data_paths={data}" if data else "")


@dataclass
class ExplorerNode:
    """One node of the graph Model Explorer shows."""

    id: str
    label: str
    namespace: str
    inputs: list[str]
    attrs: dict[str, str]
    names: tuple[str, ...]  # the torch node names it answers to (node_values keys)
    partition: int | None = None  # None: not an operator (graph input or output)


def _op_label(node: torch.fx.Node) -> str:
    name = getattr(node.target, "__name__", str(node.target))
    return name.split(".")[0] if name != "getitem" else "getitem"


def _shape(node: torch.fx.Node) -> str:
    val = node.meta.get("val")
    vals = val if isinstance(val, (tuple, list)) else [val]
    return "; ".join(f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}" for v in vals
                     if isinstance(v, torch.Tensor))




def _names(node: torch.fx.Node) -> tuple[str, ...]:
    """The node's name, then the names it had in the graphs it was made from, nearest first (export
    and to_edge rename nodes: a quantized model's `conv2d_2` becomes `aten_conv2d_default_2`), so
    measures taken on the model (SQNR) or on the lowering (NPU cycles) find it."""
    return (node.name, *[name for name, _ in source_names(node)])


def _assign(nodes: list[ExplorerNode], by_name: Mapping[str, float]) -> dict[str, float]:
    """{node id: value}: each name's value goes to the one node that is nearest to it (its own name
    before the name of a graph it came from: a quantize node also descends from the relu it
    observes, further up)."""
    best: dict[str, tuple[int, str]] = {}
    for node in nodes:
        for distance, name in enumerate(node.names):
            if name in by_name and (name not in best or distance < best[name][0]):
                best[name] = (distance, node.id)
    return {node_id: float(by_name[name]) for name, (_, node_id) in best.items()}


def _finite(value: float) -> bool:
    # node data is JSON for a browser: no Infinity/NaN (an error-free layer's SQNR is inf)
    return math.isfinite(value)




def _user_inputs(ep: ExportedProgram) -> list[str]:
    return list(ep.graph_signature.user_inputs)


@dataclass(frozen=True)
class PartitionedGraph:
    """The operators of a lowered program as Model Explorer will show them."""

    nodes: list[ExplorerNode]


def partitioned_graph(lowered: Any) -> PartitionedGraph:
    """The graph of `lowered` (an EdgeProgramManager or ExportedProgram after
    `to_edge_transform_and_lower`), taken before `to_executorch`, which renames the CPU operators
    (out variants) and adds buffers in place."""
    ep = lowered.exported_program() if hasattr(lowered, "exported_program") else lowered
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"partitioned_graph takes a lowered program, not {type(lowered).__name__}")
    return PartitionedGraph(_graph_nodes(ep))


def _graph_nodes(ep: ExportedProgram) -> list[ExplorerNode]:
    gm, nodes, source = ep.graph_module, [], {}  # source: fx node -> the graph node id it reads from
    user_inputs = set(_user_inputs(ep))
    partition = 0
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            if node.name in user_inputs:
                source[node] = node.name
                nodes.append(ExplorerNode(node.name, "input", "", [], {"shape": _shape(node)}, (node.name,)))
        elif node.op == "output":
            ins = [source[a] for a in node.all_input_nodes if a in source]
            nodes.append(ExplorerNode("output", "output", "", ins, {}, ()))
        elif node.op != "call_function" or node.target in _MEMORY_PLANNING:
            continue  # lowered-module attributes; to_executorch's buffers (not operators)
        elif node.target is executorch_call_delegate:
            lowered = getattr(gm, node.args[0].target)
            inner, outputs = _partition_nodes(lowered, partition, [source.get(a) for a in node.args[1:]])
            nodes += inner
            source[node] = outputs
            partition += 1
        elif node.target is operator.getitem and isinstance(source.get(node.args[0]), list):
            source[node] = source[node.args[0]][node.args[1]]  # a delegate's output j
        else:
            ins = [source[a] for a in node.all_input_nodes if isinstance(source.get(a), str)]
            source[node] = node.name
            nodes.append(ExplorerNode(node.name, _op_label(node), "", ins,
                               {"target": str(node.target), "shape": _shape(node), "placement": "CPU",
                                "cpu_reason": cpu_reason(node)}, _names(node), CPU_PARTITION))
    return nodes


def _partition_nodes(lowered: Any, index: int, outer: list[str | None]) -> tuple[list[ExplorerNode], list[str]]:
    """The operators of one delegated partition, inside the layer "partition <i> (<backend>)"; and the
    node id each of its outputs comes from."""
    ep: ExportedProgram = lowered.original_module
    namespace = f"partition {index} ({lowered.backend_id})"
    source: dict[torch.fx.Node, str] = {}
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    for name, outer_id in zip(_user_inputs(ep), outer, strict=False):
        if outer_id is not None:
            source[placeholders[name]] = outer_id
    nodes, outputs = [], []
    for node in ep.graph.nodes:
        if node.op == "call_function":
            node_id = f"p{index}/{node.name}"
            source[node] = node_id
            ins = [source[a] for a in node.all_input_nodes if a in source]
            nodes.append(ExplorerNode(node_id, _op_label(node), namespace, ins,
                               {"target": str(node.target), "shape": _shape(node),
                                "placement": f"partition {index}", "backend": lowered.backend_id},
                               _names(node), index))
        elif node.op == "output":
            outputs = [source.get(a, "") for a in node.args[0]]
    return nodes, outputs


def _graph_json(graph_id: str, nodes: list[ExplorerNode], measures: Mapping[str, Mapping[str, float]]
                ) -> dict:
    out = []
    for n in nodes:
        attrs = dict(n.attrs)
        if n.partition is not None:
            attrs["partition"] = str(n.partition)
        for measure, by_id in measures.items():
            if n.id in by_id:
                attrs[measure] = f"{by_id[n.id]:.6g}"
        out.append({
            "id": n.id, "label": n.label, "namespace": n.namespace,
            "attrs": [{"key": k, "value": v} for k, v in attrs.items() if v != ""],
            "incomingEdges": [{"sourceNodeId": s, "sourceNodeOutputId": "0", "targetNodeInputId": str(i)}
                              for i, s in enumerate(n.inputs)],
        })
    return {"id": graph_id, "nodes": out}


def _node_data(graph_id: str, measure: str, results: dict[str, float]) -> dict:
    data: dict[str, Any] = {"name": measure, "results": {k: {"value": v} for k, v in results.items()}}
    if measure == "partition":
        data["thresholds"] = _PARTITION_THRESHOLDS
    else:
        low, high = _GRADIENTS.get(measure, ("#ffffff", "#3498db"))
        data["gradient"] = [{"stop": 0, "bgColor": low}, {"stop": 1, "bgColor": high}]
    return {graph_id: data}


def write_model_explorer_files(lowered: Any, out_dir: str | os.PathLike, name: str = "model",
                               node_values: Mapping[str, Mapping[str, float]] | None = None
                               ) -> ModelExplorerFiles:
    """Write the partitioned graph of `lowered` (an EdgeProgramManager or ExportedProgram after
    `to_edge_transform_and_lower`, or the `partitioned_graph` taken of one) and its node data into
    `out_dir`; `name` becomes the graph's id and label.

    `node_values`: extra measures, {measure: {torch node name: value}}; a name is that of a node of
    the lowered program or of one it was made from (the quantized model's, for instance), and each
    measure becomes `<measure>.json` and a node attribute.
    """
    graph_of = lowered if isinstance(lowered, PartitionedGraph) else partitioned_graph(lowered)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    nodes = graph_of.nodes
    measures = {measure: _assign(nodes, by_name) for measure, by_name in (node_values or {}).items()}
    graph = out / GRAPH_FILE
    graph.write_text(json.dumps({"label": name, "graphs": [_graph_json(name, nodes, measures)]}, indent=1))
    measures = {"partition": {n.id: n.partition for n in nodes if n.partition is not None}, **measures}
    paths = {}
    for measure, by_id in measures.items():
        results = {k: v for k, v in by_id.items() if _finite(v)}
        if results:
            paths[measure] = out / f"{measure}.json"
            paths[measure].write_text(json.dumps(_node_data(name, measure, results), indent=1))
    return ModelExplorerFiles(graph, paths)


def is_interactive() -> bool:
    """Run from a terminal, outside CI: where starting a browser makes sense."""
    return sys.stdin.isatty() and sys.stdout.isatty() and not os.environ.get("CI")


def open_in_model_explorer(files: ModelExplorerFiles, launch: bool | None = None) -> str:
    """Start Model Explorer on the files (blocks until its server stops) when `launch` (default: when
    run from a terminal outside CI); otherwise, or without the package, return what to run."""
    command = files.command()
    if not (is_interactive() if launch is None else launch):
        return f"Model Explorer files written; open them with: {command}"
    try:
        import model_explorer
    except ImportError:
        return (f"Model Explorer files written; Model Explorer is not installed (pip install "
                f'"arm-tosa-core[explore]", or `uv sync` in the workspace), then run: {command}')
    config = model_explorer.config().add_model_from_path(str(files.graph))
    for path in files.node_data.values():
        config.add_node_data_from_path(str(path))
    model_explorer.visualize_from_config(config)
    return f"Model Explorer closed; reopen with: {command}"
