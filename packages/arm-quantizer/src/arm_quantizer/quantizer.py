"""TOSAQuantizer: the one PT2E quantizer every Arm target uses (targets subclass it)."""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import Quantizer

from arm_tosa_core import TosaCompileSpec
from arm_tosa_core.registry import quant_lookup

from .annotator import annotate_graph
from .buffer_writes import functionalize_buffer_writes
from .config import QuantizationConfig, get_symmetric_quantization_config
from .const_fold import read_through_aliases
from .decompose_for_int import prepare_for_int

_UNSET = object()


class TOSAQuantizer(Quantizer):
    """A torchao PT2E quantizer for TOSA targets; what it annotates comes from the op registry.

    Configs resolve per node in this order: node name, module name, module type, global. A module
    name (or type) set to None leaves that submodule in float. `set_io` quantizes the model's
    inputs/outputs directly with its config.
    """

    def __init__(self, compile_spec: TosaCompileSpec | None = None) -> None:
        super().__init__()
        if compile_spec is not None and not isinstance(compile_spec, TosaCompileSpec):
            raise TypeError(f"{type(self).__name__} takes a TosaCompileSpec (or subclass), got "
                            f"{type(compile_spec).__name__}")
        self.compile_spec = compile_spec
        self.global_config: QuantizationConfig | None = None
        self.io_config: QuantizationConfig | None = None
        self.module_name_config: dict[str, QuantizationConfig | None] = {}
        self.module_type_config: dict[type, QuantizationConfig | None] = {}
        self.node_name_config: dict[str, QuantizationConfig | None] = {}
        self.fixed_buffer_qparams: dict[str, tuple[float, int]] = {}
        #: True: a global average pool's output takes its input's qparams (`OpEntry.shares_qparams`: one int8
        #: AVG_POOL2D, which regor runs in fewer U85 cycles). Off by default: the AVG_POOL2D rounds at the
        #: input's coarser step and ties up, and a classifier after it turns that into up to 6 LSB of
        #: difference from the fake-quant model (the small models' MobileNetV3-small and ConvMixer); the
        #: default form (own qparams: an exact int32 sum and a RESCALE) stays within 1 LSB
        self.global_average_shares_qparams = False

    # -- configuration -----------------------------------------------------------------------
    def set_global(self, config: QuantizationConfig | None) -> TOSAQuantizer:
        self._check(config)
        self.global_config = config
        return self

    def set_io(self, config: QuantizationConfig | None) -> TOSAQuantizer:
        self._check(config)
        self.io_config = config
        return self

    def set_module_name(self, name: str, config: QuantizationConfig | None) -> TOSAQuantizer:
        if not isinstance(name, str) or not name:
            raise ValueError("set_module_name needs the submodule's qualified name, e.g. 'features.3'")
        self._check(config)
        self.module_name_config[name] = config
        return self

    def set_module_type(self, module_type: type, config: QuantizationConfig | None) -> TOSAQuantizer:
        if not isinstance(module_type, type):
            raise TypeError(f"set_module_type needs a class such as torch.nn.Linear, got {module_type!r}")
        self._check(config)
        self.module_type_config[module_type] = config
        return self

    def set_node_name(self, name: str, config: QuantizationConfig | None) -> TOSAQuantizer:
        """Config for one node of the graph this quantizer annotates (after `transform_for_annotation`;
        a converted model's compute nodes keep those names). Wins over module name/type and global.
        Mixed precision uses it to keep single ops whose int16 form the target cannot lower at int8
        (`arm_quantizer.int16_fallback`); the names are only stable for one model and toolkit version."""
        if not isinstance(name, str) or not name:
            raise ValueError("set_node_name needs a node name of the annotated graph, e.g. 'rsqrt_default'")
        self._check(config)
        self.node_name_config[name] = config
        return self

    def set_buffer_qparams(self, name: str, scale: float, zero_point: int = 0) -> TOSAQuantizer:
        """State the qparams of a buffer (a KV cache's, by its qualified name) instead of observing it.

        A buffer that several methods share (`prefill` and `decode` of a decoder) must be quantized
        alike in each of them to be stored quantized (`arm_quantizer.kv_cache`); each method's
        observers see different data, so the scale is stated here (calibrated once, for all methods).
        The values written into it share these qparams (the cache write's quant kind is SHARED)."""
        if not isinstance(name, str) or not name:
            raise ValueError("set_buffer_qparams needs the buffer's qualified name, e.g. 'blocks.0.attn.k_cache'")
        if not scale > 0:
            raise ValueError(f"set_buffer_qparams({name!r}): scale must be positive, got {scale}")
        self.fixed_buffer_qparams[name] = (float(scale), int(zero_point))
        return self

    def _check(self, config: QuantizationConfig | None) -> None:
        if config is None:
            return
        if not isinstance(config, QuantizationConfig):
            raise TypeError(f"expected a QuantizationConfig (see get_symmetric_quantization_config), got "
                            f"{type(config).__name__}")
        spec = self.compile_spec.tosa_spec if self.compile_spec is not None else None
        if spec is None:
            return
        if not spec.support_integer():
            raise ValueError(f"{spec} has no INT profile, so it cannot run a quantized model; use e.g. "
                             '"TOSA-1.0+INT" or "TOSA-1.0+FP+INT"')
        if config.activation_dtype == torch.int16 and not spec.support_extension("int16"):
            raise ValueError(f"int16 activations need the int16 extension, which {spec} lacks: use "
                             '"TOSA-1.0+INT+int16" (or get_symmetric_quantization_config for int8)')

    # -- Quantizer API -----------------------------------------------------------------------
    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        """Rewrite the graph before annotation.

        For an INT spec (or none), ops with no integer rule (softmax, layer_norm, attention, division,
        ...) that will be quantized are decomposed into ops that have one, and constant sub-graphs
        (masks) are folded into buffers: see `decompose_for_int`. In-place writes into a buffer (a KV
        cache's index_copy_/index_put_) become functional ops + copy_ (`buffer_writes`). Then python scalars in binary ops
        become tensor attributes, so they get observers like any other operand (and `*.Scalar`
        overloads become `*.Tensor`, whose schema takes the tensor)."""
        spec = self.compile_spec.tosa_spec if self.compile_spec is not None else None
        functionalize_buffer_writes(model)  # a KV cache written in place: see buffer_writes.py
        if spec is None or spec.support_integer():
            prepare_for_int(model, want=lambda node: self._config_for(node) is not None)
        graph = model.graph
        _mark_loop_bodies(model)
        if getattr(model, _LOOP_BODY, False):
            # torchao prepares a while_loop body as a model of its own; a tensor attribute made here
            # would be frozen into the body, and torch.export (2.13) leaves such constants as
            # FakeTensors that exir cannot decompose. Python scalars keep their own (static) handling.
            return model
        counter = 0
        for node in list(graph.nodes):
            if node.op != "call_function" or len(node.args) < 2:
                continue
            if node.target in _WHERE_SCALAR and _float_result(node):
                counter = _where_scalar_to_tensor(model, node, counter)
                continue
            entry = quant_lookup(node.target)
            if entry is None or entry.quant != "binary":
                continue
            scalar = node.args[1]
            if not isinstance(scalar, (int, float)) or isinstance(scalar, bool):
                continue
            if not _float_result(node):  # `int_tensor + 2` is never quantized: a float operand would promote it
                continue
            name = f"_arm_scalar_{counter}"
            counter += 1
            model.register_buffer(name, torch.tensor(float(scalar)))
            with graph.inserting_before(node):
                attr = graph.get_attr(name)
                attr.meta["val"] = torch.tensor(float(scalar))
            node.args = (node.args[0], attr, *node.args[2:])
            _retarget_to_tensor_overload(node)
        model.recompile()
        return model

    def annotate(self, model: GraphModule) -> GraphModule:
        self._validate_module_names(model)
        aliased = read_through_aliases(model)  # left float: see its docstring
        annotate_graph(model, lambda node: None if node in aliased else self._config_for(node),
                       shared_forms=self.global_average_shares_qparams)
        if self.fixed_buffer_qparams:
            _fix_buffer_qspecs(model, self.fixed_buffer_qparams)
        if self.io_config is not None:
            self._annotate_io(model)
        return model

    def validate(self, model: GraphModule) -> None:
        return None

    # -- internals ---------------------------------------------------------------------------
    def _config_for(self, node: Node) -> QuantizationConfig | None:
        if node.name in self.node_name_config:
            return self.node_name_config[node.name]
        stack = node.meta.get("nn_module_stack") or {}
        entries = list(stack.values())
        for path, _ in reversed(entries):
            name = _strip(path)
            if name in self.module_name_config:
                return self.module_name_config[name]
        for _, module_type in reversed(entries):
            cls = module_type if isinstance(module_type, type) else None
            for t, config in self.module_type_config.items():
                if cls is t or (isinstance(module_type, str) and module_type.endswith(
                        f"{t.__module__}.{t.__qualname__}")):
                    return config
        return self.global_config

    def _validate_module_names(self, model: GraphModule) -> None:
        seen = set()
        for node in model.graph.nodes:
            for path, _ in (node.meta.get("nn_module_stack") or {}).values():
                name = _strip(path)
                parts = name.split(".")
                seen.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        missing = [n for n in self.module_name_config if n not in seen]
        if missing:
            sample = sorted(s for s in seen if s)[:12]
            raise ValueError(f"set_module_name: no submodule named {missing} in the model; names "
                             f"include {sample}")
        names = {n.name for n in model.graph.nodes}
        missing = [n for n in self.node_name_config if n not in names]
        if missing:
            raise ValueError(f"set_node_name: no node named {missing} in the graph being annotated")

    def _annotate_io(self, model: GraphModule) -> None:
        from torchao.quantization.pt2e.quantizer import QuantizationAnnotation

        act = self.io_config.output_activation
        for node in model.graph.nodes:
            if node.op == "placeholder" and isinstance(node.meta.get("val"), torch.Tensor) and \
                    node.meta["val"].dtype.is_floating_point:
                node.meta["quantization_annotation"] = QuantizationAnnotation(output_qspec=act, _annotated=True)


