"""Name vela's layers the way PyTorch does: torch node -> TOSA operators -> vela layer.

The core records, for every TOSA operator it emits, the torch node that caused it and that node's
module path (``OpRecord.module``, from export's ``nn_module_stack``). vela names each layer of its
per-layer CSV after the output tensor of the last TOSA operator it folded into that layer
(``layer-12``), after such a name plus a suffix for an operator it split off (``layer-5_transpose``),
or ``#<n>`` for an operator it made up. So a layer owns the TOSA operators from just after the
previous named layer's operator up to its own (in TOSA order: vela fused them into it); a made-up
``#<n>`` layer belongs to the next named layer of the CSV (the previous one at the end).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# TOSA operators that carry no computation of their own: a layer is named after its first
# operator that is not one of these (the conv, not the RESCALE vela folded into it).
_PLUMBING = {"RESCALE", "RESHAPE", "TRANSPOSE", "IDENTITY", "CAST"}
_SUFFIXED = re.compile(r"^(layer-\d+)_\w+$")


def _owner_name(name: str, known: set[str]) -> str | None:
    if name in known:
        return name
    match = _SUFFIXED.match(name)
    if match and match.group(1) in known:
        return match.group(1)
    return None


def torch_names(layers: Sequence[dict], debug_map: Sequence[dict]) -> list[dict]:
    """For each vela layer row: ``{"node", "module", "op", "label", "tosa_ops"}``, in row order.

    ``node``: the torch node of the layer's main operator ("" when unknown);
    ``tosa_ops`` lists every TOSA operator folded into the layer as ``"OP <- module · op"``;
    ``label`` is ``"module · op"`` of the layer's main operator (``"(top level) · add"`` for an
    op in the model's own forward).
    """
    index_of = {out: i for i, rec in enumerate(debug_map) for out in rec.get("outputs", [])}
    owners = [_owner_name(str(row.get("Name", "")), set(index_of)) for row in layers]
    claimed = sorted({index_of[o] for o in owners if o is not None})
    # Each TOSA operator goes to the first claimed operator at or after it.
    groups: dict[int, list[int]] = {c: [] for c in claimed}
    for i in range(len(debug_map)):
        after = [c for c in claimed if c >= i]
        if after:
            groups[after[0]].append(i)
        elif claimed:
            groups[claimed[-1]].append(i)
    # A made-up layer (#n) borrows the next named row's operators, else the previous one's.
    resolved: list[str | None] = list(owners)
    for k, owner in enumerate(owners):
        if owner is None:
            later = [o for o in owners[k + 1:] if o is not None]
            earlier = [o for o in owners[:k] if o is not None]
            resolved[k] = later[0] if later else (earlier[-1] if earlier else None)
    out = []
    for row, owner in zip(layers, resolved, strict=True):
        ops = [debug_map[i] for i in groups.get(index_of[owner], [])] if owner else []
        main = next((r for r in ops if r["op"] not in _PLUMBING), ops[-1] if ops else None)
        module = (main or {}).get("module", "") or ""
        op = (main or {}).get("torch_op", "") or ""
        label = f"{module or '(top level)'} · {op or '?'}" if main else f"(vela) · {row.get('NNG Operator', '?')}"
        out.append({
            "node": (main or {}).get("node") or "",
            "module": module,
            "op": op,
            "label": label,
            "tosa_ops": [f"{r['op']} <- {r.get('module') or '(top level)'} · {r.get('torch_op', '')}"
                         for r in ops],
        })
    return out


def annotate_layers(layers: list[dict], debug_map: Sequence[dict]) -> None:
    """Add the PyTorch columns (``Module``, ``Torch Op``, ``PyTorch``, ``TOSA Ops``, ``Node``) to vela's rows."""
    for row, names in zip(layers, torch_names(layers, debug_map), strict=True):
        row["Node"] = names["node"]
        row["Module"] = names["module"]
        row["Torch Op"] = names["op"]
        row["PyTorch"] = names["label"]
        row["TOSA Ops"] = "; ".join(names["tosa_ops"])
