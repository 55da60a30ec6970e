#!/usr/bin/python3
"""Probes libonnx's shape inference for crashes on extreme integer attributes.

For every default-domain op, every INT and INTS attribute is set to extreme values
(-2^63, -2^31-1, -1025, -5, -1, 3, 7, 2^31, 2^32-1, 2^63-1) on float inputs of rank 0, 1
and 3, and python3-onnx's infer_shapes runs in a forked child. A child killed by a signal is
a crash: its model is written to /tmp/axcrash_<op>_<rank>_<attr>_<value>.onnx, to be replayed
through `strata run MODEL --random` (docs/hardening.md, items 7 and 8). Takes ~10 minutes.

Usage: /usr/bin/python3 tests/data/hostile/probe_attributes.py
"""
import onnx, os, sys, itertools
from onnx import helper as h, TensorProto as T, defs
vals = [-(2**63), -(2**31)-1, -1025, -5, -1, 3, 7, 2**31, 2**32-1, 2**63-1]
ranks = [0, 1, 3]
crashes = []
count = 0
for s in defs.get_all_schemas():
    if s.domain not in ("",) or s.deprecated: continue
    int_attrs = [a for a, v in s.attributes.items() if v.type == defs.OpSchema.AttrType.INT and True]
    ints_attrs = [a for a, v in s.attributes.items() if v.type == defs.OpSchema.AttrType.INTS ]
    if not int_attrs and not ints_attrs: continue
    nin = max(s.min_input, 1)
    nout = max(s.min_output, 1)
    for r in ranks:
        for attr in int_attrs + ints_attrs:
            for v in vals:
                kw = {attr: (v if attr in int_attrs else [v])}
                ins = [h.make_tensor_value_info(f"i{j}", T.FLOAT, [2]*r) for j in range(nin)]
                outs = [h.make_tensor_value_info(f"o{j}", T.FLOAT, [2]) for j in range(max(nout, s.max_output if s.max_output < 5 else 1))]
                node = h.make_node(s.name, [f"i{j}" for j in range(nin)], [o.name for o in outs], **kw)
                g = h.make_graph([node], "g", ins, outs)
                m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]); m.ir_version = 8
                count += 1
                pid = os.fork()
                if pid == 0:
                    try: onnx.shape_inference.infer_shapes(m)
                    except Exception: pass
                    os._exit(0)
                _, st = os.waitpid(pid, 0)
                if os.WIFSIGNALED(st):
                    crashes.append((s.name, r, attr, v, os.WTERMSIG(st)))
                    open(f"/tmp/axcrash_{s.name}_{r}_{attr}_{v}.onnx", "wb").write(m.SerializeToString())
print(count, "models;", len(crashes), "crashes")
for c in crashes: print(c)
