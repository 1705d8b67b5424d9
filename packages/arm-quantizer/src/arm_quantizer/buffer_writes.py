"""In-place writes into a module buffer (a static KV cache's `cache.index_copy_(...)`, `cache[:, :, pos] = v`)
made functional before annotation, so the cache is quantized like any other operand.

torchao's prepare never observes the destination of an in-place op on a buffer (it would alias the
buffer), so `index_copy_(cache, ...)` would read the float cache inside an otherwise quantized graph and
the write would stay on the CPU. `index_copy_(buf, ...)` becomes `new = index_copy(buf, ...)` followed by
`buf.copy_(new)`: the functional op reads a quantized cache and writes a quantized result (SHARED qparams),
and the trailing `copy_` is what export turns back into the BUFFER_MUTATION output.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

aten = torch.ops.aten

# in-place write -> its functional form (the registry families `index_copy` and `index_put`)
FUNCTIONAL_FORM = {aten.index_copy_.default: aten.index_copy.default,
                   aten.index_put_.default: aten.index_put.default}


def _is_buffer(model: GraphModule, node: Node) -> bool:
    if node.op != "get_attr":
        return False
    buffers = dict(model.named_buffers())
    return str(node.target) in buffers


def functionalize_buffer_writes(model: GraphModule) -> int:
    """Rewrite every in-place write of `FUNCTIONAL_FORM` whose destination is a buffer; returns how many."""
    graph, count = model.graph, 0
    for node in list(graph.nodes):
        functional = FUNCTIONAL_FORM.get(node.target) if node.op == "call_function" else None
        if functional is None or not _is_buffer(model, node.args[0]):
            continue
        buf = node.args[0]
        with graph.inserting_after(node):
            new = graph.call_function(functional, tuple(node.args), dict(node.kwargs))
            new.meta = dict(node.meta)
        with graph.inserting_after(new):
            copy = graph.call_function(aten.copy_.default, (buf, new))
            copy.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
        count += 1
    if count:
        graph.lint()
        model.recompile()
    return count
