#!/usr/bin/env node
// The ONNX Runtime peer: runs zbench's CPU f32 BenchmarkBERT and
// BenchmarkResNet points with ONNX Runtime (onnxruntime-node, CPU execution
// provider) on the models export.py made, and its BenchmarkKernels and
// BenchmarkMatMul points that one ONNX op computes on single-op graphs
// (kernels.mjs), and prints Go benchmark format under the same names and
// units, so that one benchstat call compares zbench with ONNX Runtime.
// baselines/peers/README.md says how it runs.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

import {
  EXIT_REFUSED,
  EXIT_USAGE,
  RefusedError,
  UsageError,
  calibrateThreads,
  checkThreads,
  describeLoad,
  formatRow,
  headerLines,
  machineLoad,
  makeMatcher,
  measure,
  parseBenchtime,
  timeN,
  zbenchProcs,
} from "../node/harness.mjs";
import { BF16_NOTE, F16_NOTE, OPSET, kernelPoints } from "./kernels.mjs";
import { MODEL_BENCHMARKS, UNITS, describeConfig, installDir, loadManifest, loadOrt, log, modelPoint, modelRuns, readProfile, sessionOptions } from "./lib.mjs";

/** selectsAny says whether match selects any benchmark this peer runs, in the full set or -short's. */
function selectsAny(match) {
  return [...MODEL_BENCHMARKS, ...kernelPoints(false).map((p) => p.name), ...kernelPoints(true).map((p) => p.name)].some((n) => match(n));
}

const USAGE = `usage: node baselines/peers/onnxpeer/bench.mjs [flags]

  --bench REGEX       run only the benchmarks matching REGEX, as go test -bench (default: all)
  --benchtime T       time per benchmark ("1s", "500ms") or fixed count ("10x") (default 1s)
  --count N           run each benchmark N times (default 1)
  --short             the quick set (go test -short): BERT batch 1 seq 128, ResNet-50 batch 1, the kernels at
                      batch 1 seq 128 and MatMul at 256 and 1024, in f32
  --selects           exit 0 when --bench selects any benchmark this peer runs, 1 when none (runs nothing)
  --threads N         the cores given to ONNX Runtime: intra-op threads, fewer only where the calibration
                      finds fewer faster (default: the cores zbench uses, GOMAXPROCS); the -N name suffix
  --min-threads N     refuse fewer intra-op threads than N (default: the cores zbench uses)
  --no-calibrate      skip the calibration: intra-op threads --threads, sequential, spinning
  --calibrate-time T  time per configuration and round of the calibration (default 300ms)
  --models DIR        export.py's directory (default .cache/onnxruntime/models)
`;

function parse(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        bench: { type: "string", default: "." },
        benchtime: { type: "string", default: "1s" },
        count: { type: "string", default: "1" },
        short: { type: "boolean", default: false },
        selects: { type: "boolean", default: false },
        threads: { type: "string" },
        "min-threads": { type: "string" },
        "no-calibrate": { type: "boolean", default: false },
        "calibrate-time": { type: "string", default: "300ms" },
        models: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    });
  } catch (e) {
    throw new UsageError(e.message);
  }
  const { values } = parsed;
  const int = (flag, v) => {
    if (!/^\d+$/.test(v) || Number(v) < 1) {
      throw new UsageError(`--${flag} ${JSON.stringify(v)}: want a positive integer`);
    }
    return Number(v);
  };
  const procs = zbenchProcs();
  let cal;
  try {
    cal = parseBenchtime(values["calibrate-time"]);
  } catch {
    cal = {};
  }
  if (!("ns" in cal)) {
    throw new UsageError(`--calibrate-time ${values["calibrate-time"]}: want a duration`);
  }
  return {
    help: values.help,
    bench: values.bench,
    match: makeMatcher(values.bench),
    benchtime: parseBenchtime(values.benchtime),
    count: int("count", values.count),
    short: values.short,
    selects: values.selects,
    threads: values.threads === undefined ? procs : int("threads", values.threads),
    explicitThreads: values.threads !== undefined,
    minThreads: values["min-threads"] === undefined ? procs : int("min-threads", values["min-threads"]),
    calibrate: !values["no-calibrate"],
    calibrateTime: cal.ns,
    models: values.models ?? path.join(installDir(), "models"),
  };
}

/** The session configurations the calibration tries for threads intra-op threads. */
function candidates(args) {
  const t = args.threads;
  const out = [
    { intra: t, mode: "sequential", spin: true },
    { intra: t, mode: "sequential", spin: false },
    { intra: t, mode: "parallel", inter: t, spin: true },
  ];
  if (!args.explicitThreads && t > 1) {
    out.push({ intra: Math.max(1, Math.floor(t / 2)), mode: "sequential", spin: true });
  }
  return out;
}

