#!/usr/bin/env node
// bench.mjs runs zbench's Llama benchmarks (BenchmarkLlamaPrefill,
// BenchmarkLlamaDecode, BenchmarkLlamaGenerate at their CPU shapes) on
// llama.cpp, one GGUF file per dtype, and prints the results in Go
// benchmark format under zbench's names. baselines/peers/README.md has the
// rules.
//
//   node baselines/peers/llamacpp/bench.mjs [flags] FILE.gguf...

import path from "node:path";
import { parseArgs } from "node:util";

import { DTYPES, describeModel, installDir, loadLlamaCpp } from "./lib/engine.mjs";
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
  zbenchProcs,
} from "../node/harness.mjs";
import { decode, generate, prefill } from "./lib/workloads.mjs";

const USAGE = `usage: node baselines/peers/llamacpp/bench.mjs [flags] FILE.gguf...

Runs BenchmarkLlamaPrefill (batch 1, seq 128), BenchmarkLlamaDecode (batch 1,
ctx 128) and BenchmarkLlamaGenerate (prompt 32, new 16) on llama.cpp for each
GGUF file (F32, F16, BF16, Q8_0 or Q4_0: dtype f32, f16, bf16, q8_0, w4a16)
and prints Go benchmark lines under zbench's names.

  --bench REGEXP     run the benchmarks matching REGEXP, as go test -bench (default .)
  --benchtime T      a duration (1s, 500ms) or a count (10x), as go test's (default 1s)
  --count N          repetitions of each benchmark (default 1)
  --threads N        llama.cpp's threads (default: the cores zbench uses,
                     or one fewer where a short calibration finds that faster)
  --min-threads N    refuse fewer threads than this (default GOMAXPROCS, else the CPUs)
  --no-calibrate     run at --threads without the calibration
  --model NAME       the model's name in the benchmark names (default: tinyllama
                     or tiny, told by the file's hyperparameters)
  --check            print the configuration lines and check the setup, run nothing
  --selects          exit 0 when --bench selects any benchmark this peer can run
                     (any dtype, model tinyllama or tiny), 1 when none; no file needed
`;

function positiveInt(flag, v) {
  if (!/^\d+$/.test(v) || Number(v) < 1) throw new UsageError(`${flag} ${v}: want a positive integer`);
  return Number(v);
}

function parseFlags(args) {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      options: {
        bench: { type: "string", default: "." },
        benchtime: { type: "string", default: "1s" },
        count: { type: "string", default: "1" },
        threads: { type: "string" },
        "min-threads": { type: "string" },
        "no-calibrate": { type: "boolean", default: false },
        model: { type: "string" },
        check: { type: "boolean", default: false },
        selects: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
    });
  } catch (err) {
    throw new UsageError(err.message);
  }
  const v = parsed.values;
  const flags = {
    help: v.help,
    match: makeMatcher(v.bench),
    benchtime: parseBenchtime(v.benchtime),
    benchtimeText: v.benchtime,
    count: positiveInt("--count", v.count),
    threads: v.threads === undefined ? undefined : positiveInt("--threads", v.threads),
    minThreads: v["min-threads"] === undefined ? zbenchProcs() : positiveInt("--min-threads", v["min-threads"]),
    calibrate: !v["no-calibrate"] && v.threads === undefined,
    model: v.model,
    check: v.check,
    selects: v.selects,
    files: parsed.positionals,
  };
  if (!flags.help && !flags.check && !flags.selects && flags.files.length === 0) throw new UsageError("no GGUF file given");
  return flags;
}

/**
 * decodeStepMs times decode steps at threads on a fresh context of model:
 * the median of steps, after a 32-token prompt and one warm-up step.
 */
