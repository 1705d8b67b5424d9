"""Lower a delegated partition (an ExportedProgram) to a `Graph`: the context every op rule uses."""

from __future__ import annotations

import operator
from typing import Any

import sympy
import torch
from torch.export import ExportedProgram
from torch.fx import Node

from arm_tosa_core import layout

from .fuse import fuse_elementwise, fusion_enabled
from .graph import (
    F16,
    F32,
    HOST_BOOL,
    HOST_F16,
    HOST_F32,
    HOST_I32,
    HOST_I64,
    I32,
    VARIANT,
    Graph,
    LoweringError,
    Tensor,
    contiguous_strides,
    numel,
)
from .registry import lookup

NO_COMPUTE = {operator.getitem}


def planned_strides(shape: list, order: tuple[int, ...]) -> list:
    """The strides of a logical `shape` whose bytes lie in dim `order` (the runtime hands a delegate a
    tensor's bytes as the program plans them: channels-last is (0, 2, 3, 1))."""
    physical = contiguous_strides([shape[d] for d in order])
    strides: list = [0] * len(shape)
    for i, d in enumerate(order):
        strides[d] = physical[i]
    return strides


def dim_of(d: Any) -> Any:
    """A size as an int or a sympy expression of the dynamic symbols."""
    if isinstance(d, torch.SymInt):
        expr = d.node.expr
        return int(expr) if expr.is_Integer else expr
    return int(d)


def shape_of(node: Node) -> list:
    return [dim_of(d) for d in node.meta["val"].shape]


#: torch dtype -> (host dtype at the delegate boundary); floats compute in the graph's compute dtype,
#: integers and bools as I32 (registry.tensor_dtypes decides which a family accepts)
HOST_DTYPES = {torch.float32: HOST_F32, torch.float16: HOST_F16, torch.bool: HOST_BOOL, torch.int32: HOST_I32,
               torch.int64: HOST_I64}


def is_int(dtype: torch.dtype) -> bool:
    """Computed as I32 on the device: integers and bools."""
    return dtype in (torch.int32, torch.int64, torch.bool)


