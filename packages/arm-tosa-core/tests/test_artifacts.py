"""Lowering is pure, artifact files are named by the program, and the .pte does not depend on where
they go (issue 24: the absolute artifact path was serialized into every delegate's compile spec)."""

import json

import pytest
import torch
from executorch.exir import to_edge_transform_and_lower
from executorch.exir.backend.operator_support import DontPartition
from torch import nn

from arm_tosa_core import TOSABackend, TosaCompileSpec, TOSAPartitioner
from arm_tosa_core.artifacts import ArtifactWriter, partition_stem
from arm_tosa_core.compile_spec import CompileSpecList
from arm_tosa_core.lowering import TosaGraph, lower_partition
from arm_tosa_core.pte_delegates import list_delegates

FP = "TOSA-1.0+FP"


class TwoPartitions(nn.Module):
    """conv -> sigmoid (kept on the CPU by DontPartition) -> conv: two TOSA partitions."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = nn.Conv2d(2, 4, 3, padding=1), nn.Conv2d(4, 3, 1)

    def forward(self, x):
        return self.b(torch.sigmoid(self.a(x)))


INPUTS = (torch.randn(1, 2, 6, 6),)


def _lower(spec: TosaCompileSpec):
    partitioner = TOSAPartitioner(spec, additional_checks=[DontPartition(torch.ops.aten.sigmoid.default)])
    return to_edge_transform_and_lower(torch.export.export(TwoPartitions(), INPUTS), partitioner=[partitioner])


def _delegates(edge) -> list:
    gm = edge.exported_program().graph_module
    return [getattr(gm, n.target) for n in gm.graph.nodes
            if n.op == "get_attr" and n.target.startswith("lowered_module")]


def _pte(spec: TosaCompileSpec) -> bytes:
    return _lower(spec).to_executorch().buffer


def test_lower_partition_is_pure(tmp_path, monkeypatch):
    """Same bytes on every call, the backend's bytes, and no file written (not even with an artifact
    folder in the spec: writing is the ArtifactWriter's job)."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    spec = TosaCompileSpec(FP).dump_intermediate_artifacts_to(out).dump_debug_info()
    edge = _lower(TosaCompileSpec(FP))
    for lowered in _delegates(edge):
        first = lower_partition(lowered.original_module, spec)
        second = lower_partition(lowered.original_module, spec)
        assert isinstance(first, TosaGraph) and first.flatbuffer[4:8] == b"TOSA"
        assert first.flatbuffer == second.flatbuffer == bytes(lowered.processed_bytes)
        assert first.inputs == second.inputs and first.outputs == second.outputs
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_from_list_gives_the_spec_back(tmp_path):
    spec = TosaCompileSpec("TOSA-1.0+INT+int16").dump_intermediate_artifacts_to(tmp_path).dump_debug_info()
    spec.fold_rescales, spec.integer_io = True, True
    specs = spec.to_list()
    back = TosaCompileSpec.from_list(specs)
    assert type(back) is TosaCompileSpec and str(back.tosa_spec) == "TOSA-1.0+INT+int16"
    assert (back.fold_rescales, back.integer_io) == (True, True)
    assert back.get_intermediate_path() == str(tmp_path) and back.get_debug_mode() == "json"
    assert back.to_list() == specs and back.to_list().host == specs.host
    # read back from a .pte (plain entries, no host settings): the same compile, no artifact folder
    stored = TosaCompileSpec.from_list(list(specs))
    assert stored.get_intermediate_path() is None and stored.to_list() == specs
    with pytest.raises(ValueError, match="no 'arm_compile_spec' entry"):
        TosaCompileSpec.from_list([])


def test_no_host_path_in_the_stored_compile_specs(tmp_path):
    specs = TosaCompileSpec(FP).dump_intermediate_artifacts_to(tmp_path / "far" / "away").dump_debug_info().to_list()
    assert isinstance(specs, CompileSpecList) and specs.host["intermediate_path"] == str(tmp_path / "far" / "away")
    assert all(b"far" not in bytes(s.value) for s in specs)


def test_artifact_names_follow_the_program(tmp_path):
    """partition_<i> for the i-th delegate in graph order; a rebuild writes the same files again."""
    spec = TosaCompileSpec(FP).dump_intermediate_artifacts_to(tmp_path).dump_debug_info()
    edge = _lower(spec)
    payloads = [bytes(m.processed_bytes) for m in _delegates(edge)]
    assert len(payloads) == 2
    expected = {f"partition_{i}{suffix}" for i in range(2) for suffix in (".tosa", ".debug.json")}
    assert {p.name for p in tmp_path.iterdir()} == expected
    for i, payload in enumerate(payloads):
        assert (tmp_path / f"{partition_stem(i)}.tosa").read_bytes() == payload
        assert json.loads((tmp_path / f"partition_{i}.debug.json").read_text())["operators"]
    first = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    _lower(spec)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == first


def test_partitions_are_numbered_across_methods(tmp_path):
    """preprocess_multimethod numbers partitions through the methods in order (no name is reused)."""
    programs = [m.original_module for m in _delegates(_lower(TosaCompileSpec(FP)))]
    specs = TosaCompileSpec(FP).dump_intermediate_artifacts_to(tmp_path).to_list()
    results = TOSABackend.preprocess_multimethod({"forward": programs, "other": programs[:1]},
                                                 {"forward": [specs, specs], "other": [specs]})
    payloads = [r.processed_bytes for method in ("forward", "other") for r in results[method]]
    assert [(tmp_path / f"partition_{i}.tosa").read_bytes() for i in range(3)] == payloads
    assert payloads[2] == payloads[0] and len(list(tmp_path.iterdir())) == 3


def test_artifact_writer_without_a_folder_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    writer = ArtifactWriter.for_partition(TosaCompileSpec(FP).to_list(), 3)
    assert writer.stem == "partition_3" and writer.path(".tosa") is None
    assert writer.write_vgf(b"x") is None and not list(tmp_path.iterdir())


def test_pte_does_not_depend_on_the_output_folder(tmp_path):
    """Two folders, and the same folder twice: byte-identical .pte, and the artifacts are written."""
    a, b = tmp_path / "a", tmp_path / "somewhere" / "else"
    pte_a = _pte(TosaCompileSpec(FP).dump_intermediate_artifacts_to(a).dump_debug_info())
    pte_b = _pte(TosaCompileSpec(FP).dump_intermediate_artifacts_to(b).dump_debug_info())
    pte_a2 = _pte(TosaCompileSpec(FP).dump_intermediate_artifacts_to(a).dump_debug_info())
    assert pte_a == pte_b == pte_a2
    assert str(tmp_path).encode() not in pte_a
    for folder in (a, b):
        assert sorted(p.name for p in folder.glob("*.tosa")) == ["partition_0.tosa", "partition_1.tosa"]
    stored = [(s.key, bytes(s.value)) for d in list_delegates(pte_a) for s in d.compile_specs]
    assert stored == [(s.key, bytes(s.value)) for s in TosaCompileSpec(FP).to_list()] * 2
