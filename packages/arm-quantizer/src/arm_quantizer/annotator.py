"""Annotate an exported graph for PT2E from the op registry's quant kinds (see registry.Quant).

Assumes a graph from `torch.export.export(...).module()` (it may hold a `_guards_fn` call_module,
which is ignored). Guarantees: only families whose registry entry has a quant kind are annotated, so
what is quantized is exactly what the INT lowering can run.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import torch
from torch.fx import Node
from torchao.quantization.pt2e.quantizer import (
    DerivedQuantizationSpec,
    QuantizationAnnotation,
    SharedQuantizationSpec,
)

from arm_tosa_core.registry import OpEntry, Quant, quant_lookup

from .config import QuantizationConfig

ANNOTATION_KEY = "quantization_annotation"
ConfigFor = Callable[[Node], "QuantizationConfig | None"]


def _is_float_tensor(node) -> bool:
    if not isinstance(node, Node):
        return False
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.dtype.is_floating_point


def _is_number_constant(arg) -> bool:
    """A python number, or a one-element tensor constant (a number that export lifted)."""
    if not isinstance(arg, Node):
        return isinstance(arg, (int, float))
    return arg.op == "get_attr" and _is_float_tensor(arg) and arg.meta["val"].numel() == 1


def _annotated(node: Node) -> bool:
    ann = node.meta.get(ANNOTATION_KEY)
    return ann is not None and ann._annotated


def _set(node: Node, inputs: dict, output) -> None:
    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map=inputs, output_qspec=output,
                                                       _annotated=True)


def _bias_spec(act_edge: tuple[Node, Node], weight_edge: tuple[Node, Node], axis: int,
               repeats: int = 1) -> DerivedQuantizationSpec:
    """int32 bias at scale act_scale * weight_scale per output channel (the weight's per-channel
    scales `repeats` times over, for a grouped transposed conv; a per-tensor weight scale is one
    scale for every channel)."""

    def derive(observers):
        act_scale, _ = observers[0].calculate_qparams()
        w_scale, _ = observers[1].calculate_qparams()
        w_scale = w_scale.reshape(-1)
        scale = (act_scale * (w_scale if w_scale.numel() == 1 else w_scale.repeat(repeats))).to(torch.float32)
        return scale, torch.zeros_like(scale, dtype=torch.int32)

    return DerivedQuantizationSpec(derived_from=[act_edge, weight_edge], derive_qparams_fn=derive,
                                   dtype=torch.int32, quant_min=-(2**31) + 1, quant_max=2**31 - 1,
                                   qscheme=torch.per_channel_symmetric, ch_axis=0)


def _fusable_activation(node: Node, config_for: ConfigFor) -> Node | None:
    """The single clamp-like user whose output range can absorb this node's activation."""
    if len(node.users) != 1:
        return None
    user = next(iter(node.users))
    entry = quant_lookup(user.target) if user.op == "call_function" else None
    if entry is not None and entry.quant == Quant.ACTIVATION and config_for(user) is not None:
        return user
    return None


def _int16(spec) -> bool:
    return getattr(spec, "dtype", None) == torch.int16


def _weight_axis(entry: OpEntry, node: Node) -> int:
    axis = entry.weight_axis
    return axis(node) if callable(axis) else axis


