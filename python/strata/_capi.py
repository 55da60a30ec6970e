"""The C API of libstrata (include/strata/strata.h) through ctypes.

The binding is pure Python on purpose: it has no compiled module tied to one Python
version, and importing it loads libstrata alone, which never needs an accelerator runtime
(providers are dlopened by the library only when a session asks for one).
"""

import ctypes
import os

import numpy as np

# The soname major of libstrata this binding was written for, and the API version.
_SONAME = "libstrata.so.0"
_API_VERSION = 1


def _candidates():
    """(description, path) pairs in search order."""
    env = os.environ.get("STRATA_LIBRARY")
    if env:
        # An explicit choice is honoured or refused, never silently replaced by another copy.
        return [("STRATA_LIBRARY", env)]
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    # Installed layout: <prefix>/lib/python3/dist-packages/strata -> <prefix>/lib.
    libdir = os.path.normpath(os.path.join(here, "..", "..", ".."))
    out.append(("the package's library folder", os.path.join(libdir, _SONAME)))
    out.append(("the dynamic linker's search path", _SONAME))
    return out


def _load():
    tried = []
    for what, path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} ({what}): no such file")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({what}): {e}")
    raise ImportError("strata: cannot load libstrata; tried:\n  " + "\n  ".join(tried) +
                      "\nSet STRATA_LIBRARY to the path of libstrata.so.0, or install the strata archive.")


lib = _load()

c_status_p = ctypes.c_void_p
c_int64_p = ctypes.POINTER(ctypes.c_int64)


def _fn(name, restype, *argtypes, required=True):
    f = getattr(lib, name, None)
    if f is None:
        if required:
            raise ImportError(f"strata: {lib._name} has no {name}: it is older than this binding (API "
                              f"{_API_VERSION}); use the libstrata shipped with it")
        return None
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


P = ctypes.c_void_p
S = ctypes.c_char_p
SZ = ctypes.c_size_t
PP = ctypes.POINTER(ctypes.c_void_p)
SP = ctypes.POINTER(ctypes.c_char_p)

version = _fn("strata_version", S)
api_version = _fn("strata_api_version", ctypes.c_int)
status_get_code = _fn("strata_status_get_code", ctypes.c_int, P)
status_get_message = _fn("strata_status_get_message", S, P)
status_code_name = _fn("strata_status_code_name", S, ctypes.c_int)
status_release = _fn("strata_status_release", None, P)
env_create = _fn("strata_env_create", P, PP)
env_destroy = _fn("strata_env_destroy", None, P)
has_capability = _fn("strata_has_capability", ctypes.c_int, P, S)
pack_weights = _fn("strata_pack_weights", P, S, ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, P, SZ,
                   P, SZ, P, SZ, P, SZ, ctypes.POINTER(SZ))
options_create = _fn("strata_session_options_create", P, PP)
options_destroy = _fn("strata_session_options_destroy", None, P)
options_set_threads = _fn("strata_session_options_set_threads", P, P, ctypes.c_int)
options_set_level = _fn("strata_session_options_set_optimization_level", P, P, ctypes.c_int)
options_set_providers = _fn("strata_session_options_set_providers", P, P, S)
options_add_provider_path = _fn("strata_session_options_add_provider_path", P, P, S)
options_set = _fn("strata_session_options_set", P, P, S, S)
session_create = _fn("strata_session_create", P, P, S, P, PP)
session_create_from_memory = _fn("strata_session_create_from_memory", P, P, ctypes.c_char_p, SZ, P, PP)
session_destroy = _fn("strata_session_destroy", None, P)
session_input_count = _fn("strata_session_input_count", SZ, P)
session_output_count = _fn("strata_session_output_count", SZ, P)
session_input_info = _fn("strata_session_input_info", P, P, SZ, SP, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(SZ),
                         c_int64_p, SZ)
session_output_info = _fn("strata_session_output_info", P, P, SZ, SP, ctypes.POINTER(ctypes.c_int),
                          ctypes.POINTER(SZ), c_int64_p, SZ)
