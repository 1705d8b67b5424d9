"""The fewest NPU cycles vela 5.2's U55-128 cost model allows a CNN's convolutions and residual adds, per layer.

    uv run python bench/vela_u55_floor.py                       # MobileNetV2 at 224 (issue 22's 45 % goal)
    uv run python bench/vela_u55_floor.py --model tv:mobilenet_v3_large --input-size 128

For each Conv2d (int8 in and out, 32-bit accumulator, as vela picks for int8) and each residual ADD (of a
torchvision InvertedResidual block) of the model, the cycles vela 5.2 cannot estimate below, from `ethosu/vela/npu_performance.py` and the
U55-128 tables in `architecture_features.py` (OFM micro-block 2x1x8 = 16 elements):
- output rate: `output_cycles_per_elem[7]` = 0.5 cycles per output element (ReLU's activation rate is also
  0.5), whatever the graph form: every layer writes its output;
- DPU rate (`_estimate_conv_cycles`, for blocks of at least 8 micro-blocks, where 4 cycles per micro-block
  exceed the 32-cycle weight-buffer floor): a normal conv takes 4 cycles per micro-block per kernel element per
  IFM block of min(32, C_in rounded up to 8) channels: 0.25 x kh x kw x ceil(C_in / 32) per element; the
  part-kernel variant 0.25 x ceil(kh x kw / 4) x ceil(C_in / 8) for C_in <= 32 (vela takes the cheaper);
  a depthwise conv 0.25 x ceil(kh x kw / 4) (0.75 for 3x3, stride 1 or 2 alike);
- int8 ADD: `output_cycles_per_elem[5]` = 1.5 cycles per element (the "advanced" add; the 1.0 simple add
  is disabled in vela 5.2); U55 does not fuse an ADD into a convolution.
A layer's floor is output elements x max(output rate, DPU rate). The sum is a lower bound on the NPU
cycles of any graph that computes the same layers (the classifier and pooling are not counted, so the real
bound is higher). The MAC utilization it allows is MACs / (floor x 128).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from public_models import build_public  # noqa: E402

OUTPUT_RATE = 0.5  # output_cycles_per_elem[7] (int8 OFM, 32-bit accumulator), Ethos_U55_128
ADD_RATE = 1.5  # output_cycles_per_elem[5], Ethos_U55_128
MACS_PER_CYCLE = 128


def conv_dpu_rate(conv: torch.nn.Conv2d) -> float:
    """vela 5.2's DPU cycles per output element of one U55-128 convolution (large blocks)."""
    kh, kw = conv.kernel_size
    c_in = conv.in_channels // conv.groups
    if conv.groups == conv.in_channels and c_in == 1:  # depthwise
        return 0.25 * math.ceil(kh * kw / 4)
    normal = 0.25 * kh * kw * math.ceil(c_in / 32) * conv.groups
    if c_in > 32:
        return normal
    part_kernel = 0.25 * math.ceil(kh * kw / 4) * math.ceil(c_in / 8) * conv.groups
    return min(normal, part_kernel)


def _kind(conv: torch.nn.Conv2d) -> str:
    if conv.groups == conv.in_channels and conv.groups > 1:
        return f"depthwise {conv.kernel_size[0]}x{conv.kernel_size[1]}"
    if conv.kernel_size == (1, 1):
        return "1x1, C_in <= 32" if conv.in_channels <= 32 else "1x1, C_in > 32"
    return f"{conv.kernel_size[0]}x{conv.kernel_size[1]} conv, C_in {conv.in_channels}"


def floors(model: torch.nn.Module, inputs: tuple) -> list[dict]:
    """One row per Conv2d and residual ADD: kind, output elements, MACs, floor cycles."""
    rows: list[dict] = []

    def hook(conv: torch.nn.Conv2d, _args: tuple, out: torch.Tensor) -> None:
        elems = out.numel()
        macs = elems * conv.kernel_size[0] * conv.kernel_size[1] * conv.in_channels // conv.groups
        rate = max(OUTPUT_RATE, conv_dpu_rate(conv))
        rows.append({"kind": _kind(conv), "elems": elems, "macs": macs, "rate": rate, "floor": elems * rate})

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    blocks = [m for m in model.modules() if getattr(m, "use_res_connect", False)]
    adds = []
    for block in blocks:  # torchvision's InvertedResidual: x + self.conv(x)
        adds.append(block.register_forward_hook(
            lambda _m, _a, out: rows.append({"kind": "residual ADD", "elems": out.numel(), "macs": 0,
                                             "rate": ADD_RATE, "floor": out.numel() * ADD_RATE})))
    with torch.no_grad():
        model(*inputs)
    for h in handles + adds:
        h.remove()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="tv:mobilenet_v2")
    p.add_argument("--input-size", type=int, default=224)
    p.add_argument("--utilization", type=float, default=0.45, help="the goal to test against")
    args = p.parse_args(argv)
    model, inputs = build_public(args.model, 0, args.input_size)
    rows = floors(model.eval(), inputs)
    by: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0])
    for r in rows:
        acc = by[r["kind"]]
        acc[0] += 1
        acc[1] += r["floor"]
        acc[2] += r["macs"]
        acc[3] += r["elems"]
    print("| layer kind | layers | output elements | floor cycles per element | floor NPU cycles | best MAC util |")
    print("|---|---|---|---|---|---|")
    for kind, (n, floor, macs, elems) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        util = f"{100 * macs / (floor * MACS_PER_CYCLE):.1f} %" if macs else "-"
        print(f"| {kind} | {n} | {elems:,.0f} | {floor / elems:.2f} | {floor:,.0f} | {util} |")
    total = sum(r["floor"] for r in rows)
    macs = sum(r["macs"] for r in rows)
    need = macs / (args.utilization * MACS_PER_CYCLE)
    print(f"\nconv MACs {macs:,}; floor of these layers {total:,.0f} NPU cycles = at most "
          f"{100 * macs / (total * MACS_PER_CYCLE):.1f} % MAC utilization; {100 * args.utilization:.0f} % needs "
          f"at most {need:,.0f} cycles in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
