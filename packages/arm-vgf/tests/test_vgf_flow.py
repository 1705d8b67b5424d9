"""The VGF flow end to end: VgfPartitioner -> .pte -> run_vgf_on_vulkan (lavapipe here), against eager
and against the TOSA reference model running the same TOSA graph; extract_vgf; partial delegation;
the quantized seed flow.
"""

import json

import executorch.kernels.quantized  # noqa: F401  (out variants to_executorch needs for q/dq ops)
import numpy as np
import pytest
import torch
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from vgf_flow_helpers import lower_tosa, lower_vgf, payloads, randomized, relative_error

from arm_quantizer import get_symmetric_quantization_config
from arm_tosa_core import partition_report, run_on_reference_model
from arm_tosa_core.testing import FnModule as Fn
from arm_vgf import (
    VgfCompileSpec,
    VgfQuantizer,
    extract_vgf,
    read_vgf,
    run_vgf,
    run_vgf_on_vulkan,
)

torch.manual_seed(0)

EAGER_RTOL = 1e-4  # x max|output|: fp32 on Vulkan against fp32 eager
REFERENCE_RTOL = 1e-5  # x max|output|: the same TOSA graph on Vulkan and on the reference model

# Families grouped into a few modules: exir's per-lowering overhead, not the ops, dominates run time.
FP_CASES = [
    ("conv_relu6_avg_pool", nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU6(), nn.AvgPool2d(3, 2, 1),
                                          nn.Conv2d(8, 8, 3, 2, 1, groups=8), nn.Conv2d(8, 4, 1)),
     [(1, 3, 9, 9)]),
    ("linear_layer_norm_softmax", nn.Sequential(nn.Linear(16, 12), randomized(nn.LayerNorm(12)),
                                                nn.Softmax(-1)), [(2, 5, 16)]),
    ("add_broadcast", Fn(lambda s, a, b: (a + b, a - 2 * b)), [(2, 3, 4), (3, 1)]),
    ("mean_permute_view", Fn(lambda s, x: (x.mean((2, 3), keepdim=True), x.mean(-1),
                                           x.permute(0, 2, 3, 1).reshape(2, -1) * 2, x.view(6, 20) + 1)),
     [(2, 3, 4, 5)]),
    ("cat", Fn(lambda s, a, b: torch.cat([a, b, a], 1)), [(2, 3, 4), (2, 5, 4)]),
    # Inputs and outputs of distinct shapes: any reordering at the VGF boundary would show.
    ("multi_io_order", Fn(lambda s, a, b, c: (c.sum(-1), a * 2, b.transpose(0, 1), a.sum() + c.mean())),
     [(2, 3), (4, 5, 6), (3, 7)]),
]


@pytest.mark.parametrize("name,module,shapes", FP_CASES, ids=[c[0] for c in FP_CASES])
def test_fp_family_on_vulkan_matches_eager_and_reference(name, module, shapes, tmp_path):
    inputs = tuple(torch.randn(s) for s in shapes)
    spec = VgfCompileSpec().dump_intermediate_artifacts_to(tmp_path)
    edge = lower_vgf(module, inputs, spec)
    report = partition_report(edge)
    assert not report.cpu_nodes and [d.backend_id for d in report.delegates] == ["VgfBackend"], report
    pte = edge.to_executorch().buffer
    with torch.no_grad():
        out = run_vgf_on_vulkan(pte, *inputs)
        eager = module(*inputs)
    err, mag = relative_error(out, eager)
    assert err <= EAGER_RTOL, f"[{name}] Vulkan vs eager: {err:.3g} x max|out| {mag:.3g}"

    # The same TOSA graph on the reference model: the VGF flow keeps it in the intermediate path,
    # and the TOSA flow's payload is that graph byte for byte.
    tosa_edge = lower_tosa(module, inputs, str(spec.tosa_spec))
    ((_, tosa_graph),) = payloads(tosa_edge)
    assert (tmp_path / "partition_0.tosa").read_bytes() == tosa_graph
    ((_, vgf),) = payloads(edge)
    assert (tmp_path / "partition_0.vgf").read_bytes() == vgf
    with torch.no_grad():
        ref = run_on_reference_model(tosa_edge, *inputs)
    err, mag = relative_error(out, ref)
    assert err <= REFERENCE_RTOL, f"[{name}] Vulkan vs TOSA reference: {err:.3g} x max|out| {mag:.3g}"


