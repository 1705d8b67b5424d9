"""Small lowered programs the runtime-cpp tests share (imported by file path as
``runtime_cpp_test_programs``: unique, so tosa-tools' generic top-level modules cannot shadow it)."""

from __future__ import annotations

from dataclasses import replace

import torch
from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower
from executorch.exir.lowered_backend_module import executorch_call_delegate
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner

INPUT = (1, 3, 8, 8)


def tiny_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3, 1, 1), nn.ReLU(), nn.Conv2d(4, 2, 1)).eval()


def tosa_fp_edge(seed: int = 0):
    x = (torch.randn(INPUT),)
    return to_edge_transform_and_lower(torch.export.export(tiny_model(seed), x),
                                       partitioner=[TOSAPartitioner(TosaCompileSpec("TOSA-1.0+FP"))])


def ethosu_lower(model: nn.Module, inputs: tuple, target: str = "ethos-u55-128", quantization_config=None):
    """`model` quantized with EthosUQuantizer (its global config replaced by `quantization_config`
    when given) and lowered for `target` with the host graph kept, so the reference model can run
    the same TOSA graph the deployable payload's command stream was compiled from."""
    return ethosu_quantize_and_lower(model, inputs, target, quantization_config)[1]


def ethosu_quantize_and_lower(model: nn.Module, inputs: tuple, target: str = "ethos-u55-128",
                              quantization_config=None):
    """`ethosu_lower`'s (converted fake-quant model, lowered program)."""
    from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer

    spec = EthosUCompileSpec(target).include_host_graph()
    quantizer = EthosUQuantizer(spec)
    if quantization_config is not None:
        quantizer.set_global(quantization_config)
    prepared = prepare_pt2e(torch.export.export(model.eval(), inputs).module(), quantizer)
    with torch.no_grad():
        prepared(*inputs)
    converted = convert_pt2e(prepared)
    return converted, to_edge_transform_and_lower(torch.export.export(converted, inputs),
                                                  partitioner=[EthosUPartitioner(spec)],
                                                  compile_config=EdgeCompileConfig(_check_ir_validity=False))


def ethosu_edge(seed: int = 0, target: str = "ethos-u55-128"):
    return ethosu_lower(tiny_model(seed), (torch.randn(INPUT),), target)


def lowered_modules(edge) -> list:
    gm = edge.exported_program().graph_module
    return [getattr(gm, n.args[0].target) for n in gm.graph.nodes
            if n.op == "call_function" and n.target is executorch_call_delegate]


def pte(edge) -> bytes:
    return edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False)).buffer


def pte_with_payload(edge, payload: bytes) -> bytes:
    """The .pte of `edge` with its (single) delegate payload replaced by `payload`."""
    (module,) = lowered_modules(edge)
    original = module._processed_bytes
    module._processed_bytes = payload
    try:
        return pte(edge)
    finally:
        module._processed_bytes = original


def deployable_pte(edge, edit=None) -> bytes:
    """The .pte with every Ethos-U payload stripped to what the device gets (no host graph);
    `edit(BinStream) -> BinStream` changes the payload further."""
    from arm_ethosu import build_binstream, parse_binstream

    modules = lowered_modules(edge)
    originals = [m._processed_bytes for m in modules]
    try:
        for m in modules:
            stream = replace(parse_binstream(bytes(m.processed_bytes)), extra={})
            m._processed_bytes = build_binstream(edit(stream) if edit else stream)
        return pte(edge)
    finally:
        for m, payload in zip(modules, originals, strict=True):
            m._processed_bytes = payload
