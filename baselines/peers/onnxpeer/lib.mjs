// What the ONNX Runtime peer's commands (bench.mjs, profile.mjs) share:
// loading onnxruntime-node and the exported models, session options and
// the accuracy check. What every Node peer shares (timing, Go benchmark
// format, environment) is ../node/harness.mjs.

import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { relErr } from "../node/harness.mjs";

export { relErr };

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, "..", "..", "..");
// The manifest format export.py writes.
export const MANIFEST_FORMAT = "zbench-onnxpeer/1";

/**
 * MODEL_BENCHMARKS are the names of export.py's points (the PyTorch peer's
 * CPU f32 BERT and ResNet cases), which --selects knows without the
 * exported models; the peer's test holds them to the manifest's.
 */
export const MODEL_BENCHMARKS = [
  "BenchmarkBERT/dev=cpu/dtype=f32/batch=1/seq=128",
  "BenchmarkBERT/dev=cpu/dtype=f32/batch=8/seq=128",
  "BenchmarkBERT/dev=cpu/dtype=f32/batch=1/seq=384",
  "BenchmarkResNet/dev=cpu/model=resnet50/dtype=f32/batch=1",
  "BenchmarkResNet/dev=cpu/model=resnet50/dtype=f32/batch=8",
];

// Unit metadata as golang.org/x/perf/benchfmt parses it, as zbench.Units.
export const UNITS = [
  "Unit GFLOP/s better=higher",
  "Unit GB/s better=higher",
  "Unit img/s better=higher",
  "Unit seq/s better=higher",
  "Unit rel-err better=lower assume=exact",
];

/** Where scripts/install-onnxruntime.sh installs: ZBENCH_ONNXRUNTIME or .cache/onnxruntime. */
export function installDir() {
  return process.env.ZBENCH_ONNXRUNTIME || path.join(REPO, ".cache", "onnxruntime");
}

/** onnxruntime-node from installDir(), and its version. */
export function loadOrt() {
  const dir = installDir();
  const pkg = path.join(dir, "node_modules", "onnxruntime-node", "package.json");
  if (!fs.existsSync(pkg)) {
    throw new Error(`${pkg}: onnxruntime-node is not installed: run scripts/install-onnxruntime.sh`);
  }
  const require = createRequire(path.join(dir, "package.json"));
  const ort = require("onnxruntime-node");
  return { ort, version: JSON.parse(fs.readFileSync(pkg, "utf8")).version };
}

/** The manifest of export.py in dir, checked. */
export function loadManifest(dir) {
  const file = path.join(dir, "manifest.json");
  let m;
  try {
    m = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (e) {
    throw new Error(`${file}: ${e.message} (scripts/install-onnxruntime.sh exports the models)`);
  }
  if (m.format !== MANIFEST_FORMAT) {
    throw new Error(`${file}: format ${JSON.stringify(m.format)}, want ${MANIFEST_FORMAT}: rerun scripts/install-onnxruntime.sh`);
  }
  for (const p of m.points ?? []) {
    if (!m.models?.[p.model]) {
      throw new Error(`${file}: point ${p.name} names model ${p.model}, which the manifest does not list`);
    }
  }
  return m;
}

const TYPED = { int64: BigInt64Array, float32: Float32Array, float64: Float64Array };

/** A raw tensor of the manifest ({file, dtype, shape}) as a typed array. */
export function readRaw(dir, t) {
  const file = path.join(dir, t.file);
  const Typed = TYPED[t.dtype];
  if (!Typed) {
    throw new Error(`${file}: dtype ${t.dtype} is not one of ${Object.keys(TYPED).join(", ")}`);
  }
  const buf = fs.readFileSync(file);
  const n = t.shape.reduce((a, b) => a * b, 1);
  if (buf.length !== n * Typed.BYTES_PER_ELEMENT) {
    throw new Error(`${file}: ${buf.length} bytes, want ${n * Typed.BYTES_PER_ELEMENT} for ${t.dtype} ${JSON.stringify(t.shape)}`);
  }
  const out = new Typed(n);
  new Uint8Array(out.buffer).set(buf);
  return out;
}

/** The ORT feeds of a manifest input map. */
export function feeds(ort, dir, inputs) {
  const f = {};
  for (const [name, t] of Object.entries(inputs)) {
    f[name] = new ort.Tensor(t.dtype, readRaw(dir, t), t.shape);
  }
  return f;
}

/**
 * A session configuration: intra-op threads, execution mode (sequential or
 * parallel, the latter with inter-op threads), and whether the intra-op
 * threads spin between parallel regions.
 */
export function describeConfig(c) {
  return `intra=${c.intra}/${c.mode}${c.mode === "parallel" ? `/inter=${c.inter}` : ""}/${c.spin ? "spin" : "nospin"}`;
}

/** The InferenceSession options of config c for a point's dimensions. */
export function sessionOptions(c, dims, extra = {}) {
  return {
    executionProviders: ["cpu"],
    graphOptimizationLevel: "all",
    intraOpNumThreads: c.intra,
    interOpNumThreads: c.mode === "parallel" ? c.inter : 1,
    executionMode: c.mode,
    freeDimensionOverrides: dims,
    extra: { session: { intra_op: { allow_spinning: c.spin ? "1" : "0" } } },
    ...extra,
  };
}

/**
 * modelPoint is a point of export.py's manifest (BERT, ResNet) as a Point
 * of kernels.mjs: its model file, whose free dimensions the point's dims
 * fix, the timed inputs and the check on the check's inputs against the
 * reference the manifest names.
 * @returns {import("./kernels.mjs").Point}
 */
export function modelPoint(dir, manifest, p) {
  return {
    ...p,
    source: () => path.join(dir, manifest.models[p.model]),
    overrides: p.dims,
    prepare: (ort) => ({
      feeds: feeds(ort, dir, p.inputs),
      fetches: undefined,
      check: async (session) => relErr(checkedValues(await session.run(feeds(ort, dir, p.check.inputs)), p.check), readRaw(dir, p.check.want)),
    }),
  };
}

/** The check's outputs of a run, the rows taken (all when null), flattened in order. */
export function checkedValues(results, check) {
  const parts = [];
  for (const name of check.outputs) {
    const t = results[name];
    if (!t) {
      throw new Error(`the model has no output ${name}`);
    }
    if (check.rows == null) {
      parts.push(t.data);
      continue;
    }
    const per = t.dims.slice(1).reduce((a, b) => a * b, 1);
    for (const r of check.rows) {
      parts.push(t.data.subarray(r * per, (r + 1) * per));
    }
  }
  const out = new Float64Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** readProfile is the events of the profile ONNX Runtime wrote into dir (profileFilePrefix there). */
export function readProfile(dir) {
  const file = fs.readdirSync(dir).find((n) => n.startsWith("profile") && n.endsWith(".json"));
  if (!file) throw new Error(`ONNX Runtime wrote no profile into ${dir}`);
  return JSON.parse(fs.readFileSync(path.join(dir, file), "utf8"));
}

/** modelRuns are the model_run events of a profile (session.run inside ONNX Runtime), in time order. */
export function modelRuns(events) {
  return events.filter((e) => e.cat === "Session" && e.name === "model_run").sort((a, b) => a.ts - b.ts);
}

/** log writes msg to stderr. */
export function log(msg) {
  process.stderr.write(msg + "\n");
}
