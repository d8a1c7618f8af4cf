// Runs an ONNX model in ONNX Runtime (onnxruntime-node, installed by tools/onnx-runtime.sh):
//   NODE_PATH=~/.cache/mantissa-ort/node_modules node tools/onnx-run.js model.onnx spec.json out_dir
// spec.json: {"inputs": [{"name", "dtype", "shape", "file"}], "runs": N, "threads": T}; each file
// holds the input's raw little-endian values. Writes out_dir/<output>.bin (raw values) and
// out_dir/result.json: {"outputs": [{"name", "dtype", "shape", "file"}], "latency_ms": median of
// the N timed runs after one warm-up}.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, float16: Uint16Array, int64: BigInt64Array,
  int32: Int32Array, uint8: Uint8Array, bool: Uint8Array,
};

async function main() {
  const [model, specFile, outDir] = process.argv.slice(2);
  const spec = JSON.parse(fs.readFileSync(specFile, 'utf8'));
  const threads = spec.threads || 1;
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
  });
  const feeds = {};
  for (const i of spec.inputs) {
    const Arr = ARRAYS[i.dtype];
    if (!Arr) throw new Error(`input ${i.name}: dtype ${i.dtype} is not supported by onnxruntime-node`);
    const buf = fs.readFileSync(i.file);
    const data = new Arr(buf.buffer, buf.byteOffset, buf.byteLength / Arr.BYTES_PER_ELEMENT);
    feeds[i.name] = new ort.Tensor(i.dtype, data, i.shape);
  }
  let results = await session.run(feeds);  // warm-up
  const times = [];
  for (let r = 0; r < (spec.runs || 0); ++r) {
    const t0 = process.hrtime.bigint();
    results = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  fs.mkdirSync(outDir, {recursive: true});
  const outputs = [];
  for (const name of session.outputNames) {
    const t = results[name];
    const file = path.join(outDir, name + '.bin');
    const d = t.data;
    fs.writeFileSync(file, Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    outputs.push({name, dtype: t.type, shape: t.dims, file});
  }
  const latency = times.length ? times[Math.floor(times.length / 2)] : null;
  fs.writeFileSync(path.join(outDir, 'result.json'), JSON.stringify({outputs, latency_ms: latency}));
}

main().catch((e) => {
  console.error(`onnx-run: ${e.message || e}`);
  process.exit(1);
});
