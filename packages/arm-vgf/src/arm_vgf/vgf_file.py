"""Decode a VGF file with `vgfpy` (ai-ml-sdk-vgf-library): I/O tensors, modules, constants.

A VGF holds four sections (modules, model sequence, model resources, constants). The model
sequence names the model's inputs/outputs and their binding slots; each slot points at a model
resource table (MRT) entry that carries the VkFormat and shape.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import vgfpy

# VkFormat value -> (Vulkan name, numpy dtype name). Only the single-component formats the
# model converter emits for tensors. bf16/fp8 need ml_dtypes.
VK_FORMATS: dict[int, tuple[str, str]] = {
    13: ("VK_FORMAT_R8_UINT", "uint8"),
    14: ("VK_FORMAT_R8_SINT", "int8"),
    74: ("VK_FORMAT_R16_UINT", "uint16"),
    75: ("VK_FORMAT_R16_SINT", "int16"),
    76: ("VK_FORMAT_R16_SFLOAT", "float16"),
    98: ("VK_FORMAT_R32_UINT", "uint32"),
    99: ("VK_FORMAT_R32_SINT", "int32"),
    100: ("VK_FORMAT_R32_SFLOAT", "float32"),
    110: ("VK_FORMAT_R64_UINT", "uint64"),
    111: ("VK_FORMAT_R64_SINT", "int64"),
    1000460000: ("VK_FORMAT_R8_BOOL_ARM", "bool"),
    1000460001: ("VK_FORMAT_R16_SFLOAT_FPENCODING_BFLOAT16_ARM", "bfloat16"),
    1000460002: ("VK_FORMAT_R8_SFLOAT_FPENCODING_FLOAT8E4M3_ARM", "float8_e4m3fn"),
    1000460003: ("VK_FORMAT_R8_SFLOAT_FPENCODING_FLOAT8E5M2_ARM", "float8_e5m2"),
}


class VgfFormatError(ValueError):
    """The bytes are not a VGF file this vgf library can read."""


@dataclass(frozen=True)
class VgfTensor:
    """One model input or output: its VGF name, binding slot and tensor description."""

    index: int
    name: str
    binding: int
    descriptor_set: int
    mrt_index: int
    shape: tuple[int, ...]
    vk_format: str
    dtype: str  # numpy dtype name ("int8", "float32", ...)

    def numpy_dtype(self) -> np.dtype:
        """The numpy dtype (bf16/fp8 through ml_dtypes)."""
        if self.dtype in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            import ml_dtypes

            return np.dtype(getattr(ml_dtypes, self.dtype))
        return np.dtype(self.dtype)


@dataclass(frozen=True)
class VgfModule:
    """A module (SPIR-V graph or compute shader) of the VGF."""

    index: int
    name: str
    type: str  # "graph" or "compute"
    entry_point: str
    spirv_bytes: int


@dataclass(frozen=True)
class VgfSegment:
    """One step of the model sequence, running one module."""

    index: int
    name: str
    type: str
    module_index: int


@dataclass(frozen=True)
class VgfConstant:
    """A constant (e.g. weights) stored in the VGF."""

    index: int
    mrt_index: int
    shape: tuple[int, ...]
    vk_format: str
    nbytes: int
    sparse: bool


@dataclass(frozen=True)
class VgfModel:
    """Everything decoded from a VGF that a caller needs to bind and describe it."""

    version: str
    inputs: tuple[VgfTensor, ...]
    outputs: tuple[VgfTensor, ...]
    modules: tuple[VgfModule, ...]
    segments: tuple[VgfSegment, ...]
    constants: tuple[VgfConstant, ...]


def _format(code: int) -> tuple[str, str]:
    return VK_FORMATS.get(code, (f"VkFormat({code})", "unknown"))


def _shape(mrt: Any, idx: int) -> tuple[int, ...]:
    shape = mrt.getTensorShape(idx)
    return tuple(int(d) for d in shape) if shape is not None else ()


def _section(data: memoryview, offset: int, size: int) -> memoryview:
    if offset + size > len(data):
        raise VgfFormatError(
            f"VGF section [{offset}, {offset + size}) lies past the end ({len(data)} bytes)"
        )
    return data[offset : offset + size]


def _descriptor_sets(seq: Any) -> dict[int, int]:
    """MRT index -> descriptor set index, from every segment's descriptor set infos."""
    sets: dict[int, int] = {}
    for seg in range(seq.modelSequenceTableSize()):
        for d in range(seq.getSegmentDescriptorSetInfosSize(seg)):
            handle = seq.getDescriptorBindingSlotsHandle(seg, d)
            set_index = seq.getSegmentDescriptorSetIndex(seg, d)
            for slot in range(seq.getBindingsSize(handle)):
                sets.setdefault(seq.getBindingSlotMrtIndex(handle, slot), set_index)
    return sets


def _io(seq: Any, mrt: Any, slots: Any, names: Any, sets: dict[int, int]) -> tuple[VgfTensor, ...]:
    tensors = []
    for i in range(seq.getBindingsSize(slots)):
        mrt_index = seq.getBindingSlotMrtIndex(slots, i)
        vk_name, dtype = _format(mrt.getVkFormat(mrt_index))
        tensors.append(
            VgfTensor(
                index=i,
                name=seq.getName(names, i) if i < seq.getNamesSize(names) else f"tensor_{i}",
                binding=seq.getBindingSlotBinding(slots, i),
                descriptor_set=sets.get(mrt_index, 0),
                mrt_index=mrt_index,
                shape=_shape(mrt, mrt_index),
                vk_format=vk_name,
                dtype=dtype,
            )
        )
    return tuple(tensors)


