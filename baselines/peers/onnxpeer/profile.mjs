#!/usr/bin/env node
// ONNX Runtime's per-node profile of a benchmark point (by default
// ResNet-50 f32 batch 1, sequential execution), summarised in Markdown: each node's time (median
// over the profiled runs), convolutions grouped by shape with GFLOP/s, and
// the op types of the optimised graph ONNX Runtime ran (its NCHWc
// convolutions and reorders, fused activations and additions).

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

import { cpuName, machineLoad, zbenchProcs } from "../node/harness.mjs";
import { describeConfig, feeds, installDir, loadManifest, loadOrt, log, modelRuns, readProfile, sessionOptions } from "./lib.mjs";
import { graphNodes } from "./onnxgraph.mjs";

const USAGE = `usage: node baselines/peers/onnxpeer/profile.mjs [flags]

  --bench NAME     the benchmark point (default BenchmarkResNet/dev=cpu/model=resnet50/dtype=f32/batch=1)
  --threads N      intra-op threads (default: the cores zbench uses, GOMAXPROCS)
  --no-spin        intra-op threads do not spin between parallel regions (bench.mjs's calibration
                   chooses this on a busy machine)
  --warmup N       runs before the profiled ones (default 5)
  --runs N         profiled runs (default 20)
  --out FILE       write the Markdown there (default: stdout)
  --models DIR     export.py's directory (default .cache/onnxruntime/models)
`;

/** The multiply-add FLOPs of a profiled node from its shapes: convolutions and GEMMs, else 0. */
export function nodeFLOPs(op, inputs, outputs) {
  const out = outputs[0];
  if (!out) return 0;
  const prod = (s) => s.reduce((a, b) => a * b, 1);
  if ((op === "Conv" || op === "FusedConv") && inputs[1]?.length === 4 && out.length === 4) {
    return 2 * out[0] * out[2] * out[3] * prod(inputs[1]); // weight [Co, Ci/G, Kh, Kw]
  }
  if ((op === "Gemm" || op === "FusedGemm" || op === "MatMul" || op === "FusedMatMul") && inputs[0]) {
    return 2 * prod(out) * inputs[0][inputs[0].length - 1];
  }
  return 0;
}

