"""Public transformer models (`arm_tosa_core.public_transformers`: random init, one layer, hidden 32)
quantized with PT2E int8 and lowered for TOSA-1.0+INT as one partition, within 1 LSB of the
fake-quantized model on the reference model. Their masks and positions are int64/bool subgraphs of
`arange`, buffers and shapes, folded at compile time; the token ids feed embeddings.

The models take ~40 s each on 2 cores (quantization is most of it), so they are slow; the default
session keeps one small case of the int64 pattern (token ids through a view into an embedding, position
ids from `arange` into another, then attention). Not lowered yet under INT (the public models above
are not affected): a mask applied with `masked_fill(~mask, -inf)`, and SDPA on 3-d (headless) tensors
with a mask or `is_causal` (the quantizer's decomposition leaves a float `scalar_tensor` on the CPU).
"""

import pytest
import torch
from quant_harness import check_int

from arm_tosa_core.public_transformers import PUBLIC_TRANSFORMERS, build_public
from arm_tosa_core.testing import FnModule


@pytest.mark.slow
# t5_encoder: its position bias under the finfo.min mask is split into a keep mask and a finite bias
# (`decompose_for_int`), and its in-place bucket add folds with its temporary (`const_fold`)
# swin_t (~35 min on the loaded 2-core machine): its shifted-window mask folds (`const_fold`: x.new_zeros and
# writes through slice views)
@pytest.mark.parametrize("name", PUBLIC_TRANSFORMERS)
def test_public_transformer_int_one_partition_within_one_lsb(name):
    model, inputs = build_public(name)
    _, report, lsb, _ = check_int(model, inputs, max_lsb=1, case=name)
    assert len(report.delegates) == 1, report
    print(f"{name}: {lsb:.0f} LSB")


def _tiny_decoder(s, ids):
    length = ids.shape[1]
    positions = (torch.arange(length) + 0).unsqueeze(0)  # transformers' cache_position pattern
    h = s.tokens(ids.view(1, length)) + s.positions(positions)
    return s.out(torch.softmax(s.q(h) @ s.k(h).transpose(-1, -2) * 0.25, -1) @ h)


def test_token_and_position_embeddings_int_within_one_lsb():
    torch.manual_seed(0)
    module = FnModule(_tiny_decoder, tokens=torch.nn.Embedding(40, 16), positions=torch.nn.Embedding(8, 16),
                      q=torch.nn.Linear(16, 16), k=torch.nn.Linear(16, 16), out=torch.nn.Linear(16, 16))
    ids = torch.randint(0, 40, (1, 8))
    _, report, lsb, _ = check_int(module, (ids,), max_lsb=1, case="tiny_decoder")
    assert len(report.delegates) == 1, report
    # the token ids gather at run time; the position embedding of arange positions folds to a constant
    assert report.delegates[0].ops.get("GATHER", 0) == 1, report
