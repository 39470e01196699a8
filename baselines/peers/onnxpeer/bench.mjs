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
  PKG,
  UNITS,
  checkedValues,
  cpuModel,
  describeConfig,
  feeds,
  hostLoad,
  installDir,
  loadManifest,
  loadOrt,
  log,
  makeMatcher,
  measure,
  parseBenchtime,
  pretty,
  readRaw,
  relErr,
  runN,
  sessionOptions,
  zbenchProcs,
} from "./lib.mjs";

// The share of the CPUs other processes may use in the second before the
// run without the run being called busy.
const BUSY_SHARE = 0.25;

// How much faster (as a fraction) fewer intra-op threads than zbench's
// cores must run in the calibration to be chosen.
const FEWER_THREADS_MARGIN = 0.05;

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
  const { values } = parseArgs({
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
  const int = (flag, v) => {
    if (!/^\d+$/.test(v) || Number(v) < 1) {
      throw new Error(`--${flag} ${JSON.stringify(v)}: want a positive integer`);
    }
    return Number(v);
  };
  const procs = zbenchProcs();
  const cal = parseBenchtime(values["calibrate-time"]);
  if (cal.kind !== "d") {
    throw new Error(`--calibrate-time ${values["calibrate-time"]}: want a duration`);
  }
  return {
    help: values.help,
    bench: values.bench,
    benchtime: parseBenchtime(values.benchtime),
    count: int("count", values.count),
    short: values.short,
    threads: values.threads === undefined ? procs : int("threads", values.threads),
    explicitThreads: values.threads !== undefined,
    minThreads: values["min-threads"] === undefined ? procs : int("min-threads", values["min-threads"]),
    calibrate: !values["no-calibrate"],
    calibrateTime: cal.value,
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

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/**
 * The fastest configuration of candidates(args) on point, by the median
 * seconds per run over three interleaved rounds of calibrateTime each, and
 * what was measured. Fewer intra-op threads than args.threads must be
 * FEWER_THREADS_MARGIN faster than the best with args.threads.
 */
async function calibrate(ort, args, dir, modelFile, point) {
  const tries = [];
  const f = feeds(ort, dir, point.inputs);
  try {
    for (const c of candidates(args)) {
      const s = await ort.InferenceSession.create(modelFile, sessionOptions(c, point.dims));
      tries.push({ c, s, times: [] });
      await s.run(f); // warm-up
    }
    for (let round = 0; round < 3; round++) {
      for (const t of tries) {
        const one = await runN(() => t.s.run(f), 1);
        const k = Math.max(1, Math.round(args.calibrateTime / one));
        t.times.push((await runN(() => t.s.run(f), k)) / k);
      }
    }
  } finally {
    for (const t of tries) {
      await t.s.release();
    }
  }
  for (const t of tries) {
    t.median = median(t.times);
  }
  const full = tries.filter((t) => t.c.intra >= args.threads).sort((a, b) => a.median - b.median);
  let best = full[0];
  for (const t of tries) {
    if (t.c.intra < args.threads && t.median < best.median * (1 - FEWER_THREADS_MARGIN)) {
      best = t;
    }
  }
  const summary = tries.map((t) => `${describeConfig(t.c)} ${(t.median * 1e3).toFixed(1)}ms`).join(", ");
  return { config: best.c, summary: `${summary} on ${point.name.split("/").slice(-2).join("/")}: ${describeConfig(best.c)}` };
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
    log(`onnxpeer: ${e.message}\n\n${USAGE}`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (args.threads < args.minThreads) {
    log(`onnxpeer: refused: --threads ${args.threads} is fewer intra-op threads than the ${args.minThreads} cores zbench uses ` +
      "(GOMAXPROCS; --min-threads): the peer would be slower than ONNX Runtime can be.\n" +
      "  drop --threads (the calibration tries fewer threads and takes them, recorded, where they are faster), " +
      "or if zbench ran with fewer cores say so: GOMAXPROCS=N or --min-threads N");
    return EXIT_REFUSED;
  }
  const { ort, version } = loadOrt();
  const manifest = loadManifest(args.models);
  const match = makeMatcher(args.bench);
  const points = manifest.points.filter((p) => (!args.short || p.short) && match(p.name));
  if (!points.length) {
    log(`onnxpeer: warning: --bench ${JSON.stringify(args.bench)} matched no benchmark`);
  }

  const load = await hostLoad();
  const busy = load.busy > BUSY_SHARE;
  if (busy) {
    log(`onnxpeer: the machine is busy: other processes used ${(load.busy * 100).toFixed(0)}% of its ${load.cpus} CPUs ` +
      `in the second before the run (load average ${load.load1.toFixed(2)}): timings will be noisy`);
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
  out(`goos: ${process.platform}`);
  out(`goarch: ${{ x64: "amd64", arm64: "arm64" }[process.arch] ?? process.arch}`);
  out(`pkg: ${PKG}`);
  out(`cpu: ${cpuModel()}`);
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
    out(`machine-busy: ${(load.busy * 100).toFixed(0)}% of ${load.cpus} CPUs used by others before the run, load average ${load.load1.toFixed(2)}`);
  }
  out("peer-usable: yes");
  for (const u of UNITS) out(u);

  let failed = false;
  for (const p of points) {
    const c = chosen.get(p.model);
    // The cores the peer was given, as Go's suffix is GOMAXPROCS: the same
    // names as zbench's rows when the calibration uses fewer threads.
    const suffix = args.threads !== 1 ? `-${args.threads}` : "";
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
        const [n, secs] = await measure(op, args.benchtime);
        const perOp = secs / n;
        out([
          `${p.name}${suffix}`,
          String(n).padStart(8),
          `${pretty(perOp * 1e9)} ns/op`,
          `${pretty(p.flops / perOp / 1e9)} GFLOP/s`,
          `${pretty(p.bytes / perOp / 1e9)} GB/s`,
          `${pretty(p.items / perOp)} ${p.unit}`,
          `${pretty(err)} rel-err`,
        ].join("\t"));
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