function shapes(list) {
  return (list ?? []).map((t) => Object.values(t)[0]);
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/**
 * The nodes of an ORT profile (its JSON events) over the model_run events
 * after the first skip: [{name, op, inputs, outputs, us: [per run]}] in
 * the order of the first profiled run, and the runs' durations in µs.
 */
export function summarise(events, skip) {
  const runs = modelRuns(events).slice(skip);
  if (!runs.length) throw new Error(`the profile has no model_run after the first ${skip}`);
  const nodes = new Map();
  for (const e of events) {
    if (e.cat !== "Node" || !e.name.endsWith("_kernel_time")) continue;
    const r = runs.findIndex((run) => e.ts >= run.ts && e.ts <= run.ts + run.dur);
    if (r < 0) continue;
    const name = e.name.slice(0, -"_kernel_time".length);
    if (!nodes.has(name)) {
      nodes.set(name, { name, op: e.args.op_name, provider: e.args.provider, inputs: shapes(e.args.input_type_shape), outputs: shapes(e.args.output_type_shape), us: [], first: [r, e.ts] });
    }
    nodes.get(name).us.push(e.dur);
  }
  const list = [...nodes.values()].sort((a, b) => a.first[0] - b.first[0] || a.first[1] - b.first[1]);
  return { nodes: list, runs: runs.map((r) => r.dur) };
}

const fmt = (x, d = 2) => x.toFixed(d);
const dims = (s) => (s ? s.join("×") : "");

/** The Markdown report. */
export function report({ point, config, version, exporter, opset, runs, warmup, load, summary, graph }) {
  const byName = new Map(graph.map((n) => [n.name, n]));
  const lines = [];
  const w = (s = "") => lines.push(s);
  const total = summary.nodes.reduce((a, n) => a + median(n.us), 0);
  const runMs = median(summary.runs) / 1e3;
  w(`# ONNX Runtime per-node profile: ${point.name}`);
  w();
  w(`Made by \`node baselines/peers/onnxpeer/profile.mjs\` (the ONNX Runtime peer, baselines/peers/README.md):`);
  w(`onnxruntime-node ${version}, CPU execution provider, ${describeConfig(config)}, graph optimisation level all,`);
  w(`static shapes (freeDimensionOverrides ${JSON.stringify(point.dims)}), model exported by ${exporter} at opset ${opset};`);
  w(`${warmup} warm-up runs, then ${runs} profiled runs (enableProfiling). CPU: ${cpuName()}, ${os.cpus().length} CPUs;`);
  w(`other processes used ${fmt(load.share * 100, 0)}% of them in the second before (load average ${fmt(load.load1)}).`);
  w();
  w(`Times are medians over the profiled runs. A run (model_run): median ${fmt(runMs)} ms, min ${fmt(Math.min(...summary.runs) / 1e3)} ms;`);
  w(`the nodes' medians add up to ${fmt(total / 1e3)} ms. GFLOP/s counts 2 per multiply-add (2·N·Ho·Wo·Co·Ci/G·Kh·Kw, from the`);
  w(`weight's shape as ORT holds it; NCHWc pads channels to its block, which only the stem's 3 input channels are not a multiple of).`);
  w();

  // Op types of the optimised graph.
  const types = new Map();
  for (const n of graph) {
    const key = `${n.domain || "ai.onnx"} ${n.opType}${n.attrs.activation ? ` +${n.attrs.activation}` : ""}`;
    types.set(key, (types.get(key) ?? 0) + 1);
  }
  w("## The optimised graph");
  w();
  w("Saved with optimizedModelFilePath; nodes by domain and op type (+activation: a fused activation attribute).");
  w();
  w("| domain | op type | nodes |");
  w("|---|---|---:|");
  for (const [k, c] of [...types.entries()].sort((a, b) => b[1] - a[1])) {
    const [domain, ...rest] = k.split(" ");
    w(`| ${domain} | ${rest.join(" ")} | ${c} |`);
  }
  w();

  // Time by kernel kind.
  const kinds = new Map();
  for (const n of summary.nodes) {
    const g = byName.get(n.name);
    const sum = n.op === "Conv" && n.inputs.length > 3 ? " +Sum" : "";
    const key = `${g?.domain || "ai.onnx"} ${n.op}${g?.attrs.activation ? ` +${g.attrs.activation}` : ""}${sum}`;
    const k = kinds.get(key) ?? { nodes: 0, us: 0, flops: 0 };
    k.nodes++;
    k.us += median(n.us);
    k.flops += nodeFLOPs(n.op, n.inputs, n.outputs);
    kinds.set(key, k);
  }
  w("## Time by kernel");
  w();
  w("+Sum: the convolution adds the shortcut (a fused Add, ORT's NCHWc Conv with a Sum input).");
  w();
  w("| kernel | nodes | ms | share | GFLOP/s |");
  w("|---|---:|---:|---:|---:|");
  for (const [k, v] of [...kinds.entries()].sort((a, b) => b[1].us - a[1].us)) {
    w(`| ${k} | ${v.nodes} | ${fmt(v.us / 1e3, 3)} | ${fmt((100 * v.us) / total, 1)}% | ${v.flops ? fmt(v.flops / v.us / 1e3, 1) : ""} |`);
  }
  w();

  // Convolutions by shape.
  const convs = new Map();
  for (const n of summary.nodes) {
    const flops = nodeFLOPs(n.op, n.inputs, n.outputs);
    if (!flops || (n.op !== "Conv" && n.op !== "FusedConv")) continue;
    const [x, wt] = n.inputs;
    const out = n.outputs[0];
    const stride = Math.round(x[2] / out[2]);
    const key = `${x[1]}→${wt[0]} ${wt[2]}×${wt[3]} /${stride} ${x[2]}×${x[3]}→${out[2]}×${out[3]}`;
    const c = convs.get(key) ?? { nodes: 0, us: 0, flops: 0, order: convs.size };
    c.nodes++;
    c.us += median(n.us);
    c.flops += flops;
    convs.set(key, c);
  }
  w("## Convolutions by shape");
  w();
  w("Ci→Co, kernel, stride, input→output spatial size (batch as profiled); ms per node is the median of each node, averaged over the nodes of that shape.");
  w();
  w("| shape | nodes | ms per node | ms total | GFLOP per node | GFLOP/s |");
  w("|---|---:|---:|---:|---:|---:|");
  for (const [k, c] of [...convs.entries()].sort((a, b) => a[1].order - b[1].order)) {
    w(`| ${k} | ${c.nodes} | ${fmt(c.us / c.nodes / 1e3, 3)} | ${fmt(c.us / 1e3, 3)} | ${fmt(c.flops / c.nodes / 1e9, 3)} | ${fmt(c.flops / c.us / 1e3, 1)} |`);
  }
  w();

  // Every node.
  w("## Every node");
  w();
  w("In execution order; node names are ORT's (an NCHWc node is named after its output, the original model's node path).");
  w();
  w("| # | node | kernel | inputs | output | ms | GFLOP/s |");
  w("|---:|---|---|---|---|---:|---:|");
  summary.nodes.forEach((n, i) => {
    const g = byName.get(n.name);
    const us = median(n.us);
    const flops = nodeFLOPs(n.op, n.inputs, n.outputs);
    const kernel = `${g?.domain ? g.domain + "." : ""}${n.op}${g?.attrs.activation ? "+" + g.attrs.activation : ""}`;
    w(`| ${i} | ${n.name} | ${kernel} | ${n.inputs.map(dims).join(", ")} | ${dims(n.outputs[0])} | ${fmt(us / 1e3, 3)} | ${flops ? fmt(flops / us / 1e3, 1) : ""} |`);
  });
  return lines.join("\n") + "\n";
}

async function main(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      bench: { type: "string", default: "BenchmarkResNet/dev=cpu/model=resnet50/dtype=f32/batch=1" },
      threads: { type: "string" },
      "no-spin": { type: "boolean", default: false },
      warmup: { type: "string", default: "5" },
      runs: { type: "string", default: "20" },
      out: { type: "string" },
      models: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const int = (flag, v, min) => {
    if (!/^\d+$/.test(v) || Number(v) < min) throw new Error(`--${flag} ${JSON.stringify(v)}: want an integer >= ${min}`);
    return Number(v);
  };
  const threads = values.threads === undefined ? zbenchProcs() : int("threads", values.threads, 1);
  const warmup = int("warmup", values.warmup, 0);
  const runs = int("runs", values.runs, 1);
  const dir = values.models ?? path.join(installDir(), "models");
  const { ort, version } = loadOrt();
  const manifest = loadManifest(dir);
  const point = manifest.points.find((p) => p.name === values.bench);
  if (!point) throw new Error(`--bench ${values.bench}: no such point in ${path.join(dir, "manifest.json")}`);
  const config = { intra: threads, mode: "sequential", spin: !values["no-spin"] };
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "onnxpeer-profile-"));
  try {
    const optimised = path.join(tmp, "optimised.onnx");
    const load = await machineLoad();
    const session = await ort.InferenceSession.create(path.join(dir, manifest.models[point.model]),
      sessionOptions(config, point.dims, { enableProfiling: true, profileFilePrefix: path.join(tmp, "profile"), optimizedModelFilePath: optimised }));
    const f = feeds(ort, dir, point.inputs);
    for (let i = 0; i < warmup + runs; i++) await session.run(f);
    session.endProfiling();
    await session.release();
    const summary = summarise(readProfile(tmp), warmup);
    const graph = graphNodes(fs.readFileSync(optimised), optimised);
    const md = report({ point, config, version, exporter: manifest.exporter, opset: manifest.opset, runs, warmup, load, summary, graph });
    if (values.out) fs.writeFileSync(values.out, md);
    else process.stdout.write(md);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith("profile.mjs")) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e) => {
      log(`onnxpeer profile: ${e.message}`);
      process.exitCode = 1;
    },
  );
}
