#!/usr/bin/python3
"""Probes strata's kernels with extreme attribute values, for the UBSan/ASan fuzz build.

For every version of every default-domain op, each FLOAT/FLOATS (mode `float`) or INT/INTS
(mode `int`) attribute alone is set to extreme values on one-node models whose inputs are
float, int32, int64 or uint8 tensors of rank 1 ([3]) or 4 ([1, 2, 3, 4]); with `--any-dtype`
input 0 takes the probe dtype even where the op's type constraint does not allow it (strata
accepts some such models). Output types come from python3-onnx's shape inference, run in a
forked child with a 2 GiB / 5 s limit (it crashes or balloons on some of these models).
Each model is then replayed through build/fuzz/fuzz/strata_fuzz_run (session creation and one
run on hostile input values), and every one that fails is listed with its first sanitizer line.

  /usr/bin/python3 tests/data/hostile/probe_kernel_attributes.py OUTDIR float [--any-dtype]
  /usr/bin/python3 tests/data/hostile/probe_kernel_attributes.py OUTDIR int
  (--ops A,B restricts the probe to those op types)

7 Dec 2026: float 4,140 models + 1,395 with --any-dtype, int 8,776 (about 10, 3 and 25
minutes to replay on 2 vCPUs); finds: Shrink and opset<11 Pad on integer tensors, DepthToSpace
/ SpaceToDepth blocksizes (docs/hardening.md).
"""
import os, resource, signal, subprocess, sys
import onnx
from onnx import helper as h, TensorProto as T, defs

out, mode = sys.argv[1], sys.argv[2]
any_dtype = "--any-dtype" in sys.argv
only = set(sys.argv[sys.argv.index("--ops") + 1].split(",")) if "--ops" in sys.argv else None
os.makedirs(out, exist_ok=True)
FVALS = [1e30, -1e30, 3.0e38, -3.0e38, float("nan"), float("inf"), float("-inf"), 1e-45, 0.0, -1.0]
IVALS = [-(2**63), -1, 2**31, 2**63 - 1]
PREF = [T.FLOAT, T.INT32, T.INT64, T.UINT8, T.INT8, T.DOUBLE, T.FLOAT16, T.BOOL]
NAME = {T.FLOAT: "float", T.INT32: "int32", T.INT64: "int64", T.UINT8: "uint8", T.INT8: "int8", T.DOUBLE: "double",
        T.FLOAT16: "float16", T.BOOL: "bool", T.STRING: "string", T.UINT16: "uint16", T.INT16: "int16",
        T.UINT32: "uint32", T.UINT64: "uint64"}
NAME = {k: f"tensor({v})" for k, v in NAME.items()}
REV = {v: k for k, v in NAME.items()}
A = defs.OpSchema.AttrType
if mode == "float":
    kinds, vals, dtypes = (A.FLOAT, A.FLOATS), FVALS, (T.INT32, T.UINT8, T.INT64) if any_dtype else (T.FLOAT, T.INT32, T.UINT8)
else:
    kinds, vals, dtypes = (A.INT, A.INTS), IVALS, (T.FLOAT, T.INT64)


def with_output_types(m, path):
    """Writes m, then (in a child that may crash) m with inferred output types."""
    open(path, "wb").write(m.SerializeToString())
    pid = os.fork()
    if pid == 0:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        signal.alarm(5)
        try:
            inf = onnx.shape_inference.infer_shapes(m)
            known = {v.name: v for v in inf.graph.value_info}
            for o in m.graph.output:
                if o.name in known and known[o.name].type.tensor_type.elem_type:
                    o.type.CopyFrom(known[o.name].type)
            open(path, "wb").write(m.SerializeToString())
        except Exception:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


paths = []
for s in defs.get_all_schemas_with_history():
    if s.domain != "" or s.deprecated or (only and s.name not in only):
        continue
    attrs = [(a, v.type) for a, v in s.attributes.items() if v.type in kinds]
    if not attrs:
        continue
    tc = {c.type_param_str: c.allowed_type_strs for c in s.type_constraints}
    nin = max(s.min_input, min(len(s.inputs), 3))
    for probe in dtypes:
        dts = []
        for j in range(nin):
            fp = s.inputs[min(j, len(s.inputs) - 1)]
            allowed = tc.get(fp.typeStr, [fp.typeStr])
            if (any_dtype and j == 0) or NAME[probe] in allowed:
                dts.append(probe)
                continue
            dts.append(next((p for p in PREF if NAME[p] in allowed), REV.get(allowed[0], T.FLOAT)))
        if (nin and probe not in dts) or (not nin and probe != dtypes[0]):
            continue
        for shape in ([3], [1, 2, 3, 4]) if not any_dtype else ([3],):
            for attr, ty in attrs:
                for v in vals:
                    for k in ((1,) if ty in (A.FLOAT, A.INT) else (1, 2, 4)):
                        value = v if ty in (A.FLOAT, A.INT) else [v] * k
                        ins = [h.make_tensor_value_info(f"i{j}", dts[j], shape if j == 0 else None) for j in range(nin)]
                        nout = max(s.min_output, 1)
                        outs = [h.make_tensor_value_info(f"o{j}", dts[0] if dts else T.FLOAT, shape) for j in range(nout)]
                        node = h.make_node(s.name, [i.name for i in ins], [o.name for o in outs], **{attr: value})
                        m = h.make_model(h.make_graph([node], "g", ins, outs),
                                         opset_imports=[h.make_opsetid("", s.since_version)])
                        m.ir_version = 8
                        path = os.path.join(out, f"{s.name}-{s.since_version}-r{len(shape)}-{T.DataType.Name(probe)}-"
                                                 f"{attr}-{len(paths)}.onnx")
                        with_output_types(m, path)
                        paths.append(path)
print(len(paths), "models; replaying")

fuzz = os.path.join(os.path.dirname(__file__), "../../../build/fuzz/fuzz/strata_fuzz_run")
env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1",
           UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
failed = 0
for p in paths:
    try:
        r = subprocess.run([fuzz, p], env=env, capture_output=True, text=True, timeout=30)
        rc, log = r.returncode, r.stderr
    except subprocess.TimeoutExpired:
        rc, log = "timeout", ""
    if rc != 0:
        failed += 1
        first = next((l for l in log.splitlines() if "runtime error" in l or "ERROR: AddressSanitizer" in l), "")
        print(f"FAIL {rc} {p}\n    {first}")
print(failed, "failing models")
