"""Which descriptor bindings of a compiled shader are writable, read from its SPIR-V.

The runtime's barrier plan (barrier_plan.cpp) takes a dispatch's last binding as the only tensor it
writes and every other binding as read. A shader that also wrote an earlier binding would race with the
dispatch after it, with no error. embed_shaders.py refuses such a shader at build time with
`writes_only_last_binding`.

A binding is read-only when its variable, or every member of its block, carries SPIR-V's NonWritable
decoration (what glslang emits for a `readonly` buffer). The SPIR-V of the compiled variant is read
rather than the GLSL text, so #if'd declarations and included files count exactly as compiled.
"""

from __future__ import annotations

from collections import defaultdict

# SPIR-V opcodes and decorations (SPIR-V 1.3 specification, sections 3.32 and 3.20)
OP_TYPE_STRUCT, OP_TYPE_POINTER, OP_VARIABLE, OP_DECORATE, OP_MEMBER_DECORATE = 30, 32, 59, 71, 72
DECORATION_NON_WRITABLE, DECORATION_BINDING = 24, 33
SPIRV_MAGIC = 0x07230203


def _instructions(spirv: bytes):
    """(opcode, operand words) of each instruction after the 5-word header."""
    words = [int.from_bytes(spirv[i:i + 4], "little") for i in range(0, len(spirv), 4)]
    if not words or words[0] != SPIRV_MAGIC:
        raise ValueError("not a little-endian SPIR-V module (bad magic word)")
    i = 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0:
            raise ValueError(f"malformed SPIR-V: a zero-length instruction at word {i}")
        yield opcode, words[i + 1:i + count]
        i += count


def writable_bindings(spirv: bytes) -> tuple[set[int], set[int]]:
    """(every binding number, the writable ones) of a compiled shader."""
    binding: dict[int, int] = {}  # variable id -> binding
    non_writable: set[int] = set()  # variable ids decorated NonWritable
    members: dict[int, set[int]] = defaultdict(set)  # struct id -> members decorated NonWritable
    member_count: dict[int, int] = {}  # struct id -> members
    pointee: dict[int, int] = {}  # pointer type id -> pointed-to type id
    var_type: dict[int, int] = {}  # variable id -> its pointer type id
    for op, ops in _instructions(spirv):
        if op == OP_DECORATE and ops[1] == DECORATION_BINDING:
            binding[ops[0]] = ops[2]
        elif op == OP_DECORATE and ops[1] == DECORATION_NON_WRITABLE:
            non_writable.add(ops[0])
        elif op == OP_MEMBER_DECORATE and ops[2] == DECORATION_NON_WRITABLE:
            members[ops[0]].add(ops[1])
        elif op == OP_TYPE_STRUCT:
            member_count[ops[0]] = len(ops) - 1
        elif op == OP_TYPE_POINTER:
            pointee[ops[0]] = ops[2]
        elif op == OP_VARIABLE:
            var_type[ops[1]] = ops[0]

    def read_only(var: int) -> bool:
        block = pointee.get(var_type.get(var, -1), -1)
        return var in non_writable or (block in member_count and len(members[block]) == member_count[block])

    every = set(binding.values())
    # one binding may be declared twice (two views of one buffer): writable if any view is
    return every, {b for var, b in binding.items() if not read_only(var)}


def writes_only_last_binding(spirv: bytes) -> str | None:
    """None when only the highest binding is writable, else what is wrong (for the build error)."""
    every, writable = writable_bindings(spirv)
    early = sorted(b for b in writable if b != max(every))
    if not early:
        return None
    return (f"binding {', '.join(map(str, early))} is writable (not `readonly`), but the runtime's barrier plan "
            f"(barrier_plan.cpp) treats only the last binding ({max(every)}) as written: declare it `readonly`, "
            "or teach barrier_plan.cpp which bindings the shader writes")
