"""VgfBackend in the pip runtime: the in-repo example models as .pte files, against the reference model.

Each model is lowered once with VgfPartitioner, keeping each partition's TOSA graph beside its VGF
(`dump_intermediate_artifacts_to`). The .pte runs through `executorch.runtime` with runtime_cpp's
VgfBackend (lavapipe + the ML SDK emulation layers); the reference is the same .pte walked in Python
with every delegate call running its kept TOSA graph on the TOSA reference model. INT8 must be
bit-exact, FP within 1e-5 relative to max |reference|. Small inputs keep each case at ~10-20 s;
the default session samples the models, RUNTIME_CPP_FULL=1 runs all four (FP where the target takes them).
Two loaded methods executing in two threads at once must give the same results as one at a time.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import executorch.kernels.quantized  # noqa: F401  (CPU-side quantize/dequantize at the INT boundary)
import pytest
import torch

import runtime_cpp

pytestmark = pytest.mark.skipif(
    not any(s.name == "vgf" and s.registered for s in runtime_cpp.backends()),
    reason="VgfBackend not built: " + "; ".join(str(s) for s in runtime_cpp.backends() if s.name == "vgf"),
)

# name -> input size (image side or tokens). FP: the models the VGF target takes whole in FP.
# The default session samples a CNN and a transformer block; RUNTIME_CPP_FULL=1 (nox -s
# test-runtime-full) runs every model.
_FULL = os.environ.get("RUNTIME_CPP_FULL") == "1"
FP_MODELS = {"mobilenet_v2": 32, "llama_block": 8} if _FULL else {"mobilenet_v2": 32}
INT8_MODELS = ({"mobilenet_v2": 32, "resnet18": 32, "deit_tiny_block": 16, "llama_block": 8} if _FULL
               else {"mobilenet_v2": 32, "llama_block": 8})


def _lower_edge(model, inputs, spec):
    from executorch.exir import to_edge_transform_and_lower

    from arm_vgf import VgfPartitioner

    return to_edge_transform_and_lower(torch.export.export(model, inputs),
                                       partitioner=[VgfPartitioner(spec)])


def _lower(model, inputs, spec):
    return _lower_edge(model, inputs, spec).to_executorch().buffer


def _quantize(model, inputs, spec):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from arm_quantizer import get_symmetric_quantization_config
    from arm_vgf import VgfQuantizer

    quantizer = VgfQuantizer(spec).set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*inputs)
    return convert_pt2e(prepared)


def _on_runtime(pte: bytes, inputs) -> list[torch.Tensor]:
    """The .pte through executorch.runtime (VgfBackend builds its pipeline while the method loads)."""
    from executorch.runtime import Runtime

    from arm_vgf.environment import layer_environment

    with layer_environment():
        method = Runtime.get().load_program(pte).load_method("forward")
    return [o.clone() for o in method.execute(list(inputs))]


def _on_reference_model(edge, inputs, kept_dir: Path) -> list[torch.Tensor]:
    """The lowered program walked in PyTorch, each VGF delegate replaced by its kept TOSA graph on
    the reference model (run it before to_executorch, whose passes rewrite the edge program)."""
    from arm_tosa_core.reference import run_program, run_tosa

    kept = {p.read_bytes(): p.with_suffix(".tosa").read_bytes()
            for p in kept_dir.glob("partition_*.vgf")}
    assert kept, f"no kept partitions in {kept_dir}"

    def runner(backend_id, processed, compile_specs, ins):
        return run_tosa(kept[bytes(processed)], ins)

    out = run_program(edge, list(inputs), runner)
    return list(out) if isinstance(out, tuple) else [out]


@pytest.mark.parametrize("name", list(FP_MODELS))
def test_fp_model_matches_the_reference_model(name, tmp_path):
    from arm_tosa_core.example_models import get_example
    from arm_vgf import VgfCompileSpec

    model, inputs = get_example(name).build(seed=0, input_size=FP_MODELS[name])
    edge = _lower_edge(model, inputs, VgfCompileSpec().dump_intermediate_artifacts_to(tmp_path))
    with torch.no_grad():
        want = _on_reference_model(edge, inputs, tmp_path)
        got = _on_runtime(edge.to_executorch().buffer, inputs)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        rel = (g.double() - w.double()).abs().max().item() / max(w.abs().max().item(), 1e-12)
        assert rel <= 1e-5, f"{name}: VgfBackend vs reference model, relative error {rel:.3g}"


@pytest.mark.parametrize("name", list(INT8_MODELS))
def test_int8_model_is_bit_exact_with_the_reference_model(name, tmp_path):
    from arm_tosa_core.example_models import get_example
    from arm_vgf import VgfCompileSpec

    model, inputs = get_example(name).build(seed=0, input_size=INT8_MODELS[name])
    spec = VgfCompileSpec("TOSA-1.0+INT").dump_intermediate_artifacts_to(tmp_path)
    edge = _lower_edge(_quantize(model, inputs, spec), inputs, spec)
    with torch.no_grad():
        want = _on_reference_model(edge, inputs, tmp_path)
        got = _on_runtime(edge.to_executorch().buffer, inputs)
    for g, w in zip(got, want, strict=True):
        diff = (g.double() - w.double()).abs()
        assert torch.equal(g, w), f"{name}: {int((diff > 0).sum())} elements differ, max {diff.max():.4g}"


def test_two_methods_in_two_threads(tmp_path):
    from executorch.runtime import Runtime

    from arm_tosa_core.example_models import get_example
    from arm_vgf import VgfCompileSpec
    from arm_vgf.environment import layer_environment

    model, inputs = get_example("mobilenet_v2").build(seed=0, input_size=32)
    pte = _lower(model, inputs, VgfCompileSpec())
    xs = [inputs[0], torch.flip(inputs[0], dims=[3])]
    with layer_environment():
        methods = [Runtime.get().load_program(pte).load_method("forward") for _ in xs]
    alone = [m.execute([x])[0].clone() for m, x in zip(methods, xs, strict=True)]
    together: list = [None, None]

    def run(i: int) -> None:
        for _ in range(3):
            together[i] = methods[i].execute([xs[i]])[0].clone()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not torch.equal(alone[0], alone[1])  # the two calls really compute different things
    for a, b in zip(alone, together, strict=True):
        assert torch.equal(a, b)


def test_fp16_narrowed_vgf_bridges_the_fp32_boundary():
    """--type-narrowing makes the VGF's I/O fp16 while the .pte stays fp32: VgfBackend casts at the
    boundary (round to nearest even) exactly as the scenario-runner path (numpy astype) does."""
    from torch import nn

    from arm_vgf import VgfCompileSpec, run_vgf_on_vulkan

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU6(), nn.Conv2d(8, 4, 3, padding=1)).eval()
    x = torch.randn(1, 3, 8, 8) * 3
    from executorch.exir import to_edge_transform_and_lower

    from arm_vgf import VgfPartitioner

    spec = VgfCompileSpec("TOSA-1.0+FP", compiler_flags=["--type-narrowing", "full"])
    edge = to_edge_transform_and_lower(torch.export.export(model, (x,)),
                                       partitioner=[VgfPartitioner(spec)])
    with torch.no_grad():
        scenario = run_vgf_on_vulkan(edge, x)  # the in-memory program: scenario runner per delegate
        (got,) = _on_runtime(edge.to_executorch().buffer, (x,))
    assert got.dtype == torch.float32
    assert torch.equal(got, scenario)


def test_io_order_and_a_rank0_output():
    """Inputs/outputs of distinct shapes keep their order; a rank-0 result (stored as [1]) runs."""
    from torch import nn

    from arm_vgf import VgfCompileSpec

    class MultiIo(nn.Module):
        def forward(self, a, b, c):
            return c.sum(-1), a * 2, b.transpose(0, 1), a.sum() + c.mean()

    torch.manual_seed(0)
    inputs = (torch.randn(2, 3), torch.randn(4, 5, 6), torch.randn(3, 7))
    pte = _lower(MultiIo().eval(), inputs, VgfCompileSpec())
    got = _on_runtime(pte, inputs)
    want = MultiIo()(*inputs)
    assert [tuple(g.shape) for g in got] == [tuple(w.shape) for w in want]
    for g, w in zip(got, want, strict=True):
        assert torch.allclose(g, w, rtol=1e-5, atol=1e-5)
