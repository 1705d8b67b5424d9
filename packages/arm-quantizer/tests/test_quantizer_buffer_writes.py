"""An in-place write into a buffer (a KV cache's `index_copy_`) is quantized: `transform_for_annotation`
makes it functional + copy_ (torchao never observes an in-place op's destination buffer, so before this the
cache stayed float and the write stayed on the CPU under TOSA INT)."""

import torch
from quant_harness import quantize

from arm_quantizer.buffer_writes import functionalize_buffer_writes
from arm_tosa_core.kv_cache_models import CacheWrite

aten = torch.ops.aten



def test_functionalize_rewrites_a_buffer_write():
    gm = torch.export.export(CacheWrite(), (torch.tensor([1, 4]), torch.randn(1, 2, 2, 4))).module()
    assert functionalize_buffer_writes(gm) == 1
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert aten.index_copy.default in targets and aten.copy_.default in targets
    assert aten.index_copy_.default not in targets


def test_cache_input_of_the_write_is_quantized():
    inputs = (torch.tensor([1, 4]), torch.randn(1, 2, 2, 4))
    converted = quantize(CacheWrite().eval(), inputs)
    (write,) = [n for n in converted.graph.nodes if n.target in (aten.index_copy.default, aten.index_copy_.default)]
    assert "dequantize" in str(write.args[0].target), write.args[0]  # the cache arrives quantized
