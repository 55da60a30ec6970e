"""strata: a CPU-first inference runtime for ONNX models, from Python.

    import numpy as np, strata
    with strata.Session("model.onnx", threads=2) as s:
        (probs,) = s.run(None, {"image": np.zeros((1, 1, 8, 8), np.float32)})

Importing this package loads libstrata alone (through ctypes; no compiled module, so any
Python 3 with numpy can use it). Accelerator providers are loaded only when a session
asks for one, and a provider asked for by name that cannot be used raises
strata.ProviderError naming what is missing. docs/python.md has the whole API.
"""

import ctypes as _ctypes
import os as _os
from collections import namedtuple as _namedtuple

import numpy as _np

from . import _capi
from ._capi import (Cancelled, Error, InternalError, InvalidArgument, InvalidModel, IOFailure, NotFound, OutOfMemory,
                    ProviderError, RuntimeFailure, Unsupported)
from ._session import IoBinding, NodeAssignment, RunOptions, Session, ValueInfo

__version__ = _capi.version().decode()
api_version = _capi.api_version()
library_path = _capi.lib._name

ProviderInfo = _namedtuple("ProviderInfo", "name path status detail")
ProviderInfo.__doc__ = """One entry of the provider load report: name, library path, status
("OK", "NOT_FOUND", "MISSING_DEPENDENCY", "NO_DEVICE", ...) and a one-line detail (the
missing library, the ABI versions, ...)."""


def providers(paths=(), load=False):
    """The provider load report: a list of ProviderInfo. paths: extra provider libraries or
    folders, searched before STRATA_PROVIDER_PATH and the package folder. With load=True
    each provider is initialised to look for devices (this runs provider code); otherwise
    the report is read from the files alone."""
    env = _capi.env()
    paths = [paths] if isinstance(paths, (str, bytes)) else list(paths)
    arr = (_ctypes.c_char_p * max(len(paths), 1))(*[_os.fsencode(p) for p in paths])
    _capi.check(_capi.env_discover_providers(env, arr, len(paths), 1 if load else 0))
    out = []
    for i in range(_capi.env_provider_count(env)):
        name, path, detail = _ctypes.c_char_p(), _ctypes.c_char_p(), _ctypes.c_char_p()
        status = _ctypes.c_int()
        _capi.check(_capi.env_provider_info(env, i, _ctypes.byref(name), _ctypes.byref(path), _ctypes.byref(status),
                                            _ctypes.byref(detail)))
        out.append(ProviderInfo(name.value.decode(), _os.fsdecode(path.value or b""),
                                _capi.provider_status_name(status.value).decode(),
                                (detail.value or b"").decode("utf-8", "replace")))
    return out


def has_capability(name):
    """True if a capability is available ("cpu.avx512f", "cpu.avx512_bf16",
    "provider.vulkan", "cuda.weight_prepack", ...). Never fails; unknown names are False."""
    return _capi.has_capability(_capi.env(), str(name).encode()) != 0


def pack_weights(target, b, scales, *, bits, n, k, block_size, zero_points=None):
    """Packs one com.microsoft MatMulNBits node's weights into a device layout on the CPU
    (target "cuda-sm80" or "cuda-sm90"; docs/cuda-weight-layout.md); needs no GPU and no
    CUDA library. b: uint8 [n, ceil(k/block_size), block_size*bits/8]; scales: float32
    [n * n_blocks]; zero_points: None or uint8 as in MatMulNBits. Returns the packed bytes."""
    b = _np.ascontiguousarray(b, dtype=_np.uint8)
    scales = _np.ascontiguousarray(scales, dtype=_np.float32)
    zp = None if zero_points is None else _np.ascontiguousarray(zero_points, dtype=_np.uint8)
    size = _ctypes.c_size_t()
    args = [str(target).encode(), int(bits), int(n), int(k), int(block_size), b.ctypes.data if b.size else None,
            b.nbytes, scales.ctypes.data if scales.size else None, scales.size,
            zp.ctypes.data if zp is not None and zp.size else None, 0 if zp is None else zp.nbytes]
    _capi.check(_capi.pack_weights(*args, None, 0, _ctypes.byref(size)))
    out = _ctypes.create_string_buffer(size.value)
    _capi.check(_capi.pack_weights(*args, out, size.value, _ctypes.byref(size)))
    return out.raw[:size.value]


__all__ = ["Session", "RunOptions", "IoBinding", "ValueInfo", "NodeAssignment", "ProviderInfo", "providers",
           "has_capability", "pack_weights", "Error", "InvalidArgument", "InvalidModel", "Unsupported", "NotFound",
           "RuntimeFailure", "OutOfMemory", "ProviderError", "IOFailure", "InternalError", "Cancelled",
           "__version__", "api_version", "library_path"]