class Partial(nn.Module):
    """conv on Vulkan; atan2 (no TOSA lowering; the pip runtime has its CPU kernel) on the CPU; then compare, the bool->float cast
    (SELECT), mul and linear on Vulkan again."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.lin = nn.Linear(6, 5)

    def forward(self, x):
        y = self.conv(x)
        mask = y > 0
        return self.lin(torch.atan2(y, y) * mask.float())


@pytest.fixture(scope="module")
def partial_program(tmp_path_factory):
    x = torch.randn(1, 3, 5, 6)
    module = Partial().eval()
    art = tmp_path_factory.mktemp("partial_art")
    spec = VgfCompileSpec().dump_intermediate_artifacts_to(art).dump_debug_info()
    edge = lower_vgf(module, (x,), spec)
    pte = tmp_path_factory.mktemp("partial_pte") / "partial.pte"
    pte.write_bytes(edge.to_executorch().buffer)
    return module, x, edge, pte, art


def test_unsupported_ops_run_on_cpu_between_vgf_partitions(partial_program):
    module, x, edge, pte, _ = partial_program
    report = partition_report(edge)
    assert len(report.delegates) == 2 and {d.backend_id for d in report.delegates} == {"VgfBackend"}
    reasons = {c.target: c.reason for c in report.cpu_nodes}
    assert [t for t in reasons if "aten." in t] == ["aten.atan2.out"], report
    with torch.no_grad():
        expected = module(x)
    for program in (edge, pte):  # the edge program and the .pte walk the same delegates
        err, mag = relative_error(run_vgf_on_vulkan(program, x), expected)
        assert err <= EAGER_RTOL, f"partial model: {err:.3g} x max|out| {mag:.3g}"


def test_pte_does_not_depend_on_the_output_folder(partial_program, tmp_path):
    """Another folder, and the same folder again: byte-identical .pte, the artifacts under the stems."""
    module, x, _, pte, art = partial_program
    assert str(art).encode() not in pte.read_bytes()
    for folder in (tmp_path / "elsewhere", art):
        spec = VgfCompileSpec().dump_intermediate_artifacts_to(folder).dump_debug_info()
        assert lower_vgf(module, (x,), spec).to_executorch().buffer == pte.read_bytes()
        assert {p.name for p in folder.iterdir()} == {
            f"partition_{i}{suffix}" for i in range(2) for suffix in (".tosa", ".debug.json", ".vgf")}


def test_extract_vgf_writes_each_delegate_with_a_matching_sidecar(partial_program, tmp_path):
    module, x, edge, pte, art = partial_program
    paths = extract_vgf(pte, tmp_path / "out")
    assert [p.name for p in paths] == ["partial_0.vgf", "partial_1.vgf"]
    assert [p.read_bytes() for p in paths] == [b for _, b in payloads(edge)]
    for i, path in enumerate(paths):
        sidecar = json.loads(path.with_suffix(".json").read_text())
        model = read_vgf(path.read_bytes())  # vgfpy decodes the extracted file
        assert sidecar["vgf_file"] == path.name and sidecar["pte"] == "partial.pte"
        assert sidecar["compile_spec"]["tosa_spec"] == "TOSA-1.0+FP+INT+int16"
        # The VGF boundary is the TOSA graph's boundary: PyTorch shapes, in the graph's order.
        debug = json.loads((art / f"partition_{i}.debug.json").read_text())
        for side, tensors in (("inputs", model.inputs), ("outputs", model.outputs)):
            want = [(d["shape"], d["dtype"].removeprefix("torch.")) for d in debug[side]]
            assert [(e["shape"], e["dtype"]) for e in sidecar[side]] == want
            assert [(list(t.shape), t.dtype) for t in tensors] == want
            assert all(e["scale"] is None and e["zero_point"] is None for e in sidecar[side])
    # The first extracted VGF runs alone: the conv output.
    (y,) = run_vgf(paths[0].read_bytes(), [x.numpy()])
    with torch.no_grad():
        conv = module.conv(x).numpy()
    np.testing.assert_allclose(y, conv, rtol=0, atol=EAGER_RTOL * np.abs(conv).max())


def test_a_bool_tensor_crosses_the_vgf_boundary():
    """The compare runs on Vulkan and hands its bool mask to a CPU op (cumsum lowers for float only)."""
    module = Fn(lambda s, x: torch.cumsum(x > 0, dim=-1))
    x = torch.randn(2, 8)
    edge = lower_vgf(module, (x,), VgfCompileSpec())
    ((_, vgf),) = payloads(edge)
    assert [t.dtype for t in read_vgf(vgf).outputs] == ["bool"]
    assert torch.equal(run_vgf_on_vulkan(edge, x), module(x))


def test_seed_flow_quantized_pte_runs_bit_exact_against_the_reference(tmp_path):
    """VgfCompileSpec -> VgfQuantizer -> VgfPartitioner -> .pte, int8, on Vulkan and extracted."""
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU6(), nn.Conv2d(8, 8, 3, padding=1),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4)).eval()
    x = torch.randn(1, 3, 16, 16)
    spec = VgfCompileSpec()
    quantizer = VgfQuantizer(spec).set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    for seed in range(4):
        prepared(torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(seed)))
    quantized = convert_pt2e(prepared)
    edge = lower_vgf(quantized, (x,), spec)
    assert {d.backend_id for d in partition_report(edge).delegates} == {"VgfBackend"}
    pte = tmp_path / "seed.pte"
    pte.write_bytes(edge.to_executorch().buffer)

    out = run_vgf_on_vulkan(pte, x)
    ref = run_on_reference_model(lower_tosa(quantized, (x,), str(spec.tosa_spec)), x)
    assert torch.equal(out, ref), f"int8 Vulkan vs reference: max diff {(out - ref).abs().max():.3g}"
    with torch.no_grad():
        err, mag = relative_error(out, model(x))
    assert err <= 0.1, f"int8 vs float model: {err:.3g} x max|out| {mag:.3g}"

    # The sidecar's qparams let the extracted VGF run alone: quantize, run, dequantize.
    (path,) = extract_vgf(pte, tmp_path / "vgf")
    sidecar = json.loads(path.with_suffix(".json").read_text())
    (qin,), (qout,) = sidecar["inputs"], sidecar["outputs"]
    assert qin["dtype"] == qout["dtype"] == "int8" and qin["scale"] > 0 and qout["scale"] > 0
    xq = torch.clamp(torch.round(x / qin["scale"]) + qin["zero_point"], -128, 127).to(torch.int8)
    (yq,) = run_vgf(path.read_bytes(), [xq.numpy()])
    y = (torch.from_numpy(yq).float() - qout["zero_point"]) * qout["scale"]
    assert torch.allclose(y, out, rtol=0, atol=1e-6)
