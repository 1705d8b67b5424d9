"""`arm-compile --explore`: the partitioned graph and its node data in Model Explorer's formats, read
back with Model Explorer's own classes (`model_explorer.graph_builder`, `node_data_builder`, loaded
strictly with dacite, the loader its node-data-provider runner uses for graphs)."""

import json

import pytest
from dacite import Config, from_dict
from model_explorer import config as model_explorer_config
from model_explorer.graph_builder import GraphCollection
from model_explorer.node_data_builder import GraphNodeData

from arm_tosa_core.compile_cli import main
from arm_tosa_core.explore import CPU_PARTITION, ModelExplorerFiles, open_in_model_explorer

# The stride-4 convolution is outside the Ethos-U55 operator set: it stays on the CPU with a reason.
MODEL_FILE = '''
import torch
from torch import nn


def make_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 4, 1), nn.ReLU(),
                          nn.Conv2d(8, 4, 1))
    return model.eval(), (torch.randn(1, 3, 17, 17),)
'''
STRICT = Config(strict=True)


@pytest.fixture(scope="module")
def explored(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("explore")
    path = tmp / "strided.py"
    path.write_text(MODEL_FILE)
    status = main([f"{path}:make_model", "-o", str(tmp / "strided.pte"), "--explore", "--accuracy-report",
                   "--calibration-samples", "2", "--no-verify"])
    assert status == 0
    return tmp / "strided_report" / "model_explorer"


def _graph(folder):
    collection = from_dict(GraphCollection, json.loads((folder / "graph.json").read_text()), STRICT)
    (graph,) = collection.graphs
    return graph


def _node_data(folder, measure, graph_id):
    data = json.loads((folder / f"{measure}.json").read_text())
    return from_dict(GraphNodeData, data[graph_id], STRICT)


def test_cpu_node_carries_its_reason_and_delegated_nodes_their_partition(explored):
    graph = _graph(explored)
    assert graph.id == "make_model"
    attrs = {n.id: {a.key: a.value for a in n.attrs} for n in graph.nodes}
    cpu_convs = [i for i, a in attrs.items() if a.get("placement") == "CPU" and "convolution" in a["target"]]
    assert len(cpu_convs) == 1, attrs
    reason = attrs[cpu_convs[0]]["cpu_reason"]
    assert reason.startswith("ethos-u55-128: ") and "stride [4, 4]" in reason
    partition = _node_data(explored, "partition", graph.id)
    assert partition.results[cpu_convs[0]].value == CPU_PARTITION
    delegated = {n.id: n for n in graph.nodes if n.namespace.startswith("partition ")}
    convs = [i for i in delegated if "convolution" in attrs[i]["target"]]
    assert len(convs) == 2  # the first and the last convolution, in two partitions around the CPU one
    assert {partition.results[i].value for i in convs} == {0, 1}
    for i in convs:
        p = partition.results[i].value
        assert delegated[i].namespace == f"partition {p} (EthosUBackend)" and attrs[i]["partition"] == str(p)
    # edges cross the partition boundaries: the CPU conv reads partition 0's output (through the
    # CPU's dequantize), and partition 1 reads the CPU conv's
    assert "p0/" in _ancestors(graph, cpu_convs[0])
    assert cpu_convs[0] in _ancestors(graph, next(i for i in convs if i.startswith("p1/")))
    assert all(not a.startswith("alloc") for a in attrs)  # to_executorch's buffers are not operators


def _ancestors(graph, node_id: str) -> str:
    """Every node id upstream of `node_id`, joined (for substring checks)."""
    inputs = {n.id: [e.sourceNodeId for e in n.incomingEdges] for n in graph.nodes}
    seen, todo = set(), [node_id]
    while todo:
        for source in inputs[todo.pop()]:
            if source not in seen:
                seen.add(source)
                todo.append(source)
    return " ".join(sorted(seen))


def test_npu_cycles_and_sqnr_per_node(explored):
    graph = _graph(explored)
    cycles = _node_data(explored, "npu_cycles", graph.id)
    sqnr = _node_data(explored, "sqnr_db", graph.id)
    accuracy = json.loads((explored.parent / "accuracy.json").read_text())
    assert len(cycles.results) >= 2 and all(r.value > 0 for r in cycles.results.values())
    assert all(i.startswith("p") for i in cycles.results)  # only delegated nodes have NPU cycles
    # every quantized layer's SQNR lands on one node, the same number as accuracy.json
    assert sorted(round(r.value, 6) for r in sqnr.results.values()) == sorted(
        round(row["cumulative_db"], 6) for row in accuracy["layers"])


def test_files_open_in_model_explorer_config(explored):
    files = ModelExplorerFiles(explored / "graph.json",
                               {m: explored / f"{m}.json" for m in ("partition", "npu_cycles", "sqnr_db")})
    config = model_explorer_config().add_model_from_path(str(files.graph))
    for path in files.node_data.values():
        config.add_node_data_from_path(str(path))
    assert config.model_sources == [{"url": str(files.graph)}] and len(config.node_data_sources) == 3
    # not a terminal: the files are written and the command printed, no server started
    message = open_in_model_explorer(files)
    assert message.endswith(files.command()) and "--node_data_paths=" in message


def test_partition_tosa_files_open_with_the_tosa_adapter(explored):
    # the `explore` extra's TOSA adapter reads the partitions' .tosa files the report folder keeps
    from tosa_adapter_model_explorer.main import TosaFlatbufferAdapter

    tosa_files = sorted(explored.parent.glob("*.tosa"))
    assert len(tosa_files) == 2  # one per Ethos-U partition
    for path in tosa_files:
        graphs = TosaFlatbufferAdapter().convert(str(path), {})["graphs"]
        labels = {node.label for graph in graphs for node in graph.nodes}
        assert "CONV2D" in labels, (path, labels)
