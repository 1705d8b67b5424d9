"""The register commands of an Ethos-U payload's command stream, decoded by the EthosUBackend
module (the parser the simulator runs on, so bounds and opcode checks are the same):

    from runtime_cpp.ethosu_commands import ethosu_commands
    for cmd in ethosu_commands(payload):   # the delegate's processed bytes (a vela bin stream)
        print(cmd.offset, cmd.name, cmd.param, cmd.data)

`kick_offs(commands)` groups them per kick-off: the operation with the named register state it
runs on (every register set so far, the latest value winning), as the NPU sees it. Names follow
the register map of the stream's NPU (Ethos-U55/U65, or Ethos-U85 for regor's streams).
"""

from __future__ import annotations

from dataclasses import dataclass

from .ethosu_work import payload_text


@dataclass(frozen=True)
class Command:
    """One command word (and its payload word for a cmd1)."""

    offset: int  # byte offset of the command word in cmd_data
    name: str  # NPU_OP_CONV, NPU_SET_IFM_BASE0, ...
    param: int  # the 16-bit parameter (bits 16-31)
    data: int | None  # the 32-bit payload of a cmd1, None for a cmd0


@dataclass(frozen=True)
class KickOff:
    """An operation and the register state it runs on."""

    offset: int
    op: str  # NPU_OP_ELEMENTWISE, NPU_OP_CONV, NPU_OP_DMA_START, NPU_OP_STOP, ...
    param: int
    registers: dict[str, tuple[int, int | None]]  # name -> (param, payload)


def ethosu_commands(payload: bytes) -> tuple[str, list[Command]]:
    """(product, commands) of an Ethos-U delegate payload: product is "ethos-u55", "ethos-u65" or
    "ethos-u85". ValueError naming the problem when the payload or its stream is malformed."""
    product, *lines = payload_text("runtime_cpp_ethosu_commands", payload, "decoded")
    commands = []
    for line in lines:
        offset, name, param, data = line.split("\t")
        commands.append(Command(int(offset), name, int(param), None if data == "-" else int(data)))
    return product, commands


def kick_offs(commands: list[Command]) -> list[KickOff]:
    """The operations of a decoded stream, each with the register state it runs on."""
    state: dict[str, tuple[int, int | None]] = {}
    ops = []
    for c in commands:
        if c.name.startswith("NPU_SET_"):
            state[c.name] = (c.param, c.data)
        else:
            ops.append(KickOff(c.offset, c.name, c.param, dict(state)))
    return ops
