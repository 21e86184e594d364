"""Arrays already on the GPU, seen from hobbit's CUDA runtime, and those it hands back.

A caller holding its inputs on the GPU (a torch or CuPy tensor, a JAX array, a numba
device array) should not have to bring them to the host for GpuModel.run. Two protocols
say where such an array lives without importing its library: `__cuda_array_interface__`
(a dict: pointer, shape, typestr, strides, the producer's stream) and DLPack
(`__dlpack__` hands over a capsule holding a DLManagedTensor, read here with ctypes).
Either way the result is a DeviceView: what the runtime needs to copy the data device to
device into the model's own input buffer. DeviceArray goes the other way: a model output
left on the GPU, exposing `__cuda_array_interface__` so any of those libraries can read
it in place."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Callable

import numpy as np

# DLPack's device types (dlpack.h DLDeviceType); those whose memory a CUDA copy can read,
# and those a HIP copy can (the HIP runtime, hobbit.runtime.hip, reads ROCm's).
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED, DL_ROCM, DL_ROCM_HOST = 1, 2, 3, 13, 10, 11
CUDA_DLPACK_DEVICES = (DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED)
ROCM_DLPACK_DEVICES = (DL_ROCM, DL_ROCM_HOST)
_DL_DTYPE = {0: "i", 1: "u", 2: "f", 6: "b"}  # DLDataTypeCode: int, uint, float, bool


@dataclass(frozen=True)
class DeviceView:
    pointer: int
    shape: tuple[int, ...]
    dtype: np.dtype
    contiguous: bool
    stream: int | None  # a CUDA stream the producer's writes are queued on, to wait for; None: ready
    keep: object = None  # whatever keeps the producer's memory alive until the copy is done

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def is_c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int) -> bool:
    """Byte strides (None: C order) describe a dense C-order layout; dims of size 1 may have any stride."""
    if strides is None:
        return True
    expected = itemsize
    for size, stride in reversed(list(zip(shape, strides))):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def device_view(value: object, consumer_stream: int,
                dlpack_devices: tuple[int, ...] = CUDA_DLPACK_DEVICES) -> DeviceView | None:
    """`value` as a DeviceView if it is an array on a GPU, else None (a host array, or not
    an array: the host path's checks then say what is wrong with it). `consumer_stream` is
    the stream the copy will run on, which DLPack producers order their pending writes
    before; `dlpack_devices` the DLPack device types the caller's API can copy from."""
    if isinstance(value, np.ndarray):
        return None
    interface = getattr(value, "__cuda_array_interface__", None)
    if isinstance(interface, dict):
        return _from_cuda_array_interface(interface, value)
    if hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        device_type, _ = value.__dlpack_device__()
        if int(device_type) in dlpack_devices:
            return from_dlpack_capsule(value.__dlpack__(stream=consumer_stream))
    return None


def _from_cuda_array_interface(interface: dict, owner: object) -> DeviceView:
    shape = tuple(int(n) for n in interface["shape"])
    dtype = np.dtype(interface["typestr"])
    strides = interface.get("strides")
    contiguous = interface.get("mask") is None and \
        is_c_contiguous(shape, None if strides is None else tuple(strides), dtype.itemsize)
    stream = interface.get("stream")
    return DeviceView(int(interface["data"][0] or 0), shape, dtype, contiguous, None if stream is None else int(stream),
                      owner)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def from_dlpack_capsule(capsule: object) -> DeviceView:
    """A DLPack capsule ("dltensor": a DLManagedTensor, which starts with its DLTensor) as a
    DeviceView of any device. The capsule is not consumed: the view keeps it, and when it
    is dropped its destructor calls the producer's deleter, as DLPack prescribes for an
    unconsumed capsule. Strides are in elements (NULL: C order)."""
    tensor = _DLTensor.from_address(_get_pointer(capsule, b"dltensor"))
    code, bits, lanes = tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
    if code not in _DL_DTYPE or lanes != 1 or (code == 6 and bits != 8):
        raise TypeError(f"DLPack data type (code {code}, {bits} bits, {lanes} lanes) has no numpy equivalent here")
    dtype = np.dtype(bool) if code == 6 else np.dtype(f"{_DL_DTYPE[code]}{bits // 8}")
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    strides = None if not tensor.strides else tuple(tensor.strides[i] * dtype.itemsize for i in range(tensor.ndim))
    contiguous = is_c_contiguous(shape, strides, dtype.itemsize)
    return DeviceView((tensor.data or 0) + tensor.byte_offset, shape, dtype, contiguous, None, capsule)


class DeviceArray:
    """A model output in device memory, C-contiguous. It is the model's own output buffer:
    the next run overwrites it, and closing the model frees it; copy it (`numpy()`, or the
    consumer library's own copy) to keep it. Its writes are complete when run returns."""

    def __init__(self, pointer: int, shape: tuple[int, ...], dtype: np.dtype,
                 to_host: Callable[["DeviceArray"], np.ndarray], owner: object):
        self.pointer, self.shape, self.dtype = pointer, tuple(shape), np.dtype(dtype)
        self._to_host = to_host
        self._owner = owner  # keeps the model (and so this memory) alive while the array is

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.pointer, False), "strides": None,
                "version": 3, "stream": None}

    def numpy(self) -> np.ndarray:
        """A host copy."""
        return self._to_host(self)

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype.name}, pointer=0x{self.pointer:x})"