async function decodeStepMs(model, m, threads, steps) {
  const w = decode(m, 1, 32);
  const ctx = await model.createContext({ contextSize: w.contextSize, batchSize: w.contextSize, threads });
  try {
    const run = await w.setup(ctx);
    await run.op();
    const times = [];
    for (let i = 0; i < steps; i++) {
      const start = process.hrtime.bigint();
      await run.op();
      times.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
    times.sort((a, b) => a - b);
    return times[Math.floor(times.length / 2)];
  } finally {
    await ctx.dispose();
  }
}

/**
 * chooseThreads is the thread count to run model at: flags.threads when
 * given; else the cores zbench uses (N), or N-1 where decode steps at N-1
 * are FEWER_THREADS_MARGIN faster in a short calibration of three
 * interleaved rounds (a busy machine stalls the spinning barriers of ggml's
 * thread pool when one of its threads loses its core). It returns the
 * count and a line that says how it was chosen.
 */
async function chooseThreads(model, m, flags) {
  const n = flags.threads ?? flags.minThreads;
  if (!flags.calibrate || n < 2) return { threads: n, how: flags.threads ? "--threads" : "the cores zbench uses" };
  const { best, results } = await calibrateThreads([n, n - 1], {
    rounds: 3,
    full: n,
    threads: (t) => t,
    trial: async (t) => (await decodeStepMs(model, m, t, 3)) / 1e3,
  });
  const ms = (t) => (results.find((r) => r.c === t).median * 1e3).toFixed(1);
  return {
    threads: best,
    how: `calibrated: decode step ${ms(n)} ms at ${n} threads, ${ms(n - 1)} ms at ${n - 1} (medians of 3 interleaved rounds of 3 steps; ${n - 1} only when 5% faster)`,
  };
}

/** workloadsOf are the benchmarks this peer runs on the model m. */
function workloadsOf(m) {
  return [prefill(m, 1, 128), decode(m, 1, 128), generate(m, 32, 16)];
}

/** selectsAny says whether match selects a benchmark of any dtype and model this peer can run. */
function selectsAny(match) {
  for (const dtype of DTYPES.values()) {
    for (const name of ["tinyllama", "tiny"]) {
      if (workloadsOf({ name, dtype, vocab: 32000 }).some((w) => match(w.name))) return true;
    }
  }
  return false;
}

/** runFile benchmarks one GGUF file and writes its configuration lines and rows to out. */
async function runFile(engine, file, flags, out) {
  const model = await engine.loadModel(file);
  try {
    const m = describeModel(file, model, flags.model);
    const workloads = workloadsOf(m).filter((w) => flags.match(w.name));
    if (workloads.length === 0) return;
    const { threads, how } = await chooseThreads(model, m, flags);
    if (threads < flags.minThreads) process.stderr.write(`llamacpp peer: ${path.basename(file)}: ${threads} threads (${how})\n`);
    const runs = [];
    for (const w of workloads) {
      const ctx = await model.createContext({ contextSize: w.contextSize, batchSize: w.contextSize, threads, performanceTracking: true });
      runs.push({ w, ctx, run: await w.setup(ctx) });
    }
    out.write(
      [
        `gguf-file: ${path.basename(file)}`,
        `gguf-type: ${m.ggufType} (dtype=${m.dtype}; tensors: ${m.tensorTypes})`,
        `threads: ${threads} (${how})`,
        `llama-context: n_ctx and n_batch the tokens each benchmark holds (${runs.map(({ w }) => `${w.name.slice(14).split("/")[0].toLowerCase()} ${w.contextSize}`).join(", ")}), ` +
          `one sequence, KV cache f16 (llama.cpp's default), flash attention auto (${engine.flashAttention()})`,
      ].join("\n") + "\n",
    );
    for (let c = 0; c < flags.count; c++) {
      for (const { w, ctx, run } of runs) {
        await run.op(); // the warm-up, outside the timer
        const { n, ns } = await measure(run.op, flags.benchtime, async () => {
          run.reset();
          await engine.engineMs(ctx); // the counters start from zero
        });
        const engineNs = (await engine.engineMs(ctx)) * 1e6;
        out.write(formatRow(w.name, flags.minThreads, n, ns, [...run.metrics(n, ns), [engineNs / n, "engine-ns/op"]]) + "\n");
      }
    }
    for (const { ctx } of runs) await ctx.dispose();
  } finally {
    await model.dispose();
  }
}

/**
 * run is the peer's main: it checks the setup, prints the configuration
 * lines, then each file's benchmarks.
 * @param {string[]} args
 * @param {NodeJS.WritableStream} out
 */
async function run(args, out) {
  const flags = parseFlags(args);
  if (flags.help) {
    out.write(USAGE);
    return;
  }
  if (flags.selects) {
    process.exitCode = selectsAny(flags.match) ? 0 : 1;
    return;
  }
  const engine = await loadLlamaCpp(installDir());
  try {
    const bad = engine.checkCPU();
    if (bad) throw new RefusedError(`${bad}: llama.cpp would be slower than it can be; reinstall with scripts/install-llamacpp.sh`);
    if (flags.threads !== undefined) checkThreads(flags.threads, flags.minThreads, "llama.cpp");
    const load = await machineLoad();
    if (load.busy) process.stderr.write(`llamacpp peer: the machine is busy: ${describeLoad(load)}\n`);
    out.write(
      [
        ...headerLines(),
        ...engine.configLines(),
        `node: ${process.version}`,
        `min-threads: ${flags.minThreads} (the cores zbench uses: GOMAXPROCS, else the CPUs; names carry it as Go's carry GOMAXPROCS)`,
        `machine-load: ${(load.share * 100).toFixed(0)}% (${describeLoad(load)})`,
        `timing: go test -bench rules: one warm-up op outside the timer, the count grown until a run takes --benchtime ${flags.benchtimeText}, --count ${flags.count}`,
        "engine-ns/op: the part of ns/op inside llama_decode by llama.cpp's own counters (llama_perf_context); " +
          "the rest is node-llama-cpp's dispatch (a libuv worker per decode and per sampled token), its sampler and JavaScript",
        "prompts: bench_test's llamaPrompts (Go's PCG seeded batch*100000+len, or prompt for generate), decode token 3; " +
          "the last position's logits computed and its greedy token read back",
        `dtypes: ${[...DTYPES].map(([t, d]) => `${t}=${d}`).join(" ")}`,
        "Unit tok/s better=higher",
        "Unit ttft-ms better=lower",
        "Unit engine-ns/op better=lower",
      ].join("\n") + "\n",
    );
    if (flags.check) return;
    for (const file of flags.files) await runFile(engine, file, flags, out);
  } finally {
    await engine.dispose();
  }
}

run(process.argv.slice(2), process.stdout).catch((err) => {
  if (err instanceof UsageError) {
    process.stderr.write(`llamacpp peer: ${err.message}\n${USAGE}`);
    process.exitCode = EXIT_USAGE;
  } else if (err instanceof RefusedError) {
    process.stderr.write(`llamacpp peer: refusing to run: ${err.message}\n`);
    process.exitCode = EXIT_REFUSED;
  } else {
    process.stderr.write(`llamacpp peer: ${err.message}\n`);
    process.exitCode = 1;
  }
});
