// What the ONNX Runtime peer's commands (bench.mjs, profile.mjs) share:
// loading onnxruntime-node and the exported models, session options,
// timing as go test -bench does it, Go benchmark formatting and the
// environment checks.

import { createRequire } from "node:module";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, "..", "..", "..");
export const PKG = "github.com/zbench/zbench/bench_test";

// Exit status of a run the environment check refuses (the PyTorch peer's).
export const EXIT_REFUSED = 3;

// The manifest format export.py writes.
export const MANIFEST_FORMAT = "zbench-onnxpeer/1";

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

/** |got - want|_2 / |want|_2 in float64 (kernels.RelErr). */
export function relErr(got, want) {
  if (got.length !== want.length) {
    throw new Error(`rel-err: ${got.length} values against ${want.length} in the reference`);
  }
  let num = 0;
  let den = 0;
  for (let i = 0; i < want.length; i++) {
    const d = Number(got[i]) - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  return den ? Math.sqrt(num) / Math.sqrt(den) : Math.sqrt(num);
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

// ---------------------------------------------------------------- timing

/** Go's -benchtime: a duration ("1s", "500ms", "1.5m") or "Nx". */
export function parseBenchtime(s) {
  let m = /^(\d+)x$/.exec(s);
  if (m) {
    const n = Number(m[1]);
    if (n < 1) {
      throw new Error(`invalid count ${JSON.stringify(s)}`);
    }
    return { kind: "n", value: n };
  }
  const units = { ns: 1e-9, us: 1e-6, "µs": 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };
  m = /^(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)$/.exec(s);
  if (!m) {
    throw new Error(`invalid duration ${JSON.stringify(s)}: want e.g. 1s, 500ms or 10x`);
  }
  return { kind: "d", value: Number(m[1]) * units[m[2]] };
}

/** Seconds that n awaited calls of fn take. */
export async function runN(fn, n) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    await fn();
  }
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

/**
 * [iterations, seconds] of the last timed loop, grown as testing.B grows
 * b.N: predict the count that fills the benchtime from the previous loop,
 * run 1.2x that, at most 100x the previous count and at least one more,
 * until a loop lasts the benchtime (torchpeer.harness.measure).
 */
export async function measure(fn, benchtime) {
  let n = 1;
  let dt = await runN(fn, n);
  if (benchtime.kind === "n") {
    if (benchtime.value > 1) {
      n = benchtime.value;
      dt = await runN(fn, n);
    }
    return [n, dt];
  }
  while (dt < benchtime.value && n < 1e9) {
    const last = n;
    const prev = Math.max(dt, 1e-9);
    n = Math.floor((benchtime.value * last) / prev);
    n += Math.floor(n / 5);
    n = Math.min(n, 100 * last);
    n = Math.max(n, last + 1);
    n = Math.min(n, 1e9);
    dt = await runN(fn, n);
  }
  return [n, dt];
}

/** A metric as Go's testing.prettyPrint formats it, small values (rel-err) in exponent form. */
export function pretty(x) {
  const y = Math.abs(x);
  const pad = (s, w) => s.padStart(w);
  if (y === 0 || y >= 999.95) return pad(x.toFixed(0), 10);
  if (y >= 99.995) return pad(x.toFixed(1), 12);
  if (y >= 9.9995) return pad(x.toFixed(2), 13);
  if (y >= 0.99995) return pad(x.toFixed(3), 14);
  if (y >= 0.099995) return pad(x.toFixed(4), 15);
  if (y >= 0.0099995) return pad(x.toFixed(5), 16);
  if (y >= 1e-4) return pad(String(Number(x.toPrecision(4))), 16);
  return pad(Number(x.toPrecision(4)).toExponential().replace(/e([+-])(\d)$/, "e$10$2"), 16);
}

/**
 * Go's -bench matching: each slash-separated element of the pattern (slashes
 * inside brackets or parentheses excepted) is an unanchored regexp matched
 * against the same level of the name.
 */
export function makeMatcher(pattern) {
  const parts = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\") i++;
    else if (c === "[" || c === "(") depth++;
    else if ((c === "]" || c === ")") && depth > 0) depth--;
    else if (c === "/" && depth === 0) {
      parts.push(pattern.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(pattern.slice(start));
  const regs = parts.map((p) => new RegExp(p));
  return (name) => {
    const elems = name.split("/");
    return regs.every((r, i) => i >= elems.length || r.test(elems[i]));
  };
}

// ---------------------------------------------------------------- environment

/** The CPU model of /proc/cpuinfo. */
export function cpuModel() {
  return os.cpus()[0]?.model?.trim() || "unknown";
}

/** The cgroup v2 CPU bandwidth limit of this process in CPUs, or null. */
function cgroupCPULimit() {
  try {
    const line = fs.readFileSync("/proc/self/cgroup", "utf8").split("\n").find((l) => l.startsWith("0::"));
    if (!line) return null;
    const [quota, period] = fs.readFileSync(path.join("/sys/fs/cgroup", line.slice(3), "cpu.max"), "utf8").trim().split(/\s+/);
    return quota === "max" ? null : Number(quota) / Number(period);
  } catch {
    return null;
  }
}

/**
 * The cores zbench's Go benchmarks use, GOMAXPROCS as the Go runtime sets
 * it: the GOMAXPROCS variable when a positive integer, else the CPUs this
 * process may run on, lowered to the cgroup's limit rounded up, but not
 * below 2 (torchpeer.harness.zbench_procs).
 */
export function zbenchProcs() {
  const env = (process.env.GOMAXPROCS || "").trim();
  if (/^\d+$/.test(env) && Number(env) > 0) {
    return Number(env);
  }
  let n = os.availableParallelism ? os.availableParallelism() : os.cpus().length;
  const limit = cgroupCPULimit();
  if (limit != null && n > 1) {
    n = Math.min(n, Math.max(2, Math.ceil(limit)));
  }
  return n;
}

function cpuTimes() {
  const line = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = line[3] + (line[4] || 0);
  return { idle, total: line.reduce((a, b) => a + b, 0) };
}

/**
 * How busy the machine is while this process waits: the share of all CPUs'
 * time that other processes used over ms milliseconds, and the 1-minute
 * load average.
 */
export async function hostLoad(ms = 1000) {
  const a = cpuTimes();
  await new Promise((r) => setTimeout(r, ms));
  const b = cpuTimes();
  const total = b.total - a.total;
  const busy = total > 0 ? 1 - (b.idle - a.idle) / total : 0;
  return { busy, load1: os.loadavg()[0], cpus: os.cpus().length };
}

export function log(msg) {
  process.stderr.write(msg + "\n");
}
