// Runs one model once in ONNX Runtime (onnxruntime-node 1.30, CPU) for the parity scripts that
// need outputs ort_bench cannot save (int64 and string tensors: classifier labels).
//
// usage: node ort_run.js REQUEST.json RESPONSE.json
//   REQUEST  {"model": PATH, "threads": N, "feeds": {NAME: {"type": T, "dims": [...], "data": D}}}
//            T: float32, float64, int64, int32, bool, string; D: base64 of the little-endian
//            bytes (numbers, bools as 1 byte), or a list of str for strings.
//   RESPONSE {NAME: {"type": T, "dims": [...], "data": D}} in the same encoding, or
//            {"error": MESSAGE} (exit status 0 either way: an ORT refusal is a result).
// The package comes from bench/ort (bash bench/compare-ort/run.sh --quick installs it).
'use strict';
const fs = require('fs');
const path = require('path');

const ortDir = process.env.STRATA_ORT_NODE || path.join(__dirname, '..', 'ort', 'node_modules', 'onnxruntime-node');
const ort = require(ortDir);

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array, bool: Uint8Array,
  uint8: Uint8Array, int8: Int8Array,
};

function decode(spec) {
  if (spec.type === 'string') return new ort.Tensor('string', spec.data, spec.dims);
  const bytes = Buffer.from(spec.data, 'base64');
  const A = ARRAYS[spec.type];
  const copy = new Uint8Array(bytes);  // aligned
  let arr = new A(copy.buffer, 0, copy.length / A.BYTES_PER_ELEMENT);
  if (spec.type === 'bool') arr = Uint8Array.from(arr);
  return new ort.Tensor(spec.type, arr, spec.dims);
}

function encode(t) {
  if (t.type === 'string') return {type: 'string', dims: t.dims, data: Array.from(t.data)};
  const d = t.data;
  return {type: t.type, dims: t.dims, data: Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString('base64')};
}

(async () => {
  const req = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  let out;
  try {
    const opts = {intraOpNumThreads: req.threads || 1, interOpNumThreads: 1, graphOptimizationLevel: 'all'};
    const session = await ort.InferenceSession.create(req.model, opts);
    const feeds = {};
    for (const [name, spec] of Object.entries(req.feeds)) feeds[name] = decode(spec);
    const result = await session.run(feeds);
    out = {};
    for (const [name, t] of Object.entries(result)) out[name] = encode(t);
  } catch (e) {
    out = {error: String(e && e.message ? e.message : e)};
  }
  fs.writeFileSync(process.argv[3], JSON.stringify(out));
})();