session_input_dim_name = _fn("strata_session_input_dim_name", S, P, SZ, SZ)
session_run_with_options = _fn("strata_session_run_with_options", P, P, P, SP, PP, SZ, SP, PP, SZ)
session_terminate_runs = _fn("strata_session_terminate_runs", None, P)
session_node_count = _fn("strata_session_node_count", SZ, P)
session_node_info = _fn("strata_session_node_info", P, P, SZ, SP, SP, SP)
run_options_create = _fn("strata_run_options_create", P, PP)
run_options_destroy = _fn("strata_run_options_destroy", None, P)
run_options_set = _fn("strata_run_options_set", P, P, S, S)
run_options_terminate = _fn("strata_run_options_terminate", None, P)
tensor_create = _fn("strata_tensor_create", P, ctypes.c_int, c_int64_p, SZ, PP)
tensor_wrap = _fn("strata_tensor_wrap", P, ctypes.c_int, c_int64_p, SZ, P, SZ, PP)
tensor_destroy = _fn("strata_tensor_destroy", None, P)
tensor_dtype = _fn("strata_tensor_dtype", ctypes.c_int, P)
tensor_rank = _fn("strata_tensor_rank", SZ, P)
tensor_dims = _fn("strata_tensor_dims", c_int64_p, P)
tensor_element_count = _fn("strata_tensor_element_count", ctypes.c_int64, P)
tensor_byte_size = _fn("strata_tensor_byte_size", SZ, P)
tensor_data = _fn("strata_tensor_data", P, P)
# Appended after the first release: string feeds need them, nothing else does.
tensor_set_string = _fn("strata_tensor_set_string", P, P, SZ, ctypes.c_char_p, SZ, required=False)
tensor_get_string = _fn("strata_tensor_get_string", P, P, SZ, SP, ctypes.POINTER(SZ), required=False)
# Appended after the first release: sequences, maps and optionals (strata.h "non-tensor values").
value_kind_of = _fn("strata_value_kind_of", ctypes.c_int, P, required=False)
value_elem_dtype = _fn("strata_value_elem_dtype", ctypes.c_int, P, required=False)
value_sequence_length = _fn("strata_value_sequence_length", P, P, ctypes.POINTER(SZ), required=False)
value_sequence_item = _fn("strata_value_sequence_item", P, P, SZ, PP, required=False)
value_map_entries = _fn("strata_value_map_entries", P, P, PP, PP, required=False)
value_create_sequence = _fn("strata_value_create_sequence", P, PP, SZ, ctypes.c_int, PP, required=False)
value_create_map = _fn("strata_value_create_map", P, P, P, PP, required=False)
value_create_none = _fn("strata_value_create_none", P, PP, required=False)
session_input_type = _fn("strata_session_input_type", P, P, SZ, SP, required=False)
session_output_type = _fn("strata_session_output_type", P, P, SZ, SP, required=False)
io_binding_create = _fn("strata_io_binding_create", P, P, PP)
io_binding_destroy = _fn("strata_io_binding_destroy", None, P)
io_binding_bind_input = _fn("strata_io_binding_bind_input", P, P, S, P)
io_binding_bind_output = _fn("strata_io_binding_bind_output", P, P, S, P)
io_binding_clear = _fn("strata_io_binding_clear", None, P)
session_run_binding_with_options = _fn("strata_session_run_binding_with_options", P, P, P, P)
io_binding_outputs_in_place = _fn("strata_io_binding_outputs_in_place", ctypes.c_int, P)
env_discover_providers = _fn("strata_env_discover_providers", P, P, SP, SZ, ctypes.c_int)
env_provider_count = _fn("strata_env_provider_count", SZ, P)
env_provider_info = _fn("strata_env_provider_info", P, P, SZ, SP, SP, ctypes.POINTER(ctypes.c_int), SP)
provider_status_name = _fn("strata_provider_status_name", S, ctypes.c_int)

