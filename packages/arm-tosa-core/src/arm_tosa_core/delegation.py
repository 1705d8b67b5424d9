"""What every partitioner of this project shares (the TOSA-based ones and the Vulkan delegate's).

- `aten_key`: registries are keyed by aten overloads, while an edge-dialect graph's nodes call
  edge ops wrapping them; both registries look a node up by this key.
- The reason a node stays on the CPU, in words: a partitioner records it with `record_reason` while
  deciding, and `report.partition_report` shows it for every node left on the CPU.

Imports nothing of this package, so any layer (and `vulkan_delegate`) may use it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import Node

#: node.meta key of the reason a partitioner left the node on the CPU (None: it was claimed). One key
#: for every partitioner: with several, the last one that looked at a node says why it stays.
REASON_KEY = "arm_reason"


def aten_key(target: Any) -> Any:
    """The aten OpOverload behind an edge-dialect op (edge ops hold it in `_op`), or the target itself."""
    if isinstance(target, torch._ops.OpOverload):
        return target
    return getattr(target, "_op", target)


def record_reason(node: Node, reason: str | None) -> bool:
    """Record why `node` stays on the CPU (None: a partitioner takes it); True when it is taken."""
    node.meta[REASON_KEY] = reason
    return reason is None


def cpu_reason(node: Node) -> str:
    """Why `node` runs on the CPU, as its partitioners recorded it."""
    return node.meta.get(REASON_KEY) or "not claimed by any partitioner"
