"""Lowering tried at partition time, so a node the partitioner claims is one that lowers.

A family's support rule decides ahead of time; where it and the lowering rule disagree (an argument
form, a constant the rule needs, a target with no rule), `trial_reason` runs the node's own registry
rule (the entry the backend will use) on a throwaway graph, its inputs standing in as arena tensors,
and returns the failure as the node's CPU reason. Cheap: one node, nothing serialized.
"""

from __future__ import annotations

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily
from torch.export import ExportedProgram
from torch.fx import Node

from .lower import LoweringContext, dim_of
from .registry import lookup


def _stand_in(t: torch.Tensor) -> torch.Tensor:
    """A real tensor for a FakeTensor constant (exir may hand partitioners fake weights): ones for
    floats, zeros for integers. Rules fail on shapes, dtypes and arguments, not on these values."""
    with unset_fake_temporarily():
        if t.dtype.is_floating_point:
            return torch.ones(tuple(t.shape), dtype=t.dtype)
        return torch.zeros(tuple(t.shape), dtype=t.dtype)


class _TrialContext(LoweringContext):
    """A value from outside the node (an input, or a node a rule reads through, as attention reads
    the KV heads before their repeat_interleave) stands in as an arena tensor of its shape."""

    def const_value(self, node):
        try:
            value = super().const_value(node)
        except Exception:  # noqa: BLE001  (folding over stand-ins, e.g. an index into a stand-in table)
            # The stand-ins' values are not the weights', so a fold may fail where the real lowering's
            # succeeds (T5's position bias gathers by indices computed from stand-in buffers): the trial
            # then treats the node as a run-time tensor, which every rule also accepts.
            value = self._consts[node] = None
        if isinstance(value, FakeTensor):
            value = self._consts[node] = _stand_in(value)
        return value

    def inp(self, arg):
        if arg not in self.values and isinstance(arg, Node) and self.const_value(arg) is None:
            val = arg.meta.get("val")
            if isinstance(val, torch.Tensor):
                self._add_symbols(val)
                self.values[arg] = self.g.new_tensor([dim_of(d) for d in val.shape], self.dtype(val.dtype))
        return super().inp(arg)

    def _add_symbols(self, t: torch.Tensor) -> None:
        known = {s for s, *_ in self.g.symbols}
        for d in t.shape:
            if isinstance(d, torch.SymInt):
                for s in sympy.sympify(dim_of(d)).free_symbols - known:
                    known.add(s)
                    self.g.symbols.append((s, 0, 0, int(d.node.shape_env.var_to_range[s].upper)))


def _tensors(val) -> list[torch.Tensor]:
    return [t for t in (val if isinstance(val, list | tuple) else [val]) if isinstance(t, torch.Tensor)]


def trial_reason(ep: ExportedProgram, node: Node) -> str | None:
    """None when `node` lowers with its registry rule, else why not (a CPU reason)."""
    fam = lookup(node.target)
    if fam is None:
        return f"no Vulkan lowering for {node.target}"
    ctx = _TrialContext(ep, fp16=False)
    try:
        for t in _tensors(node.meta.get("val")):
            ctx._add_symbols(t)
        for a in node.all_input_nodes:  # multi-output inputs (rules index them); tensors come via inp
            val = a.meta.get("val")
            if isinstance(val, list | tuple) and a not in ctx.values:
                for t in _tensors(val):
                    ctx._add_symbols(t)
                ctx.values[a] = [ctx.g.new_tensor([dim_of(d) for d in v.shape], ctx.dtype(v.dtype))
                                 if isinstance(v, torch.Tensor)
                                 else None for v in val]
        fam.lower(ctx, node)
    except Exception as e:  # noqa: BLE001  (any failure of the rule keeps the node on the CPU)
        return f"its Vulkan lowering fails: {type(e).__name__}: {e}"
    return None
