"""numpy arrays <-> strata_tensor handles."""

import ctypes

import numpy as np

from . import _capi as C


class _Owned:
    """Keeps a strata_tensor alive for as long as a numpy array views its memory."""

    def __init__(self, handle, dtype, shape):
        self.handle = handle
        self.__array_interface__ = {"data": (C.tensor_data(handle), False), "shape": shape,
                                    "typestr": dtype.str, "version": 3}

    def __del__(self):
        C.tensor_destroy(self.handle)


_DIMS = [ctypes.c_int64 * max(n, 1) for n in range(65)]


def _dims(shape):
    if len(shape) > 64:
        raise C.InvalidArgument(f"rank {len(shape)} is above 64")
    return _DIMS[len(shape)](*shape)


def to_tensor(name, value, expected_code):
    """A strata_tensor for feed `name`, and the object that must stay alive while it is used.

    Numeric arrays are wrapped without a copy when they are C-contiguous in native byte
    order; anything else is copied once. Python scalars and lists take the model input's
    element type (`expected_code`); numpy arrays keep theirs, so a mismatch is refused by
    the library with a message naming the input.
    """
    if type(value) is np.ndarray and value.flags.c_contiguous:  # the common case, kept short
        code = C.CODE_OF_NUMPY.get(value.dtype)  # native byte order only: '>f4' is not a key
        if code is not None and (code != 4 or expected_code != C.BFLOAT16):
            handle = ctypes.c_void_p()
            C.check(C.tensor_wrap(code, _dims(value.shape), value.ndim, value.ctypes.data if value.size else None,
                                  value.nbytes, ctypes.byref(handle)))
            return handle, value
    if not isinstance(value, np.ndarray):
        dtype = C.NUMPY_OF.get(expected_code) if expected_code not in (None, C.STRING) else None
        try:
            value = np.asarray(value, dtype=dtype)
        except (TypeError, ValueError) as e:
            raise C.InvalidArgument(f"input '{name}': cannot make an array of "
                                    f"{C.NAME_OF.get(expected_code, 'its type')} from {type(value).__name__}: {e}")
    if value.dtype.kind in "USO":
        return _string_tensor(name, value), None
    code = C.CODE_OF_NUMPY.get(value.dtype.newbyteorder("="))
    if code is None:
        raise C.Unsupported(f"input '{name}': numpy dtype {value.dtype} has no strata element type")
    if code == 4 and expected_code == C.BFLOAT16:
        code = C.BFLOAT16  # bfloat16 inputs are given as their uint16 bit patterns
    if not value.dtype.isnative or not value.flags.c_contiguous:
        value = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("="))
    handle = ctypes.c_void_p()
    ptr = value.ctypes.data if value.size else None
    C.check(C.tensor_wrap(code, _dims(value.shape), value.ndim, ptr, value.nbytes, ctypes.byref(handle)))
    return handle, value


def _string_tensor(name, value):
    if C.tensor_set_string is None:
        raise C.Unsupported(f"input '{name}': this libstrata cannot take string inputs (no strata_tensor_set_string)")
    handle = ctypes.c_void_p()
    C.check(C.tensor_create(C.STRING, _dims(value.shape), value.ndim, ctypes.byref(handle)))
    try:
        for i, s in enumerate(value.reshape(-1)):
            if isinstance(s, str):
                b = s.encode("utf-8")
            elif isinstance(s, (bytes, np.bytes_)):
                b = bytes(s)
            else:
                raise C.InvalidArgument(f"input '{name}': element {i} is {type(s).__name__}, not str or bytes")
            C.check(C.tensor_set_string(handle, i, b, len(b)))
    except BaseException:
        C.tensor_destroy(handle)
        raise
    return handle


def from_tensor(handle):
    """A numpy array for an output tensor; takes ownership of `handle`.

    Numeric outputs are returned without a copy: the array owns the tensor (the library
    hands out outputs that share memory with nothing else). Strings become an object array
    of str, or of bytes for a value that is not valid UTF-8, so no byte is lost.
    """
    code = C.tensor_dtype(handle)
    rank = C.tensor_rank(handle)
    dims = C.tensor_dims(handle)
    shape = tuple(dims[i] for i in range(rank))
    if code == C.STRING:
        try:
            if C.tensor_get_string is None:
                raise C.Unsupported("this libstrata cannot return string outputs whole (no strata_tensor_get_string)")
            n = C.tensor_element_count(handle)
            out = np.empty(n, dtype=object)
            data, size = ctypes.c_char_p(), ctypes.c_size_t()
            for i in range(n):
                C.check(C.tensor_get_string(handle, i, ctypes.byref(data), ctypes.byref(size)))
                raw = ctypes.string_at(data, size.value)
                try:
                    out[i] = raw.decode("utf-8")
                except UnicodeDecodeError:
                    out[i] = raw
            return out.reshape(shape)
        finally:
            C.tensor_destroy(handle)
    dtype = C.NUMPY_OF.get(code)
    if dtype is None:
        C.tensor_destroy(handle)
        raise C.Unsupported(f"output element type {code} is unknown to this binding")
    if C.tensor_byte_size(handle) == 0:
        C.tensor_destroy(handle)
        return np.empty(shape, dtype=dtype)
    return np.asarray(_Owned(handle, dtype, shape))
