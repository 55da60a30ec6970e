"""Sequences, maps and optionals <-> strata handles: Python lists, dicts and None.

A model input or output typed seq(...) is a list, map(...) a dict, and an optional without
a value None; ZipMap's seq(map(int64,tensor(float))) output comes back as a list of
{label: probability} dicts, as ONNX Runtime's Python API returns it.
"""

import ctypes

import numpy as np

from . import _capi as C
from ._tensor import from_tensor, to_tensor


def parse_type(t):
    """An ONNX type string ("seq(map(int64,tensor(float)))") as nested tuples: ("tensor", code),
    ("seq", inner), ("map", key code, inner), ("optional", inner) or ("unknown",)."""
    if t.startswith("tensor(") and t.endswith(")"):
        return ("tensor", C.CODE_OF_ONNX.get(t[7:-1]))
    if t.startswith("seq(") and t.endswith(")"):
        return ("seq", parse_type(t[4:-1]))
    if t.startswith("optional(") and t.endswith(")"):
        return ("optional", parse_type(t[9:-1]))
    if t.startswith("map(") and t.endswith(")"):
        key, _, value = t[4:-1].partition(",")
        return ("map", C.CODE_OF_ONNX.get(key), parse_type(value))
    return ("unknown",)


def _need(fn, what):
    if fn is None:
        raise C.Unsupported(f"this libstrata cannot take or return {what} (it predates strata_value_*)")
    return fn


def _new(fn, *args):
    h = ctypes.c_void_p()
    C.check(fn(*args, ctypes.byref(h)))
    return h


def to_value(name, value, typ, keep):
    """A strata handle for feed `name` of model type `typ` (parse_type's form). Arrays whose
    memory the handle uses are appended to `keep`, which must outlive the run."""
    kind = typ[0]
    if kind == "optional":
        if value is None:
            return _new(_need(C.value_create_none, "optionals"))
        return to_value(name, value, typ[1], keep)
    if value is None:
        raise C.InvalidArgument(f"input '{name}' is None, but its type is not optional")
    if kind == "seq" or (kind == "unknown" and isinstance(value, (list, tuple)) and value and
                         isinstance(value[0], dict)):
        return _sequence(name, value, typ[1] if kind == "seq" else ("map", None, ("unknown",)), keep)
    if kind == "map" or (kind == "unknown" and isinstance(value, dict)):
        return _map(name, value, typ if kind == "map" else ("map", None, ("unknown",)), keep)
    if isinstance(value, dict):
        raise C.InvalidArgument(f"input '{name}' is a tensor; a dict feeds only a map input")
    handle, alive = to_tensor(name, value, typ[1] if kind == "tensor" else None)
    keep.append(alive)
    return handle


def _sequence(name, value, item_type, keep):
    create = _need(C.value_create_sequence, "sequences")
    if not isinstance(value, (list, tuple)):
        raise C.InvalidArgument(f"input '{name}' is a sequence: feed a list, not {type(value).__name__}")
    items = []
    try:
        for i, item in enumerate(value):
            if item is None:
                raise C.InvalidArgument(f"input '{name}': sequence item {i} is None")
            items.append(to_value(name, item, item_type, keep))
        code = item_type[1] if item_type[0] == "tensor" and item_type[1] is not None else 0
        arr = (ctypes.c_void_p * max(len(items), 1))(*[h.value for h in items])
        return _new(create, arr, len(items), code)
    finally:
        for h in items:
            C.tensor_destroy(h)


def _map(name, value, typ, keep):
    create = _need(C.value_create_map, "maps")
    if not isinstance(value, dict):
        raise C.InvalidArgument(f"input '{name}' is a map: feed a dict, not {type(value).__name__}")
    keys = list(value)
    key_code = typ[1]
    if key_code is None:
        key_code = C.STRING if keys and all(isinstance(k, str) for k in keys) else 7
    if key_code == C.STRING:
        bad = [k for k in keys if not isinstance(k, (str, bytes))]
    else:
        bad = [k for k in keys if isinstance(k, bool) or not isinstance(k, int)]
    if bad:
        raise C.InvalidArgument(f"input '{name}': map key {bad[0]!r} is not "
                                f"{'a str' if key_code == C.STRING else 'an int'}")
    value_code = typ[2][1] if typ[2][0] == "tensor" else None
    k = v = None
    try:
        try:
            key_array = np.array(keys, dtype=object if key_code == C.STRING else np.int64)  # typed even when empty
        except (OverflowError, TypeError, ValueError) as e:
            raise C.InvalidArgument(f"input '{name}': the map keys do not fit int64: {e}") from None
        k, k_alive = to_tensor(name, key_array, key_code)
        v, v_alive = to_tensor(name, list(value.values()), value_code)
        keep.extend((k_alive, v_alive))
        return _new(create, k, v)
    finally:
        for h in (k, v):
            if h:
                C.tensor_destroy(h)


def from_value(handle):
    """A Python value for an output handle (taking ownership of it): a numpy array for a
    tensor, a list for a sequence, a dict for a map, None for an empty optional."""
    kind = C.value_kind_of(handle) if C.value_kind_of is not None else C.KIND_TENSOR
    if kind == C.KIND_TENSOR:
        return from_tensor(handle)
    try:
        if kind == C.KIND_NONE:
            return None
        if kind == C.KIND_SEQUENCE:
            n = ctypes.c_size_t()
            C.check(C.value_sequence_length(handle, ctypes.byref(n)))
            return [from_value(_new(C.value_sequence_item, handle, i)) for i in range(n.value)]
        if kind == C.KIND_MAP:
            k, v = ctypes.c_void_p(), ctypes.c_void_p()
            C.check(C.value_map_entries(handle, ctypes.byref(k), ctypes.byref(v)))
            keys, values = from_tensor(k), from_tensor(v)
            return dict(zip(keys.tolist(), values.tolist()))
        raise C.Unsupported(f"output value kind {kind} is unknown to this binding")
    finally:
        C.tensor_destroy(handle)
