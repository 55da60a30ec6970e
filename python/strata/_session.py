"""Session, RunOptions and IoBinding over the C API."""

import ctypes
import os
import weakref
from collections import namedtuple

import numpy as np

from . import _capi as C
from ._tensor import to_tensor
from ._values import from_value, parse_type, to_value

ValueInfo = namedtuple("ValueInfo", "name dtype shape type", defaults=("unknown",))
ValueInfo.__doc__ = """A model input or output: name, element type name ("float32", "string",
"bfloat16", ...; a sequence's or map's element values), shape, a tuple whose unknown dims are
the symbolic name (str) or None, and the ONNX type as ONNX Runtime writes it ("tensor(float)",
"seq(map(int64,tensor(float)))", "optional(tensor(int64))", ...)."""

NodeAssignment = namedtuple("NodeAssignment", "name op_type provider")


def _text(v, what):
    if isinstance(v, bytes):
        return v
    if isinstance(v, (str, os.PathLike)):
        return os.fsencode(v)
    raise C.InvalidArgument(f"{what} must be a str, got {type(v).__name__}")


class RunOptions:
    """Per-run limits: `timeout_ms` (a deadline of the runs given these options) and
    terminate() (ends exactly those runs in progress with strata.Cancelled). One object may
    serve many runs at once, on any threads and sessions."""

    def __init__(self, timeout_ms=None, **options):
        h = ctypes.c_void_p()
        C.check(C.run_options_create(ctypes.byref(h)))
        self._h = h
        if timeout_ms is not None:
            options["timeout_ms"] = timeout_ms
        for key, value in options.items():
            self.set(key, value)

    def set(self, key, value):
        """Sets a run option by its C API key ("timeout_ms"); an unknown key or a bad value is
        refused with strata.InvalidArgument naming it."""
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise C.InvalidArgument(f"run option '{key}': value must be an int or a str, got {type(value).__name__}")
        C.check(C.run_options_set(self._h, _text(key, "a run option key"), str(value).encode()))

    def terminate(self):
        """Ends the runs given these options that are in progress now (safe from any thread)."""
        C.run_options_terminate(self._h)

    def __del__(self):
        h = getattr(self, "_h", None)
        if h:
            C.run_options_destroy(h)