def _fix_buffer_qspecs(model: GraphModule, fixed: dict[str, tuple[float, int]]) -> None:
    """Every annotated read of a buffer named in `fixed` gets its stated qparams (same dtype and range
    as the spec it replaces); qspecs shared with that edge follow."""
    from torchao.quantization.pt2e.quantizer import FixedQParamsQuantizationSpec

    found = set()
    for node in model.graph.nodes:
        ann = node.meta.get("quantization_annotation")
        if ann is None:
            continue
        for arg, spec in list(ann.input_qspec_map.items()):
            name = str(arg.target) if arg.op == "get_attr" else None
            if name not in fixed or not hasattr(spec, "dtype"):
                continue
            scale, zero_point = fixed[name]
            ann.input_qspec_map[arg] = FixedQParamsQuantizationSpec(
                dtype=spec.dtype, scale=scale, zero_point=zero_point, quant_min=spec.quant_min,
                quant_max=spec.quant_max, qscheme=torch.per_tensor_affine)
            found.add(name)
    missing = sorted(set(fixed) - found - {str(n.target) for n in model.graph.nodes if n.op == "get_attr"})
    if missing:
        raise ValueError(f"set_buffer_qparams: no buffer named {missing} in the model")


# where(cond, x, 0.0) / where(cond, 1.0, x): the number's position in args
_WHERE_SCALAR = {torch.ops.aten.where.ScalarOther: 2, torch.ops.aten.where.ScalarSelf: 1}


