"""Lower a delegated partition (an ExportedProgram) to a `Graph`: the context every op rule uses."""

from __future__ import annotations

import operator
from typing import Any

import sympy
import torch
from torch.export import ExportedProgram
from torch.fx import Node

from .graph import F16, F32, U8, Graph, LoweringError, Tensor, contiguous_strides, numel
from .registry import lookup

NO_COMPUTE = {operator.getitem}


def dim_of(d: Any) -> Any:
    """A size as an int or a sympy expression of the dynamic symbols."""
    if isinstance(d, torch.SymInt):
        expr = d.node.expr
        return int(expr) if expr.is_Integer else expr
    return int(d)


def shape_of(node: Node) -> list:
    return [dim_of(d) for d in node.meta["val"].shape]


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
        sig = ep.graph_signature
        self._param_names = {**sig.inputs_to_parameters, **sig.inputs_to_buffers,
                             **sig.inputs_to_lifted_tensor_constants}
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
            if ins and all(self.const_value(a) is not None for a in ins):
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
        t = self.g.constant(value.float())
        self.values[arg] = t
        return t

    def out(self, node: Node, shape: list | None = None) -> Tensor:
        t = self.g.new_tensor(shape_of(node) if shape is None else shape)
        self.values[node] = t
        return t

    def dispatch(self, shader: str, bindings: list[Tensor], push: list, threads: tuple) -> None:
        self.g.dispatch(f"{shader}_{self.sfx}", bindings, push, threads)

    def copy(self, src: Tensor, dst: Tensor, sizes: list, src_strides: list, src_off: Any,
             dst_strides: list | None = None, dst_off: Any = 0, shader: str | None = None) -> None:
        """Strided copy of a `sizes` region (rank <= 6): permute, slice, expand, cat, cast."""
        dst_strides = contiguous_strides(sizes) if dst_strides is None else dst_strides
        pad = 6 - len(sizes)
        sizes, ss, ds = [1] * pad + list(sizes), [0] * pad + list(src_strides), [0] * pad + list(dst_strides)
        n = numel(sizes)
        name = shader or f"copy_{self.sfx}_{self.sfx}"
        self.g.dispatch(name, [src, dst], [n, *sizes, *ss, src_off, *ds, dst_off], (n, 1, 1))

    # ------------------------------------------------------------------ driver
    def lower(self) -> Graph:
        g = self.g
        user_inputs = set(self.ep.graph_signature.user_inputs)
        placeholders = [n for n in self.ep.graph.nodes if n.op == "placeholder" and n.name in user_inputs]
        for i, node in enumerate(placeholders):
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                g.inputs.append(-1)
                continue
            for j, d in enumerate(val.shape):
                expr = dim_of(d)
                if isinstance(expr, sympy.Symbol) and all(s is not expr for s, *_ in g.symbols):
                    upper = d.node.shape_env.var_to_range[expr].upper
                    g.symbols.append((expr, i, j, int(upper)))
            if val.dtype == torch.bool:  # a bool attention mask: bytes, read as they come
                io = g.new_tensor(shape_of(node), U8)
                io.storage.pinned = True
                g.inputs.append(io.id)
                self.values[node] = io
                continue
            io = g.new_tensor(shape_of(node), F32)
            io.storage.pinned = True
            g.inputs.append(io.id)
            self.values[node] = self._cast(io, self.g.compute_dtype)
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
            io = g.new_tensor(t.shape, F32)
            io.storage.pinned = True
            self._cast(t, F32, io)
            g.outputs.append(io.id)
        g.source = ""
        g.prune_unread()
        g.plan_arena()
        return g

    def _cast(self, t: Tensor, dtype: int, dst: Tensor | None = None) -> Tensor:
        if dst is None and t.dtype == dtype:
            return t
        dst = self.g.new_tensor(t.shape, dtype) if dst is None else dst
        names = {F32: "f32", F16: "f16"}
        shape = t.shape or [1]
        self.copy(t, dst, shape, contiguous_strides(shape), 0,
                  shader=f"copy_{names[t.dtype]}_{names[dst.dtype]}")
        return dst


def lower_program(ep: ExportedProgram, fp16: bool) -> Graph:
    return LoweringContext(ep, fp16).lower()