class Session:
    """A loaded, checked, optimized and planned model.

    Session(model, threads=0, providers="cpu", optimization_level=99, options=None,
            provider_paths=())

    model: a path, or the model's bytes. threads: intra-op threads (0: every online CPU).
    providers: "cpu" (the default; never loads a plugin), "auto" (the best usable provider,
    falling back to the CPU), or a provider name or list of names such as ["cuda", "cpu"]: a
    named provider that cannot be used fails with strata.ProviderError and its load-report
    line. options: the C API's key/value session options ({"precision": "bf16"},
    {"run_timeout_ms": 100}, {"cuda.precision": "fp16"}, ...).

    run() may be called from several threads at once; the GIL is released while the model
    runs.
    """

    def __init__(self, model, threads=0, providers="cpu", optimization_level=None, options=None, provider_paths=()):
        self._h = None
        self._bindings = weakref.WeakSet()
        o = ctypes.c_void_p()
        C.check(C.options_create(ctypes.byref(o)))
        try:
            if isinstance(threads, bool) or not isinstance(threads, int):
                raise C.InvalidArgument(f"threads must be an int, got {type(threads).__name__}")
            C.check(C.options_set_threads(o, threads))
            if optimization_level is not None:
                if isinstance(optimization_level, bool) or not isinstance(optimization_level, int):
                    raise C.InvalidArgument(f"optimization_level must be an int, got "
                                            f"{type(optimization_level).__name__}")
                C.check(C.options_set_level(o, optimization_level))
            if not isinstance(providers, str):
                providers = ",".join(providers)
            C.check(C.options_set_providers(o, providers.encode()))
            for p in ([provider_paths] if isinstance(provider_paths, (str, os.PathLike)) else provider_paths):
                C.check(C.options_add_provider_path(o, _text(p, "a provider path")))
            for key, value in (options or {}).items():
                if isinstance(value, bool):
                    value = int(value)
                C.check(C.options_set(o, _text(key, "an option key"), str(value).encode()))
            h = ctypes.c_void_p()
            if isinstance(model, (bytes, bytearray, memoryview)):
                data = bytes(model)
                C.check(C.session_create_from_memory(C.env(), data, len(data), o, ctypes.byref(h)))
            else:
                C.check(C.session_create(C.env(), _text(model, "model"), o, ctypes.byref(h)))
            self._h = h
        finally:
            C.options_destroy(o)
        self.inputs = self._infos(C.session_input_count, C.session_input_info, True)
        self.outputs = self._infos(C.session_output_count, C.session_output_info, False)
        self._types = {info.name: parse_type(info.type) for info in self.inputs}  # input name -> type
        names = [o.name.encode() for o in self.outputs]
        self._all_outputs = (len(names), (ctypes.c_char_p * max(len(names), 1))(*names))  # for run(None, ...)
        self._codes = {}  # (True for inputs, name) -> strata_dtype
        for is_input, infos, fn in ((True, self.inputs, C.session_input_info),
                                    (False, self.outputs, C.session_output_info)):
            for i, info in enumerate(infos):
                code = ctypes.c_int()
                C.check(fn(self._h, i, None, ctypes.byref(code), None, None, 0))
                self._codes[(is_input, info.name)] = code.value

    def _infos(self, count_fn, info_fn, inputs):
        out = []
        for i in range(count_fn(self._h)):
            name, code, rank = ctypes.c_char_p(), ctypes.c_int(), ctypes.c_size_t()
            C.check(info_fn(self._h, i, ctypes.byref(name), ctypes.byref(code), ctypes.byref(rank), None, 0))
            dims = (ctypes.c_int64 * max(rank.value, 1))()
            C.check(info_fn(self._h, i, None, None, ctypes.byref(rank), dims, rank.value))
            shape = []
            for a in range(rank.value):
                if dims[a] >= 0:
                    shape.append(dims[a])
                else:
                    sym = C.session_input_dim_name(self._h, i, a).decode() if inputs else ""
                    shape.append(sym or None)
            type_fn = C.session_input_type if inputs else C.session_output_type
            onnx_type = "unknown"
            if type_fn is not None:
                t = ctypes.c_char_p()
                C.check(type_fn(self._h, i, ctypes.byref(t)))
                onnx_type = t.value.decode()
            out.append(ValueInfo(name.value.decode("utf-8", "replace"), C.NAME_OF.get(code.value, str(code.value)),
                                 tuple(shape), onnx_type))
        return out

    def _handle(self):
        if not self._h:
            raise C.InvalidArgument("the session is closed")
        return self._h

    def run(self, output_names, feeds, run_options=None):
        """Runs the model. feeds: {input name: array}. output_names: a list of output names,
        or None for every output in model order. Returns a list of numpy arrays, one per
        output asked for. Sequences are lists, maps dicts and empty optionals None, both ways
        (a classifier's ZipMap output is a list of {label: probability} dicts). Errors (an unknown or missing input, a wrong element type or shape,
        a kernel failure, a deadline) raise the strata.Error subclass of their status."""
        h = self._handle()
        if not isinstance(feeds, dict):
            raise C.InvalidArgument(f"feeds must be a dict of input name -> array, got {type(feeds).__name__}")
        if output_names is None:
            n_out, out_names = self._all_outputs
        else:
            names = [_text(k, "an output name") for k in output_names]
            n_out = len(names)
            out_names = (ctypes.c_char_p * max(n_out, 1))(*names)
        in_handles, keep = [], []
        try:
            for name, value in feeds.items():
                if not isinstance(name, str):
                    raise C.InvalidArgument(f"feed names must be str, got {type(name).__name__}")
                typ = self._types.get(name, ("unknown",))
                if typ[0] == "tensor" or (typ[0] == "unknown" and not isinstance(value, (dict, type(None)))):
                    t, alive = to_tensor(name, value, self._codes.get((True, name)))
                    keep.append(alive)
                else:
                    t = to_value(name, value, typ, keep)
                in_handles.append(t)
            n_in = len(in_handles)
            in_names = (ctypes.c_char_p * max(n_in, 1))(*[k.encode() for k in feeds])
            ins = (ctypes.c_void_p * max(n_in, 1))(*[t.value for t in in_handles])
            outs = (ctypes.c_void_p * max(n_out, 1))()
            C.check(C.session_run_with_options(h, run_options._h if run_options is not None else None, in_names, ins,
                                               n_in, out_names, outs, n_out))
        finally:
            for t in in_handles:
                C.tensor_destroy(t)
        result = []
        try:
            for j in range(n_out):
                result.append(from_value(outs[j]))
                outs[j] = None
        finally:
            for j in range(n_out):
                if outs[j]:
                    C.tensor_destroy(outs[j])
        return result

    def terminate_runs(self):
        """Ends every run of this session in progress now (each raises strata.Cancelled);
        later runs are unaffected. Safe from any thread."""
        if self._h:
            C.session_terminate_runs(self._h)

    def node_providers(self):
        """Which provider runs each node after partitioning: a list of NodeAssignment."""
        h = self._handle()
        out = []
        for i in range(C.session_node_count(h)):
            n, op, p = ctypes.c_char_p(), ctypes.c_char_p(), ctypes.c_char_p()
            C.check(C.session_node_info(h, i, ctypes.byref(n), ctypes.byref(op), ctypes.byref(p)))
            out.append(NodeAssignment(n.value.decode("utf-8", "replace"), op.value.decode(), p.value.decode()))
        return out

    def close(self):
        """Frees the session now, and its io bindings (no run may be in progress). Later
        calls raise strata.InvalidArgument."""
        for b in list(self._bindings):
            b._destroy()
        h, self._h = self._h, None
        if h:
            C.session_destroy(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_h", None):
            self.close()


class IoBinding:
    """Caller-owned numpy buffers bound to a session's inputs and outputs, for repeated
    runs that reuse all per-run state (docs/hardening.md, "Real-time use"). Inputs are read
    in place on every run, so changing a bound array's contents changes the next run's
    input; outputs are written into the bound arrays. Used by one thread at a time."""

    def __init__(self, session):
        h = ctypes.c_void_p()
        C.check(C.io_binding_create(session._handle(), ctypes.byref(h)))
        self._h = h
        self._session = session  # the session must outlive the binding
        self._arrays = {}
        session._bindings.add(self)

    def _handle(self):
        if not self._h:
            raise C.InvalidArgument("the io binding is closed (its session was closed)")
        return self._h

    def _destroy(self):
        h, self._h = self._h, None
        if h:
            C.io_binding_destroy(h)
        self._arrays.clear()

    def _wrap(self, kind, name, array, writable):
        if not isinstance(array, np.ndarray):
            raise C.InvalidArgument(f"{kind} '{name}': bind a numpy array, got {type(array).__name__}")
        if not array.flags.c_contiguous or not array.dtype.isnative:
            raise C.InvalidArgument(f"{kind} '{name}': a bound array must be C-contiguous in native byte order "
                                    "(it is used in place, so it is not copied)")
        if writable and not array.flags.writeable:
            raise C.InvalidArgument(f"output '{name}': the bound array is read-only")
        if array.dtype.kind in "USO":
            raise C.Unsupported(f"{kind} '{name}': string tensors cannot be bound; use Session.run")
        return to_tensor(name, array, self._session._codes.get((kind == "input", name)))[0]

    def bind_input(self, name, array):
        t = self._wrap("input", name, array, False)
        try:
            C.check(C.io_binding_bind_input(self._handle(), name.encode(), t))
        finally:
            C.tensor_destroy(t)
        self._arrays[("in", name)] = array

    def bind_output(self, name, array):
        t = self._wrap("output", name, array, True)
        try:
            C.check(C.io_binding_bind_output(self._handle(), name.encode(), t))
        finally:
            C.tensor_destroy(t)
        self._arrays[("out", name)] = array

    def clear(self):
        C.io_binding_clear(self._handle())
        self._arrays.clear()

    def run(self, run_options=None):
        """Runs the session on the bound arrays."""
        C.check(C.session_run_binding_with_options(self._session._handle(), self._handle(),
                                                   run_options._h if run_options is not None else None))

    @property
    def outputs_in_place(self):
        """True if the last run wrote every bound output straight into its array (no copy)."""
        return bool(self._h) and C.io_binding_outputs_in_place(self._h) != 0

    def __del__(self):
        if getattr(self, "_h", None):
            self._destroy()
