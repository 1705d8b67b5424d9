"""The per-op work record of an Ethos-U payload, read from its command stream by the simulator.

    from runtime_cpp import ethosu_work_record
    for op in ethosu_work_record(payload):   # the delegate's processed bytes (a vela bin stream)
        print(op.op, op.ofm_shape, op.macs, op.dma_bytes)

One `OpWork` per kick-off (NPU_OP_CONV, DEPTHWISE, POOL, ELEMENTWISE, DMA_START) in stream order,
with the shapes as the registers give them (H, W, C), the multiply-accumulates of convolutions
(kernel taps times OFM elements, times IFM depth unless depthwise: their sum is vela's MAC count),
the elements pooling windows read, and the bytes a DMA moves. Nothing is executed: the
stream is walked on its registers, so this is cheap even for large models.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ._registry import module_handle


@dataclass(frozen=True)
class OpWork:
    """What one kick-off of the command stream does."""

    offset: int  # of the kick-off command in cmd_data
    op: str  # conv, depthwise, pool_max, pool_avg, reduce_sum, add, sub, mul, min, max, abs, dma
    ofm_shape: tuple[int, int, int]
    ifm_shape: tuple[int, int, int]
    ifm2_shape: tuple[int, int, int] | None  # None for unary ops, (1, 1, 1) for a scalar
    kernel: tuple[int, int]
    macs: int  # on the MAC array, as vela counts them: convolution and depthwise only
    window_reads: int  # pooling / REDUCE_SUM: elements read over the kernel windows
    dma_bytes: int


def ethosu_work_record(payload: bytes) -> list[OpWork]:
    """The work record of an Ethos-U delegate payload (ValueError naming the problem when the
    payload is malformed or its stream uses an operation the simulator lacks)."""
    return [_parse(line) for line in payload_text("runtime_cpp_ethosu_work_record", payload, "walked")]


def payload_text(symbol: str, payload: bytes, what: str) -> list[str]:
    """The lines of text the EthosUBackend entry point `symbol` writes for `payload` (ValueError
    saying the stream cannot be `what` when it returns an error)."""
    lib = module_handle("ethosu")
    if lib is None:
        raise ValueError("the EthosUBackend module is not registered (see runtime_cpp.backends())")
    fn = getattr(lib, symbol)
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    fn.restype = ctypes.c_long
    payload = bytes(payload)
    need = fn(payload, len(payload), None, 0)
    if need < 0:
        raise ValueError(f"the Ethos-U payload's command stream cannot be {what} (ExecuTorch error "
                         f"0x{-need:x}; the backend's log line says which command and offset)")
    buf = ctypes.create_string_buffer(max(need, 1))
    fn(payload, len(payload), buf, need)
    return buf.raw[:need].decode().splitlines()


def _parse(line: str) -> OpWork:
    f = line.split("\t")
    n = [int(v) for v in f[2:]]
    ifm2 = tuple(n[6:9])
    mac_array = f[1] in ("conv", "depthwise")
    return OpWork(offset=int(f[0]), op=f[1], ofm_shape=tuple(n[0:3]), ifm_shape=tuple(n[3:6]),
                  ifm2_shape=None if ifm2 == (0, 0, 0) else ifm2, kernel=tuple(n[9:11]),
                  macs=n[11] if mac_array else 0, window_reads=0 if mac_array else n[11],
                  dma_bytes=n[12])