def annotate_graph(gm: torch.fx.GraphModule, config_for: ConfigFor, shared_forms: bool = True) -> None:
    """Annotate every node whose family has a quant kind and whose config is not None; with
    `shared_forms` False, a family's `shares_qparams` nodes keep the family's own kind."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or _annotated(node):
            continue
        entry = quant_lookup(node.target)
        if entry is None or entry.quant is None:
            continue
        config = config_for(node)
        if config is None:
            continue
        if entry.bool_result:  # comparisons: shared input qparams, the bool result as is
            _annotate_shared(node, config, output=False)
            continue
        if not _is_float_tensor_output(node):
            continue
        kind = entry.quant_kind(node) if shared_forms else entry.quant
        if kind == Quant.WEIGHTED:
            _annotate_weighted(node, entry, config, config_for)
        elif kind == Quant.BINARY:
            _annotate_binary(node, config, config_for)
        elif kind in (Quant.TABLE, Quant.REDUCE):
            _annotate_io(node, config)
        elif kind in (Quant.SHARED, Quant.ACTIVATION):
            _annotate_shared(node, config, shared_inputs=entry.shared_inputs)


def _is_float_tensor_output(node: Node) -> bool:
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):
        return any(isinstance(v, torch.Tensor) and v.dtype.is_floating_point for v in val)
    return isinstance(val, torch.Tensor) and val.dtype.is_floating_point


def _output_spec(node: Node, config: QuantizationConfig, config_for: ConfigFor, entry: OpEntry | None = None):
    """Quantize the output here, or let a following clamp's output carry the qparams (fusion). An int16
    product of a family with `int16_fuses_activation` False (linear) is quantized here; the clamp after it
    shares those qparams (`_annotate_shared`), so its one user is its quantize node."""
    act = _fusable_activation(node, config_for)
    if act is not None and entry is not None and not entry.int16_fuses_activation \
            and _int16(config.output_activation):
        act = None
    if act is None:
        return config.output_activation
    act_config = config_for(act)
    _set(act, {}, act_config.output_activation)
    return None


def _annotate_weighted(node: Node, entry: OpEntry, config: QuantizationConfig, config_for: ConfigFor) -> None:
    x, weight = node.args[0], node.args[1]
    bias = node.args[2] if len(node.args) > 2 else None
    if not (_is_float_tensor(x) and isinstance(weight, Node)):
        return
    axis = _weight_axis(entry, node)
    w_spec = config.weight
    if w_spec is not None and w_spec.qscheme == torch.per_channel_symmetric and w_spec.ch_axis != axis:
        w_spec = QuantizationSpec_with_axis(w_spec, axis)
    inputs = {x: config.input_activation, weight: w_spec}
    if isinstance(bias, Node) and w_spec is not None and config.input_activation is not None:
        repeats = entry.bias_repeats(node) if entry.bias_repeats is not None else 1
        inputs[bias] = _bias_spec((x, node), (weight, node), axis, repeats)
    _set(node, inputs, _output_spec(node, config, config_for, entry))


def QuantizationSpec_with_axis(spec, axis: int):  # noqa: N802 (mirrors the dataclass it builds)
    from dataclasses import replace

    return replace(spec, ch_axis=axis)


def _annotate_binary(node: Node, config: QuantizationConfig, config_for: ConfigFor) -> None:
    inputs = {a: config.input_activation for a in node.args[:2] if _is_float_tensor(a)}
    _set(node, inputs, _output_spec(node, config, config_for))


def _annotate_io(node: Node, config: QuantizationConfig) -> None:
    x = node.args[0]
    if _is_number_constant(x) and len(node.args) > 1:  # `2.0 // x`: floor_divide(2.0, x)
        x = node.args[1]
    if not _is_float_tensor(x):
        return
    _set(node, {x: config.input_activation}, config.output_activation)


def _annotate_shared(node: Node, config: QuantizationConfig, output: bool = True,
                     shared_inputs: int | None = None) -> None:
    """Output and every float tensor input share one set of qparams: the list in args[0] (cat,
    stack), else the first `shared_inputs` positional args (slice_scatter's destination and source),
    or every tensor operand when it is None (where, minimum, clamp with tensor bounds)."""
    first = node.args[0]
    tensors = list(first) if isinstance(first, (list, tuple)) else list(node.args[:shared_inputs])
    tensors = list(dict.fromkeys(t for t in tensors if _is_float_tensor(t)))  # stack([a, b, a])
    if not tensors:
        return
    edge = (tensors[0], node)
    inputs = {tensors[0]: config.input_activation}
    for t in tensors[1:]:
        inputs[t] = SharedQuantizationSpec(edge)
    if not output:
        _set(node, inputs, None)
        return
    if isinstance(node.meta.get("val"), (tuple, list)):
        # a multi-output op (split, unbind, chunk): its getitem users carry the shared qparams
        _set(node, inputs, None)
        for user in node.users:  # float results only: max.dim's int64 indices are never observed
            if user.target is operator.getitem and _is_float_tensor(user):
                _set(user, {}, SharedQuantizationSpec(edge))
    else:
        _set(node, inputs, SharedQuantizationSpec(edge))
