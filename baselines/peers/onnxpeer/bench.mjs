#!/usr/bin/env node
// The ONNX Runtime peer: runs zbench's CPU f32 BenchmarkBERT and
// BenchmarkResNet points with ONNX Runtime (onnxruntime-node, CPU execution
// provider) on the models export.py made, and prints Go benchmark format
// under the same names and units, so that one benchstat call compares
// zbench with ONNX Runtime. baselines/peers/README.md says how it runs.

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
import { UNITS, checkedValues, describeConfig, feeds, installDir, loadManifest, loadOrt, log, readRaw, relErr, sessionOptions } from "./lib.mjs";

const USAGE = `usage: node baselines/peers/onnxpeer/bench.mjs [flags]

  --bench REGEX       run only the benchmarks matching REGEX, as go test -bench (default: all)
  --benchtime T       time per benchmark ("1s", "500ms") or fixed count ("10x") (default 1s)
  --count N           run each benchmark N times (default 1)
  --short             the quick set (go test -short): BERT batch 1 seq 128, ResNet-50 batch 1
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
 * The fastest configuration of candidates(args) on point, by the median
 * seconds per run over three interleaved rounds of calibrateTime each
 * (calibrateThreads: fewer intra-op threads than args.threads only where
 * FEWER_THREADS_MARGIN faster), and what was measured.
 */
async function calibrate(ort, args, dir, modelFile, point) {
  const sessions = new Map();
  const f = feeds(ort, dir, point.inputs);
  try {
    const cands = candidates(args);
    for (const c of cands) {
      const s = await ort.InferenceSession.create(modelFile, sessionOptions(c, point.dims));
      sessions.set(c, s);
      await s.run(f); // warm-up
    }
    const { best, results } = await calibrateThreads(cands, {
      rounds: 3,
      full: args.threads,
      threads: (c) => c.intra,
      trial: async (c) => {
        const op = () => sessions.get(c).run(f);
        const k = Math.max(1, Math.round(args.calibrateTime / (await timeN(op, 1))));
        return (await timeN(op, k)) / k / 1e9;
      },
    });
    const summary = results.map((t) => `${describeConfig(t.c)} ${(t.median * 1e3).toFixed(1)}ms`).join(", ");
    return { config: best, summary: `${summary} on ${point.name.split("/").slice(-2).join("/")}: ${describeConfig(best)}` };
  } finally {
    for (const s of sessions.values()) {
      await s.release();
    }
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
  try {
    checkThreads(args.threads, args.minThreads, "ONNX Runtime");
  } catch (e) {
    if (!(e instanceof RefusedError)) throw e;
    log(`onnxpeer: refusing to run: ${e.message}`);
    return EXIT_REFUSED;
  }
  const { ort, version } = loadOrt();
  const manifest = loadManifest(args.models);
  const points = manifest.points.filter((p) => (!args.short || p.short) && args.match(p.name));
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
    const r = await calibrate(ort, args, args.models, path.join(args.models, manifest.models[p.model]), p);
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
  out("shapes: static (freeDimensionOverrides per benchmark point)");
  out(`opset: ${manifest.opset}`);
  out(`exporter: ${manifest.exporter}`);
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
    const session = await ort.InferenceSession.create(path.join(args.models, manifest.models[p.model]), sessionOptions(c, p.dims));
    try {
      const f = feeds(ort, args.models, p.inputs);
      const op = () => session.run(f);
      await op(); // warm-up, outside the timer
      const got = checkedValues(await session.run(feeds(ort, args.models, p.check.inputs)), p.check);
      const err = relErr(got, readRaw(args.models, p.check.want));
      if (!(err <= p.tol)) {
        log(`--- FAIL: ${p.name}: rel-err ${err.toPrecision(3)} exceeds ${p.tol}: not timing a wrong result`);
        failed = true;
        continue;
      }
      for (let i = 0; i < args.count; i++) {
        await op(); // warm-up, outside the timer
        const { n, ns } = await measure(op, args.benchtime);
        const perOp = ns / n / 1e9;
        // The name carries the cores the peer was given, as Go's carry
        // GOMAXPROCS: zbench's names also where the calibration took fewer threads.
        out(formatRow(p.name, args.threads, n, ns, [
          [p.flops / perOp / 1e9, "GFLOP/s"],
          [p.bytes / perOp / 1e9, "GB/s"],
          [p.items / perOp, p.unit],
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