def is_static_fill(node: Node) -> bool:
    """A node that reads no tensor and makes one of a static shape (arange, full, zeros, scalar_tensor):
    its value is known at compile time, so it is folded into a constant."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or any(isinstance(d, torch.SymInt) for d in val.shape):
        return False
    leaves = torch.utils._pytree.tree_leaves((node.args, node.kwargs))
    return not any(isinstance(a, Node | torch.SymInt | torch.Tensor) for a in leaves)


def constant_placeholders(ep: ExportedProgram) -> dict[str, str]:
    """Placeholder name -> state name of the weights a lowering may fold: parameters, constants, and
    buffers the program does not write (a mutated buffer, a KV cache, is state: it enters the delegate
    as an input, and folding its initial value would freeze it)."""
    sig = ep.graph_signature
    mutated = set(sig.buffers_to_mutate.values())
    buffers = {p: b for p, b in sig.inputs_to_buffers.items() if b not in mutated}
    return {**sig.inputs_to_parameters, **buffers, **sig.inputs_to_lifted_tensor_constants}


def source_name(node: Node) -> str:
    """'<module path>: <op>' of an fx node (e.g. 'layer1.0.conv1: convolution'), the label of its
    dispatches in the per-dispatch GPU time profile; the node name where no module is recorded."""
    stack = node.meta.get("nn_module_stack") or {}
    path = str(list(stack.values())[-1][0]) if stack else ""
    path = path.removeprefix("L['self'].").removeprefix("L__self___")
    parts = getattr(node.target, "__name__", str(node.target)).split(".")  # "aten.convolution.default"
    op = parts[1] if parts[0] == "aten" and len(parts) > 1 else parts[0]
    label = f"{path}: {op}" if path else f"{node.name}: {op}"
    return "".join(c if c.isprintable() and c not in '",' else "_" for c in label)


class LoweringContext:
    """Maps fx nodes to graph tensors; op rules call `inp`, `out`, `shape`, `dispatch`."""

    def __init__(self, ep: ExportedProgram, fp16: bool) -> None:
        self.ep = ep
        self.g = Graph(compute_dtype=F16 if fp16 else F32)
        self.sfx = "f16" if fp16 else "f32"
        self.values: dict[Node, Any] = {}
        self._consts: dict[Node, torch.Tensor | None] = {}
        self._param_names = constant_placeholders(ep)
        self.fused: set[Node] = set()  # nodes folded into an earlier dispatch

    # ------------------------------------------------------------------ constants
    def const_value(self, node: Any) -> torch.Tensor | None:
        """The compile-time value of `node` when it depends only on weights (folded here), else None."""
        if not isinstance(node, Node):
            return None
        if node in self._consts:
            return self._consts[node]
        value = None
        if node.op == "placeholder" and node.name in self._param_names:
            name = self._param_names[node.name]
            value = self.ep.state_dict.get(name)
            if value is None:
                value = self.ep.constants.get(name)
        elif node.op == "call_function" and node.target not in NO_COMPUTE:
            ins = node.all_input_nodes
            if (all(self.const_value(a) is not None for a in ins) and (ins or is_static_fill(node))):
                args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), self.const_value)
                value = node.target(*args, **kwargs)
                if not isinstance(value, torch.Tensor):
                    value = None
        self._consts[node] = value
        return value

    # ------------------------------------------------------------------ tensors
    def inp(self, arg: Any) -> Tensor:
        """The graph tensor of an input argument (weights become payload constants)."""
        if arg in self.values:
            return self.values[arg]
        value = self.const_value(arg)
        if value is None:
            raise LoweringError(f"no value for {arg}")
        t = self.g.constant(value, I32) if is_int(value.dtype) else self.g.constant(value.float())
        self.values[arg] = t
        return t

    def dtype(self, torch_dtype: torch.dtype) -> int:
        """The device dtype of a torch dtype: I32 for integers and bools, else the compute dtype."""
        return I32 if is_int(torch_dtype) else self.g.compute_dtype

    def out(self, node: Node, shape: list | None = None) -> Tensor:
        val = node.meta["val"]
        t = self.g.new_tensor(shape_of(node) if shape is None else shape,
                              self.dtype(val.dtype) if isinstance(val, torch.Tensor) else None)
        self.values[node] = t
        return t

    def dispatch(self, shader: str, bindings: list[Tensor], push: list, threads: tuple,
                 variant: str | None = None) -> None:
        """`variant` (f32/f16/i32) defaults to the compute dtype's."""
        self.g.dispatch(f"{shader}_{variant or self.sfx}", bindings, push, threads)

    def copy(self, src: Tensor, dst: Tensor, sizes: list, src_strides: list, src_off: Any,
             dst_strides: list | None = None, dst_off: Any = 0, shader: str | None = None,
             to_bool: bool = False) -> None:
        """Strided copy of a `sizes` region (rank <= 6): permute, slice, expand, cat, cast (`to_bool`:
        y = x != 0)."""
        dst_strides = contiguous_strides(sizes) if dst_strides is None else dst_strides
        pad = 6 - len(sizes)
        sizes, ss, ds = [1] * pad + list(sizes), [0] * pad + list(src_strides), [0] * pad + list(dst_strides)
        n = numel(sizes)
        name = shader or f"copy_{VARIANT[src.dtype]}_{VARIANT[dst.dtype]}"
        self.g.dispatch(name, [src, dst], [n, *sizes, *ss, src_off, *ds, dst_off, *([1] if to_bool else [])],
                        (n, 1, 1))

    # ------------------------------------------------------------------ driver
    def lower(self) -> Graph:
        g = self.g
        user_inputs = set(self.ep.graph_signature.user_inputs)
        placeholders = [n for n in self.ep.graph.nodes if n.op == "placeholder" and n.name in user_inputs]
        for i, node in enumerate(placeholders):
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                g.inputs.append(-1)
                g.input_hosts.append(HOST_F32)
                continue
            for j, d in enumerate(val.shape):
                expr = dim_of(d)
                if isinstance(expr, sympy.Symbol) and all(s is not expr for s, *_ in g.symbols):
                    upper = d.node.shape_env.var_to_range[expr].upper
                    g.symbols.append((expr, i, j, int(upper)))
            host = HOST_DTYPES.get(val.dtype)
            if host is None:
                raise LoweringError(f"delegate input {node.name} of dtype {val.dtype}")
            io = g.new_tensor(shape_of(node), I32 if is_int(val.dtype) else F16 if host == HOST_F16 else F32)
            io.storage.pinned = True
            g.inputs.append(io.id)
            g.input_hosts.append(host)
            order = layout.memory_layout(val)
            compute = I32 if io.dtype == I32 else self.g.compute_dtype
            if layout.is_identity(order):
                self.values[node] = self._cast(io, compute)
            else:  # the planned bytes (channels-last) permuted to the contiguous ones the shaders read
                shape = io.shape
                self.values[node] = x = self.g.new_tensor(shape, compute)
                self.copy(io, x, shape, planned_strides(shape, order), 0)
        for node in self.ep.graph.nodes:
            if node.op != "call_function" or node in self.fused:
                continue
            if node.target is operator.getitem:
                src = self.values.get(node.args[0])
                if src is not None:
                    self.values[node] = src[node.args[1]]
                continue
            if self.const_value(node) is not None:
                continue
            fam = lookup(node.target)
            if fam is None:
                raise LoweringError(f"{node.target} has no Vulkan lowering (the partitioner should not claim it)")
            g.source = source_name(node)
            fam.lower(self, node)
        g.source = ""
        out_node = next(n for n in self.ep.graph.nodes if n.op == "output")
        g.source = "output"
        for arg in out_node.args[0]:
            t = self.inp(arg)
            host = HOST_DTYPES[arg.meta["val"].dtype]
            io = g.new_tensor(t.shape, I32 if t.dtype == I32 else F16 if host == HOST_F16 else F32)
            io.storage.pinned = True
            order = layout.memory_layout(arg.meta["val"])
            if layout.is_identity(order) or len(order) != len(t.shape):
                self._cast(t, io.dtype, io)
            else:  # written in the dim order the program plans for it (channels-last)
                self.copy(t, io, t.shape, contiguous_strides(t.shape), 0, planned_strides(t.shape, order))
            g.outputs.append(io.id)
            g.output_hosts.append(host)
        g.source = ""
        g.prune_unread()
        if fusion_enabled():
            fuse_elementwise(g)
        g.plan_arena()
        return g

    def _cast(self, t: Tensor, dtype: int, dst: Tensor | None = None) -> Tensor:
        if dst is None and t.dtype == dtype:
            return t
        dst = self.g.new_tensor(t.shape, dtype) if dst is None else dst
        shape = t.shape or [1]
        self.copy(t, dst, shape, contiguous_strides(shape), 0)
        return dst


def lower_program(ep: ExportedProgram, fp16: bool) -> Graph:
    return LoweringContext(ep, fp16).lower()
