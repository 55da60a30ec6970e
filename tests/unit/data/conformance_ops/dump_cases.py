#!/usr/bin/python3
"""Dumps single-node ONNX backend test cases for the ops in src/cpu/{quantize,resize,detection,
string_ops,signal,misc_ops}.cc into the plain-text format read by tests/unit/conformance_ops_test.cc.

Usage: /usr/bin/python3 dump_cases.py [data_dir]   (default /usr/share/libonnx-testdata/data/node)
Format, one item per line:
  case <name> / op <op_type> <opset> / attr <name> <kind> <values...> / in|out <dtype> <rank> <dims...> <values...>
  (an omitted input is "in 0 absent"); strings are hex-encoded ("-" for the empty string).
Cases whose dump would exceed 200 kB are skipped.
"""
import glob, os, sys
import onnx
from onnx import numpy_helper

OPS = {'QuantizeLinear', 'DequantizeLinear', 'DynamicQuantizeLinear', 'MatMulInteger', 'ConvInteger',
       'QLinearMatMul', 'QLinearConv', 'Resize', 'NonMaxSuppression', 'RoiAlign', 'StringNormalizer',
       'TfIdfVectorizer', 'DFT', 'STFT', 'HannWindow', 'HammingWindow', 'BlackmanWindow', 'MelWeightMatrix',
       'Det', 'GridSample', 'NegativeLogLikelihoodLoss', 'SoftmaxCrossEntropyLoss'}
data = sys.argv[1] if len(sys.argv) > 1 else '/usr/share/libonnx-testdata/data/node'
here = os.path.dirname(os.path.abspath(__file__))


def hexs(s):
    b = s if isinstance(s, bytes) else s.encode()
    return b.hex() if b else '-'


def val(v):
    if isinstance(v, (bytes, str)):
        return hexs(v)
    if isinstance(v, float):
        return repr(float(v))
    return str(int(v)) if not hasattr(v, 'dtype') or v.dtype.kind in 'iub' else repr(float(v))


def tensor_line(kind, arr, dtype):
    dims = ' '.join(str(d) for d in arr.shape)
    vals = ' '.join(val(v) for v in arr.flatten().tolist()) if arr.dtype.kind != 'O' else \
        ' '.join(hexs(v) for v in arr.flatten().tolist())
    return f'{kind} {dtype} {arr.ndim} {dims} {vals}'.replace('  ', ' ').strip()


for d in sorted(glob.glob(os.path.join(data, 'test_*'))):
    m = onnx.load(os.path.join(d, 'model.onnx'))
    g = m.graph
    if len(g.node) != 1 or g.node[0].op_type not in OPS or g.node[0].domain not in ('', 'ai.onnx'):
        continue
    n = g.node[0]
    opset = [o.version for o in m.opset_import if o.domain in ('', 'ai.onnx')][0]
    lines = [f'case {os.path.basename(d)}', f'op {n.op_type} {opset}']
    for a in n.attribute:
        t = a.type
        if t == onnx.AttributeProto.INT: lines.append(f'attr {a.name} i {a.i}')
        elif t == onnx.AttributeProto.FLOAT: lines.append(f'attr {a.name} f {repr(a.f)}')
        elif t == onnx.AttributeProto.STRING: lines.append(f'attr {a.name} s {hexs(a.s)}')
        elif t == onnx.AttributeProto.INTS: lines.append(f'attr {a.name} is {len(a.ints)} ' + ' '.join(map(str, a.ints)))
        elif t == onnx.AttributeProto.FLOATS: lines.append(f'attr {a.name} fs {len(a.floats)} ' + ' '.join(map(repr, a.floats)))
        elif t == onnx.AttributeProto.STRINGS: lines.append(f'attr {a.name} ss {len(a.strings)} ' + ' '.join(map(hexs, a.strings)))
        else: raise SystemExit(f'{d}: unsupported attribute {a.name}')
    ds = os.path.join(d, 'test_data_set_0')
    graph_inputs = [i.name for i in g.input]
    for name in n.input:
        if name == '':
            lines.append('in 0 absent')
            continue
        k = graph_inputs.index(name)
        t = onnx.TensorProto()
        t.ParseFromString(open(os.path.join(ds, f'input_{k}.pb'), 'rb').read())
        lines.append(tensor_line('in', numpy_helper.to_array(t), t.data_type))
    for k, name in enumerate(g.output):
        t = onnx.TensorProto()
        t.ParseFromString(open(os.path.join(ds, f'output_{k}.pb'), 'rb').read())
        lines.append(tensor_line('out', numpy_helper.to_array(t), t.data_type))
    if sum(len(l) for l in lines) > 200_000:  # keep the repository small: skip the few huge cases
        continue
    with open(os.path.join(here, os.path.basename(d) + '.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