def read_vgf(vgf_bytes: bytes) -> VgfModel:
    """Decode the header, module table, model sequence, resources and constants of a VGF."""
    data = memoryview(bytes(vgf_bytes))
    if len(data) < vgfpy.HeaderSize():
        raise VgfFormatError(
            f"{len(data)} bytes is too short for a VGF header ({vgfpy.HeaderSize()})"
        )
    header = vgfpy.CreateHeaderDecoder(data, vgfpy.HeaderSize(), len(data))
    if header is None or not header.IsValid():
        raise VgfFormatError("not a VGF file (bad magic); pass the output of model-converter")
    if not header.CheckVersion():
        raise VgfFormatError(
            f"VGF version {header.GetMajor()}.{header.GetMinor()}.{header.GetPatch()} is not "
            "supported by the installed ai-ml-sdk-vgf-library: use matching ML SDK wheel versions"
        )

    def decode(create: Any, what: str, offset: int, size: int) -> Any:
        decoder = create(_section(data, offset, size), size)
        if decoder is None:  # the vgfpy factories return None on a corrupt section
            raise VgfFormatError(f"corrupt VGF: cannot decode the {what} section")
        return decoder

    modules = decode(
        vgfpy.CreateModuleTableDecoder,
        "module table",
        header.GetModuleTableOffset(),
        header.GetModuleTableSize(),
    )
    mrt = decode(
        vgfpy.CreateModelResourceTableDecoder,
        "model resource table",
        header.GetModelResourceTableOffset(),
        header.GetModelResourceTableSize(),
    )
    seq = decode(
        vgfpy.CreateModelSequenceTableDecoder,
        "model sequence table",
        header.GetModelSequenceTableOffset(),
        header.GetModelSequenceTableSize(),
    )
    consts = decode(
        vgfpy.CreateConstantDecoder,
        "constants",
        header.GetConstantsOffset(),
        header.GetConstantsSize(),
    )

    sets = _descriptor_sets(seq)
    inputs = _io(
        seq,
        mrt,
        seq.getModelSequenceInputBindingSlotsHandle(),
        seq.getModelSequenceInputNamesHandle(),
        sets,
    )
    outputs = _io(
        seq,
        mrt,
        seq.getModelSequenceOutputBindingSlotsHandle(),
        seq.getModelSequenceOutputNamesHandle(),
        sets,
    )
    module_list = []
    for i in range(modules.size()):
        code = modules.getSPIRVModuleCode(i) if modules.hasSPIRVCode(i) else None
        module_list.append(
            VgfModule(
                index=i,
                name=modules.getModuleName(i),
                type=modules.getModuleType(i).name.lower(),
                entry_point=modules.getModuleEntryPoint(i),
                spirv_bytes=len(code) * code.itemsize if code is not None else 0,
            )
        )
    segments = tuple(
        VgfSegment(
            index=i,
            name=seq.getSegmentName(i),
            type=seq.getSegmentType(i).name.lower(),
            module_index=seq.getSegmentModuleIndex(i),
        )
        for i in range(seq.modelSequenceTableSize())
    )
    constants = []
    for i in range(consts.size()):
        mrt_index = consts.getConstantMrtIndex(i)
        blob = consts.getConstant(i)
        constants.append(
            VgfConstant(
                index=i,
                mrt_index=mrt_index,
                shape=_shape(mrt, mrt_index),
                vk_format=_format(mrt.getVkFormat(mrt_index))[0],
                nbytes=blob.nbytes if blob is not None else 0,
                sparse=bool(consts.isSparseConstant(i)),
            )
        )
    return VgfModel(
        version=f"{header.GetMajor()}.{header.GetMinor()}.{header.GetPatch()}",
        inputs=inputs,
        outputs=outputs,
        modules=tuple(module_list),
        segments=segments,
        constants=tuple(constants),
    )


def _tensor_entry(t: VgfTensor) -> dict[str, Any]:
    # scale/zero_point are not in the VGF: the caller (which knows the quantization) fills them.
    return {
        "index": t.index,
        "name": t.name,
        "binding": t.binding,
        "descriptor_set": t.descriptor_set,
        "shape": list(t.shape),
        "dtype": t.dtype,
        "vk_format": t.vk_format,
        "scale": None,
        "zero_point": None,
    }


def describe_vgf(vgf_bytes: bytes) -> dict[str, Any]:
    """A JSON-serializable summary of a VGF for a sidecar file.

    Keys: vgf_version, inputs, outputs (index, name, binding, descriptor_set, shape, dtype,
    vk_format, scale=None, zero_point=None), modules, segments, constants.
    """
    model = read_vgf(vgf_bytes)
    return {
        "vgf_version": model.version,
        "inputs": [_tensor_entry(t) for t in model.inputs],
        "outputs": [_tensor_entry(t) for t in model.outputs],
        "modules": [asdict(m) for m in model.modules],
        "segments": [asdict(s) for s in model.segments],
        "constants": [{**asdict(c), "shape": list(c.shape)} for c in model.constants],
    }