if api_version() != _API_VERSION:
    raise ImportError(f"strata: {lib._name} implements C API version {api_version()}; this binding needs "
                      f"{_API_VERSION}")


# ---------------------------------------------------------------- errors


class Error(Exception):
    """A strata call failed. `code` is the C API's status name ("INVALID_ARGUMENT", ...)."""

    code = "UNKNOWN"

    def __init__(self, message, code=None):
        super().__init__(message)
        if code is not None:
            self.code = code


class InvalidArgument(Error, ValueError):
    code = "INVALID_ARGUMENT"


class InvalidModel(Error):
    code = "INVALID_MODEL"


class Unsupported(Error):
    code = "UNSUPPORTED"


class NotFound(Error, LookupError):
    code = "NOT_FOUND"


class RuntimeFailure(Error, RuntimeError):
    code = "RUNTIME_ERROR"


class OutOfMemory(Error, MemoryError):
    code = "OUT_OF_MEMORY"


class ProviderError(Error):
    code = "PROVIDER_ERROR"


class IOFailure(Error, OSError):
    code = "IO_ERROR"


class InternalError(Error):
    code = "INTERNAL"


class Cancelled(Error):
    code = "CANCELLED"


for _cls in (Error, InvalidArgument, InvalidModel, Unsupported, NotFound, RuntimeFailure, OutOfMemory, ProviderError,
             IOFailure, InternalError, Cancelled):
    _cls.__module__ = "strata"  # tracebacks say strata.InvalidArgument, where users catch it

_BY_CODE = {1: InvalidArgument, 2: InvalidModel, 3: Unsupported, 4: NotFound, 5: RuntimeFailure, 6: OutOfMemory,
            7: ProviderError, 8: IOFailure, 9: InternalError, 10: Cancelled}


def check(status):
    """Raises the Error subclass for a non-NULL strata_status* (and releases it)."""
    if not status:
        return
    code = status_get_code(status)
    message = (status_get_message(status) or b"").decode("utf-8", "replace")
    status_release(status)
    cls = _BY_CODE.get(code)
    if cls is None:  # a code newer than this binding
        raise Error(message, (status_code_name(code) or b"UNKNOWN").decode())
    raise cls(message)


# ---------------------------------------------------------------- element types

STRING = 8
BFLOAT16 = 16
# strata_dtype -> numpy dtype. bfloat16 has no numpy type: its values travel as their
# uint16 bit patterns (the upper half of the float32 bits).
NUMPY_OF = {1: np.dtype(np.float32), 2: np.dtype(np.uint8), 3: np.dtype(np.int8), 4: np.dtype(np.uint16),
            5: np.dtype(np.int16), 6: np.dtype(np.int32), 7: np.dtype(np.int64), 8: np.dtype(object),
            9: np.dtype(np.bool_), 10: np.dtype(np.float16), 11: np.dtype(np.float64), 12: np.dtype(np.uint32),
            13: np.dtype(np.uint64), 16: np.dtype(np.uint16)}
NAME_OF = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
           9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16"}
# ONNX type names ("tensor(float)") -> strata_dtype.
CODE_OF_ONNX = {"float": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6, "int64": 7, "string": 8,
                "bool": 9, "float16": 10, "double": 11, "uint32": 12, "uint64": 13, "bfloat16": 16}
# strata_value_kind
KIND_TENSOR, KIND_SEQUENCE, KIND_MAP, KIND_NONE = 0, 1, 2, 3
CODE_OF_NUMPY = {np.dtype(t): c for c, t in ((1, np.float32), (2, np.uint8), (3, np.int8), (4, np.uint16),
                                             (5, np.int16), (6, np.int32), (7, np.int64), (9, np.bool_),
                                             (10, np.float16), (11, np.float64), (12, np.uint32), (13, np.uint64))}


# ---------------------------------------------------------------- the process environment

_env = None


def env():
    """The one strata_env of this process (provider discovery state), made on first use."""
    global _env
    if _env is None:
        e = ctypes.c_void_p()
        check(env_create(ctypes.byref(e)))
        _env = e
    return _env