/**
 * The fastest configuration of candidates(args) on point (a Point of
 * kernels.mjs), by the median seconds per run over three interleaved
 * rounds of calibrateTime each (calibrateThreads: fewer intra-op threads
 * than args.threads only where FEWER_THREADS_MARGIN faster), and what was
 * measured.
 */
async function calibrate(ort, args, point) {
  const sessions = new Map();
  const { feeds, fetches } = point.prepare(ort);
  try {
    const cands = candidates(args);
    let trial;
    if (point.engineTime) {
      // ONNX Runtime's own time, as the rows take it.
      trial = async (c) => {
        const { n, ns } = await measureEngine(ort, point, c, feeds, fetches, { ns: args.calibrateTime });
        return ns / n / 1e9;
      };
    } else {
      const source = point.source();
      for (const c of cands) {
        const s = await ort.InferenceSession.create(source, sessionOptions(c, point.overrides));
        sessions.set(c, s);
        await s.run(feeds, fetches); // warm-up
      }
      trial = async (c) => {
        const op = () => sessions.get(c).run(feeds, fetches);
        const k = Math.max(1, Math.round(args.calibrateTime / (await timeN(op, 1))));
        return (await timeN(op, k)) / k / 1e9;
      };
    }
    const { best, results } = await calibrateThreads(cands, { rounds: 3, full: args.threads, threads: (c) => c.intra, trial });
    const summary = results.map((t) => `${describeConfig(t.c)} ${(t.median * 1e3).toFixed(1)}ms`).join(", ");
    const at = point.name.replace(/^Benchmark\w+\/(op=\w+\/)?dev=cpu\//, "");
    return { config: best, summary: `${summary} on ${at}: ${describeConfig(best)}` };
  } finally {
    for (const s of sessions.values()) {
      await s.release();
    }
  }
}

/** measureWall times op as Go's testing does, after a warm-up run: n runs in ns nanoseconds of wall time. */
async function measureWall(op, benchtime) {
  await op(); // warm-up, outside the timer
  return measure(op, benchtime);
}

/**
 * measureEngine runs a single-op point p as measureWall does, on a session
 * of configuration c with ONNX Runtime's profiler on, and returns ONNX
 * Runtime's own time of the timed runs (their model_run events) as ns:
 * onnxruntime-node copies every output into a new JavaScript buffer after
 * the run, which costs more than the op itself for outputs of tens of MB
 * (a 38 MB relu: 4 ms in ONNX Runtime, 180 ms to the caller), and which a
 * caller of the C API or of Python's IO binding does not pay.
 */
async function measureEngine(ort, p, c, feeds, fetches, benchtime) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "onnxpeer-engine-"));
  try {
    const session = await ort.InferenceSession.create(p.source(), sessionOptions(c, p.overrides, { enableProfiling: true, profileFilePrefix: path.join(dir, "profile") }));
    let timed;
    try {
      timed = await measureWall(() => session.run(feeds, fetches), benchtime);
    } finally {
      session.endProfiling();
      await session.release();
    }
    const runs = modelRuns(readProfile(dir)).slice(-timed.n);
    if (runs.length !== timed.n) throw new Error(`${p.name}: the profile has ${runs.length} model_run events, want ${timed.n}`);
    return { n: timed.n, ns: runs.reduce((a, r) => a + r.dur, 0) * 1e3 };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** A config value per model: one value when all agree, else "v (model), ...". */
function perModel(chosen, fn) {
  const vals = [...chosen.entries()].map(([m, c]) => [m, fn(c)]);
  if (new Set(vals.map(([, v]) => v)).size <= 1) {
    return String(vals[0]?.[1] ?? "-");
  }
  return vals.map(([m, v]) => `${v} (${m})`).join(", ");
}

async function run(argv) {
  let args;
  try {
    args = parse(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    log(`onnxpeer: ${e.message}\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  if (args.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (args.selects) {
    return selectsAny(args.match) ? 0 : 1;
  }
  try {
    checkThreads(args.threads, args.minThreads, "ONNX Runtime");
  } catch (e) {
    if (!(e instanceof RefusedError)) throw e;
    log(`onnxpeer: refusing to run: ${e.message}`);
    return EXIT_REFUSED;
  }
  const { ort, version } = loadOrt();
  // The exported models are read only where a model benchmark is selected.
  const manifest = MODEL_BENCHMARKS.some((n) => args.match(n)) ? loadManifest(args.models) : null;
  const models = (manifest?.points ?? []).filter((p) => (!args.short || p.short) && args.match(p.name));
  const kernels = kernelPoints(args.short).filter((p) => args.match(p.name));
  const points = [...models.map((p) => modelPoint(args.models, manifest, p)), ...kernels];
  if (!points.length) {
    log(`onnxpeer: warning: --bench ${JSON.stringify(args.bench)} matched no benchmark`);
  }

  const load = await machineLoad();
  const busy = load.busy;
  if (busy) {
    log(`onnxpeer: the machine is busy: ${describeLoad(load)}`);
  }

  const chosen = new Map();
  const calibration = new Map();
  for (const p of points) {
    if (chosen.has(p.model)) continue;
    if (!args.calibrate) {
      chosen.set(p.model, { intra: args.threads, mode: "sequential", spin: true });
      continue;
    }
    log(`onnxpeer: calibrating ${p.model} on ${p.name}`);
    const r = await calibrate(ort, args, p);
    chosen.set(p.model, r.config);
    calibration.set(p.model, r.summary);
    log(`onnxpeer: ${p.model}: ${r.summary}`);
  }

  const out = (s) => process.stdout.write(s + "\n");
  for (const l of headerLines()) out(l);
  out(`impl: onnxruntime-${version}`);
  out(`onnxruntime-api: onnxruntime-node-${version} (node ${process.version})`);
  out("execution-provider: cpu");
  out(`intra-op-threads: ${perModel(chosen, (c) => c.intra)}`);
  out(`inter-op-threads: ${perModel(chosen, (c) => (c.mode === "parallel" ? c.inter : 1))}`);
  out(`execution-mode: ${perModel(chosen, (c) => c.mode)}`);
  out(`intra-op-spinning: ${perModel(chosen, (c) => (c.spin ? "on" : "off"))}`);
  out(`min-threads: ${args.minThreads}`);
  out("graph-optimization-level: all");
  const both = models.length > 0 && kernels.length > 0;
  const shapes = [];
  if (models.length) shapes.push(`freeDimensionOverrides per benchmark point${both ? " (BERT, ResNet)" : ""}`);
  if (kernels.length) shapes.push(`single-op graphs written with the point's shapes${both ? " (Kernels, MatMul)" : ""}`);
  out(`shapes: static (${shapes.join("; ")})`);
  const opsets = [];
  const exporters = [];
  if (models.length) {
    opsets.push(`${manifest.opset}${both ? " (BERT, ResNet)" : ""}`);
    exporters.push(`${manifest.exporter}${both ? " (BERT, ResNet)" : ""}`);
  }
  if (kernels.length) {
    opsets.push(`${OPSET}${both ? " (Kernels, MatMul)" : ""}`);
    exporters.push(`onnxgraph.mjs singleOpModel${both ? " (Kernels, MatMul)" : ""}`);
  }
  if (points.length) {
    out(`opset: ${opsets.join(", ")}`);
    out(`exporter: ${exporters.join(", ")}`);
  }
  if (kernels.length) {
    out("kernel-operands: graph inputs, none constant (nothing prepacked), the output preallocated (fetches); seeded uniform [-1, 1) inputs, bench_test's distribution");
    out("kernel-timing: ONNX Runtime's own time of each timed run (its profiler's model_run events), without onnxruntime-node's copy of the output into a new buffer after the run");
    if (kernels.some((p) => p.dtype === "f16")) out(`dtype-f16: ${F16_NOTE}`);
    if (!args.short) out(`dtype-bf16: ${BF16_NOTE}`);
  }
  for (const [m, s] of calibration) {
    out(`calibration-${m}: ${s}`);
  }
  if (!args.calibrate) {
    out("calibration: none (--no-calibrate)");
  }
  if (busy) {
    out(`machine-busy: ${(load.share * 100).toFixed(0)}% of ${load.cpus} CPUs used by others before the run, load average ${load.load1.toFixed(2)}`);
  }
  out("peer-usable: yes");
  for (const u of UNITS) out(u);

  let failed = false;
  for (const p of points) {
    const c = chosen.get(p.model);
    const { feeds, fetches, check } = p.prepare(ort);
    const session = await ort.InferenceSession.create(p.source(), sessionOptions(c, p.overrides));
    try {
      const op = () => session.run(feeds, fetches);
      await op(); // warm-up, outside the timer
      const err = await check(session);
      if (!(err <= p.tol)) {
        log(`--- FAIL: ${p.name}: rel-err ${err.toPrecision(3)} exceeds ${p.tol}: not timing a wrong result`);
        failed = true;
        continue;
      }
      for (let i = 0; i < args.count; i++) {
        const { n, ns } = p.engineTime ? await measureEngine(ort, p, c, feeds, fetches, args.benchtime) : await measureWall(op, args.benchtime);
        const perOp = ns / n / 1e9;
        // The name carries the cores the peer was given, as Go's carry
        // GOMAXPROCS: zbench's names also where the calibration took fewer threads.
        out(formatRow(p.name, args.threads, n, ns, [
          [p.flops / perOp / 1e9, "GFLOP/s"],
          [p.bytes / perOp / 1e9, "GB/s"],
          ...(p.unit ? [[p.items / perOp, p.unit]] : []),
          [err, "rel-err"],
        ]));
      }
    } finally {
      await session.release();
    }
  }
  out(failed ? "FAIL" : "PASS");
  return failed ? 1 : 0;
}

run(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    log(`onnxpeer: ${e.message}`);
    process.exitCode = 1;
  },
);