def _where_scalar_to_tensor(model: GraphModule, node: Node, counter: int) -> int:
    """`where.Scalar*` -> `where.self` with the number as a 0-d tensor attribute, so it is quantized
    with the other operand (SELECT needs both in one qparams) instead of left a float factory."""
    index = _WHERE_SCALAR[node.target]
    name = f"_arm_scalar_{counter}"
    value = torch.tensor(float(node.args[index]), dtype=node.meta["val"].dtype)
    model.register_buffer(name, value)
    with model.graph.inserting_before(node):
        attr = model.graph.get_attr(name)
        attr.meta["val"] = value
    args = list(node.args)
    args[index] = attr
    node.args = tuple(args)
    node.target = torch.ops.aten.where.self
    return counter + 1


def _float_result(node: Node) -> bool:
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.is_floating_point()


def _retarget_to_tensor_overload(node: Node) -> None:
    """`aten.add.Scalar(x, t, alpha)` -> `aten.add.Tensor(x, t, alpha=alpha)`; other targets unchanged.

    A `.Scalar` overload's schema takes a number, so once its scalar operand is a tensor attribute
    the node must call the `.Tensor` overload, which computes the same for a 0-d tensor (its extra
    arguments, such as alpha, are keyword-only there)."""
    target = node.target
    packet = getattr(target, "overloadpacket", None)
    if packet is None or getattr(target, "_overloadname", "") != "Scalar" or "Tensor" not in packet.overloads():
        return
    new = packet.Tensor
    positional = [a for a in new._schema.arguments if not a.kwarg_only]
    extra = {a.name: v for a, v in zip(target._schema.arguments[len(positional):], node.args[len(positional):],
                                       strict=False)}
    node.target = new
    node.args = node.args[:len(positional)]
    node.kwargs = {**node.kwargs, **extra}


def _strip(path: str) -> str:
    """nn_module_stack paths look like "L['self'].features.3" or "features.3"."""
    for prefix in ("L['self'].", "L__self__."):
        if path.startswith(prefix):
            path = path[len(prefix):]
    return path


def default_quantizer(compile_spec: TosaCompileSpec) -> TOSAQuantizer:
    """A quantizer with the 8-bit symmetric per-channel config set globally."""
    return TOSAQuantizer(compile_spec).set_global(get_symmetric_quantization_config())




_LOOP_BODY = "_arm_while_loop_body"


def _mark_loop_bodies(model: GraphModule) -> None:
    """Flag the body GraphModules of while_loop nodes (torchao's prepare_pt2e recurses into them)."""
    for node in model.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.higher_order.while_loop:
            body = node.args[1]
            if isinstance(body, torch.fx.Node) and body.op == "get_attr":
                setattr(model.get_submodule(body.target), _LOOP_BODY, True)
