"""NPU cycles of a global average pool in its two INT forms, per Ethos-U target (issue 22).

A conv + ReLU + global average pool (+ linear) tail, quantized with `EthosUQuantizer` and the average's
qparams either its input's (`global_average_shares_qparams = True`: one int8 AVG_POOL2D) or its own
(False: an exact int32 REDUCE_SUM and a RESCALE); vela's NPU cycles for each (U85 in Sram_Only, the
public bench's memory mode there). EthosUQuantizer picks the form per family from these numbers.

    uv run python bench/ethosu_global_pool_forms.py [--targets ethos-u55-128 ethos-u85-256]
"""

from __future__ import annotations

import argparse

import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer, ethosu_report

#: name -> (input channels, pooled channels, H = W, a linear layer after the pool): the tails of the
#: public bench's models at 128x128
TAILS = {"SqueezeNet 1.1 (7x7x1000)": (512, 1000, 7, False), "ResNet-18 (4x4x512)": (64, 512, 4, True),
         "MobileNetV2 (4x4x1280)": (320, 1280, 4, True)}


class Tail(nn.Module):
    def __init__(self, cin: int, channels: int, linear: bool) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, channels, 1)
        self.fc = nn.Linear(channels, 10) if linear else None

    def forward(self, x):
        y = nn.functional.adaptive_avg_pool2d(torch.relu(self.conv(x)), 1).flatten(1)
        return self.fc(y) if self.fc is not None else y


def npu_cycles(model: nn.Module, x: torch.Tensor, target: str, shared: bool) -> int:
    spec = EthosUCompileSpec(target, memory_mode="Sram_Only" if "u85" in target else None)
    quantizer = EthosUQuantizer(spec)
    quantizer.global_average_shares_qparams = shared
    prepared = prepare_pt2e(torch.export.export(model.eval(), (x,)).module(), quantizer)
    prepared(x)
    edge = to_edge_transform_and_lower(torch.export.export(convert_pt2e(prepared), (x,)),
                                       partitioner=[EthosUPartitioner(spec)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    return int(sum(p.cycles_npu for p in ethosu_report(edge).partitions))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", nargs="+", default=["ethos-u55-128", "ethos-u85-256"])
    args = p.parse_args()
    print("| tail | target | own qparams (REDUCE_SUM + RESCALE) | input's qparams (AVG_POOL2D) | ratio |")
    print("|---|---|---|---|---|")
    for name, (cin, channels, hw, linear) in TAILS.items():
        torch.manual_seed(0)
        model, x = Tail(cin, channels, linear), torch.randn(1, cin, hw, hw)
        for target in args.targets:
            own, shared = (npu_cycles(model, x, target, s) for s in (False, True))
            print(f"| {name} | {target} | {own:,} | {shared:,} | {shared / own:.3f} |", flush=True)


if __name__ == "__main__":
    main()
