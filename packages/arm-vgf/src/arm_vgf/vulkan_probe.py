"""Minimal Vulkan probe through ctypes: is the loader there, which device, which ML extensions.

Only the five core entry points the loader exports are used, so no Python Vulkan binding is needed.
The probe runs in-process: the loader reads VK_LAYER_PATH / VK_INSTANCE_LAYERS at
`vkCreateInstance`, so probe inside `environment.layer_environment()` to see the emulation layers.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

LOADER_SONAME = "libvulkan.so.1"
ML_DEVICE_EXTENSIONS = ("VK_ARM_tensors", "VK_ARM_data_graph")

_VK_SUCCESS = 0
_VK_INCOMPLETE = 5
_STYPE_APPLICATION_INFO = 0
_STYPE_INSTANCE_CREATE_INFO = 1
_STYPE_DEVICE_QUEUE_CREATE_INFO = 2
_STYPE_DEVICE_CREATE_INFO = 3
_API_VERSION_1_3 = (1 << 22) | (3 << 12)
_DEVICE_TYPES = {0: "other", 1: "integrated GPU", 2: "discrete GPU", 3: "virtual GPU", 4: "CPU"}


class _ApplicationInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("pApplicationName", ctypes.c_char_p),
        ("applicationVersion", ctypes.c_uint32),
        ("pEngineName", ctypes.c_char_p),
        ("engineVersion", ctypes.c_uint32),
        ("apiVersion", ctypes.c_uint32),
    ]


class _InstanceCreateInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("pApplicationInfo", ctypes.POINTER(_ApplicationInfo)),
        ("enabledLayerCount", ctypes.c_uint32),
        ("ppEnabledLayerNames", ctypes.POINTER(ctypes.c_char_p)),
        ("enabledExtensionCount", ctypes.c_uint32),
        ("ppEnabledExtensionNames", ctypes.POINTER(ctypes.c_char_p)),
    ]


class _PhysicalDeviceProperties(ctypes.Structure):
    # Only the leading fields are read; the tail (limits, sparse properties: ~800 bytes) is
    # covered by a generous pad so the driver never writes past our buffer.
    _fields_ = [
        ("apiVersion", ctypes.c_uint32),
        ("driverVersion", ctypes.c_uint32),
        ("vendorID", ctypes.c_uint32),
        ("deviceID", ctypes.c_uint32),
        ("deviceType", ctypes.c_int),
        ("deviceName", ctypes.c_char * 256),
        ("pipelineCacheUUID", ctypes.c_uint8 * 16),
        ("_rest", ctypes.c_uint8 * 4096),
    ]


class _DeviceQueueCreateInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("queueFamilyIndex", ctypes.c_uint32),
        ("queueCount", ctypes.c_uint32),
        ("pQueuePriorities", ctypes.POINTER(ctypes.c_float)),
    ]


class _DeviceCreateInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("queueCreateInfoCount", ctypes.c_uint32),
        ("pQueueCreateInfos", ctypes.POINTER(_DeviceQueueCreateInfo)),
        ("enabledLayerCount", ctypes.c_uint32),
        ("ppEnabledLayerNames", ctypes.POINTER(ctypes.c_char_p)),
        ("enabledExtensionCount", ctypes.c_uint32),
        ("ppEnabledExtensionNames", ctypes.POINTER(ctypes.c_char_p)),
        ("pEnabledFeatures", ctypes.c_void_p),
    ]


class _ExtensionProperties(ctypes.Structure):
    _fields_ = [("extensionName", ctypes.c_char * 256), ("specVersion", ctypes.c_uint32)]


@dataclass(frozen=True)
class VulkanDevice:
    """One physical device as the loader (and any enabled layers) report it."""

    name: str
    api_version: str
    device_type: str
    ml_extensions: tuple[str, ...]  # the subset of ML_DEVICE_EXTENSIONS the device exposes
    ml_device_error: str | None  # why a device with ML_DEVICE_EXTENSIONS enabled failed, or None


class VulkanProbeError(RuntimeError):
    """The Vulkan loader is missing, or no instance/device could be created."""


def load_loader() -> ctypes.CDLL:
    """Load the Vulkan loader library; raise VulkanProbeError if it is not installed."""
    try:
        return ctypes.CDLL(LOADER_SONAME)
    except OSError as exc:
        raise VulkanProbeError(f"cannot load the Vulkan loader {LOADER_SONAME}: {exc}") from exc


def _version_str(v: int) -> str:
    return f"{(v >> 22) & 0x7F}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def _device_extensions(vk: ctypes.CDLL, device: ctypes.c_void_p) -> set[str]:
    count = ctypes.c_uint32(0)
    vk.vkEnumerateDeviceExtensionProperties(device, None, ctypes.byref(count), None)
    props = (_ExtensionProperties * count.value)()
    rc = vk.vkEnumerateDeviceExtensionProperties(device, None, ctypes.byref(count), props)
    if rc not in (_VK_SUCCESS, _VK_INCOMPLETE):
        return set()
    return {p.extensionName.decode() for p in props[: count.value]}


def _try_ml_device(vk: ctypes.CDLL, physical: ctypes.c_void_p, exts: tuple[str, ...]) -> str | None:
    """Create (and destroy) a logical device with the ML extensions enabled.

    Enumerating extensions is not enough: with the emulation layers stacked in the wrong order
    they are listed, yet vkCreateDevice fails (VK_ERROR_FEATURE_NOT_PRESENT).
    """
    if exts != ML_DEVICE_EXTENSIONS:
        return f"missing device extensions {sorted(set(ML_DEVICE_EXTENSIONS) - set(exts))}"
    priority = ctypes.c_float(1.0)
    queue = _DeviceQueueCreateInfo(
        sType=_STYPE_DEVICE_QUEUE_CREATE_INFO,
        queueFamilyIndex=0,
        queueCount=1,
        pQueuePriorities=ctypes.pointer(priority),
    )
    names = (ctypes.c_char_p * len(exts))(*(e.encode() for e in exts))
    info = _DeviceCreateInfo(
        sType=_STYPE_DEVICE_CREATE_INFO,
        queueCreateInfoCount=1,
        pQueueCreateInfos=ctypes.pointer(queue),
        enabledExtensionCount=len(exts),
        ppEnabledExtensionNames=names,
    )
    device = ctypes.c_void_p()
    rc = vk.vkCreateDevice(physical, ctypes.byref(info), None, ctypes.byref(device))
    if rc != _VK_SUCCESS:
        return f"vkCreateDevice with {', '.join(exts)} failed with VkResult {rc}"
    vk.vkDestroyDevice(device, None)
    return None


def probe_devices() -> list[VulkanDevice]:
    """Create a Vulkan 1.3 instance and describe every physical device it enumerates."""
    vk = load_loader()
    vk.vkCreateInstance.restype = ctypes.c_int
    vk.vkEnumeratePhysicalDevices.restype = ctypes.c_int
    vk.vkEnumerateDeviceExtensionProperties.restype = ctypes.c_int
    vk.vkCreateDevice.restype = ctypes.c_int
    vk.vkDestroyDevice.restype = None
    vk.vkDestroyInstance.restype = None
    app = _ApplicationInfo(
        sType=_STYPE_APPLICATION_INFO,
        pApplicationName=b"arm-vgf-probe",
        apiVersion=_API_VERSION_1_3,
    )
    info = _InstanceCreateInfo(
        sType=_STYPE_INSTANCE_CREATE_INFO, pApplicationInfo=ctypes.pointer(app)
    )
    instance = ctypes.c_void_p()
    rc = vk.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance))
    if rc != _VK_SUCCESS:
        raise VulkanProbeError(f"vkCreateInstance failed with VkResult {rc}")
    try:
        count = ctypes.c_uint32(0)
        rc = vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
        if rc != _VK_SUCCESS or count.value == 0:
            raise VulkanProbeError(
                f"no Vulkan physical device found (VkResult {rc}): no driver (ICD) is installed"
            )
        handles = (ctypes.c_void_p * count.value)()
        vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), handles)
        devices = []
        for handle in handles[: count.value]:
            props = _PhysicalDeviceProperties()
            vk.vkGetPhysicalDeviceProperties(ctypes.c_void_p(handle), ctypes.byref(props))
            present = _device_extensions(vk, ctypes.c_void_p(handle))
            exts = tuple(e for e in ML_DEVICE_EXTENSIONS if e in present)
            devices.append(
                VulkanDevice(
                    name=props.deviceName.decode(errors="replace"),
                    api_version=_version_str(props.apiVersion),
                    device_type=_DEVICE_TYPES.get(props.deviceType, str(props.deviceType)),
                    ml_extensions=exts,
                    ml_device_error=_try_ml_device(vk, ctypes.c_void_p(handle), exts),
                )
            )
        return devices
    finally:
        vk.vkDestroyInstance(instance, None)
