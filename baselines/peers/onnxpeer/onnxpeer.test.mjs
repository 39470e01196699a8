// Tests of the ONNX Runtime peer: its helpers, the names of its
// benchmarks against zbench's, and a run of bench.mjs and profile.mjs on
// the short points (ONNX Runtime's outputs within the f32 tolerance of the
// PyTorch reference). Run with
//
//   scripts/install-onnxruntime.sh && node --test baselines/peers/onnxpeer/
//
// The runs need onnxruntime-node and the exported models; without them they
// fail, naming the install script.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";

import { EXIT_REFUSED, EXIT_USAGE } from "../node/harness.mjs";
import { BF16_NOTE, F16_NOTE, KERNEL_OPS, decodeMatMul, erf, fromHalf, gelu, kernelPoints, kernelsPoints, squareMatMul, toHalf, uniform } from "./kernels.mjs";
import { HERE, MODEL_BENCHMARKS, REPO, checkedValues, installDir, loadManifest, loadOrt, relErr, sessionOptions } from "./lib.mjs";
import { graphNodes, singleOpModel } from "./onnxgraph.mjs";
import { nodeFLOPs, summarise } from "./profile.mjs";

const MODELS = path.join(installDir(), "models");

// The committed zbench baseline whose CPU f32 BERT and ResNet names the
// peer must print.
const ZBENCH_BASELINE = path.join(REPO, "baselines", "cpu-amd-epyc-f26-2core-avx512", "zbench.txt");

// The configuration lines every run prints.
const CONFIG_KEYS = ["impl", "execution-provider", "intra-op-threads", "inter-op-threads", "execution-mode",
  "intra-op-spinning", "min-threads", "graph-optimization-level", "shapes", "opset", "exporter", "peer-usable"];

describe("helpers", () => {
  test("relErr", () => {
    assert.equal(relErr(new Float32Array([1, 2]), new Float64Array([1, 2])), 0);
    assert.ok(Math.abs(relErr(new Float32Array([3, 0]), new Float64Array([0, 4])) - 5 / 4) < 1e-12);
    assert.throws(() => relErr(new Float32Array(2), new Float64Array(3)), /2 values against 3/);
  });

  test("checkedValues takes the check's rows of each output, in order", () => {
    const results = {
      h: { data: Float32Array.from([0, 1, 2, 3, 4, 5]), dims: [3, 2] },
      p: { data: Float32Array.from([10, 11, 12]), dims: [3, 1] },
    };
    assert.deepEqual([...checkedValues(results, { outputs: ["h", "p"], rows: [0, 2] })], [0, 1, 4, 5, 10, 12]);
    assert.deepEqual([...checkedValues(results, { outputs: ["p"], rows: null })], [10, 11, 12]);
    assert.throws(() => checkedValues(results, { outputs: ["x"], rows: null }), /no output x/);
  });

  test("nodeFLOPs of convolutions and GEMMs", () => {
    assert.equal(nodeFLOPs("Conv", [[1, 64, 56, 56], [256, 64, 1, 1], [256]], [[1, 256, 56, 56]]), 2 * 56 * 56 * 256 * 64);
    assert.equal(nodeFLOPs("Gemm", [[1, 2048], [1000, 2048], [1000]], [[1, 1000]]), 2 * 1000 * 2048);
    assert.equal(nodeFLOPs("MaxPool", [[1, 64, 112, 112]], [[1, 64, 56, 56]]), 0);
  });

  test("summarise keeps the runs after the warm-up, nodes in execution order", () => {
    const node = (name, ts, dur) => ({ cat: "Node", name: `${name}_kernel_time`, ts, dur,
      args: { op_name: "Conv", provider: "CPUExecutionProvider", input_type_shape: [{ float: [1, 3, 4, 4] }, { float: [8, 3, 1, 1] }], output_type_shape: [{ float: [1, 8, 4, 4] }] } });
    const events = [
      { cat: "Session", name: "model_run", ts: 0, dur: 100 },
      node("a", 10, 50),
      { cat: "Session", name: "model_run", ts: 200, dur: 100 },
      node("b", 250, 5),
      node("a", 210, 7),
      { cat: "Session", name: "model_run", ts: 400, dur: 100 },
      node("a", 410, 9),
      node("b", 450, 3),
    ];
    const s = summarise(events, 1);
    assert.deepEqual(s.runs, [100, 100]);
    assert.deepEqual(s.nodes.map((n) => [n.name, n.us]), [["a", [7, 9]], ["b", [5, 3]]]);
    assert.deepEqual(s.nodes[0].outputs, [[1, 8, 4, 4]]);
    assert.throws(() => summarise(events, 3), /no model_run/);
  });

  test("graphNodes reads nodes and string attributes, rejects broken files", () => {
    const varint = (n) => {
      const out = [];
      while (n >= 0x80) {
        out.push((n & 0x7f) | 0x80);
        n = Math.floor(n / 128);
      }
      out.push(n);
      return out;
    };
    const field = (num, bytes) => [...varint(num * 8 + 2), ...varint(bytes.length), ...bytes];
    const str = (num, s) => field(num, [...Buffer.from(s)]);
    const attr = field(5, [...str(1, "activation"), ...varint(20 * 8 + 0), 3, ...str(4, "Relu")]);
    const conv = field(1, [...str(1, "x"), ...str(3, "conv0"), ...str(4, "Conv"), ...attr, ...str(7, "com.microsoft.nchwc")]);
    const gemm = field(1, [...str(3, "fc"), ...str(4, "Gemm")]);
    const model = Buffer.from([...varint(1 * 8 + 0), 8, ...field(7, [...conv, ...gemm, ...str(2, "graph")])]);
    assert.deepEqual(graphNodes(model), [
      { name: "conv0", opType: "Conv", domain: "com.microsoft.nchwc", attrs: { activation: "Relu" } },
      { name: "fc", opType: "Gemm", domain: "", attrs: {} },
    ]);
    assert.throws(() => graphNodes(model.subarray(0, model.length - 3), "cut.onnx"), /cut\.onnx: .*runs past the end/);
    assert.throws(() => graphNodes(Buffer.from([8, 1])), /0 graph fields/);
    assert.throws(() => graphNodes(Buffer.from([...field(7, field(1, str(3, "n")))])), /node 0 \(n\) has no op_type/);
    assert.throws(() => graphNodes(Buffer.from([0x0b])), /wire type 3/);
  });
});

function zbenchNames() {
  const names = new Set();
  for (const line of fs.readFileSync(ZBENCH_BASELINE, "utf8").split("\n")) {
    const m = /^(Benchmark(?:BERT|ResNet)\/dev=cpu\/\S*dtype=f32\S*?)(-\d+)?\s/.exec(line);
    if (m) names.add(m[1]);
  }
  return names;
}

/** A model's value of a per-model config line: "2", or "2 (bert-base), 1 (resnet50)". */
function threadsOf(value, model) {
  if (/^\d+$/.test(value)) return value;
  const m = new RegExp(`(\\d+) \\(${model}\\)`).exec(value);
  assert.ok(m, `intra-op-threads: ${value} names no ${model}`);
  return m[1];
}

function runPeer(args, env = {}) {
  const r = spawnSync(process.execPath, [path.join(HERE, "bench.mjs"), ...args], {
    encoding: "utf8",
    env: { ...process.env, ...env },
    maxBuffer: 1 << 24,
  });
  return r;
}

describe("the peer", () => {
  test("its points are zbench's CPU f32 BERT and ResNet points", () => {
    const manifest = loadManifest(MODELS);
    const want = zbenchNames();
    assert.ok(want.size >= 5, `${ZBENCH_BASELINE}: ${want.size} CPU f32 BERT and ResNet names`);
    assert.deepEqual(new Set(manifest.points.map((p) => p.name)), want);
    assert.deepEqual(new Set(MODEL_BENCHMARKS), want, "lib.mjs's MODEL_BENCHMARKS");
    const short = manifest.points.filter((p) => p.short).map((p) => p.name);
    assert.deepEqual(short.sort(), [
      "BenchmarkBERT/dev=cpu/dtype=f32/batch=1/seq=128",
      "BenchmarkResNet/dev=cpu/model=resnet50/dtype=f32/batch=1",
    ]);
  });

  test("--short prints zbench's names and units, the configuration, and ORT's outputs match the reference", () => {
    const r = runPeer(["--short", "--benchtime", "1x", "--calibrate-time", "20ms"], { GOMAXPROCS: "2" });
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.trim().split("\n");
    const config = new Map(lines.filter((l) => /^[a-z][^\s:]*: /.test(l)).map((l) => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 2)]));
    for (const key of CONFIG_KEYS) {
      assert.ok(config.has(key), `config line ${key}: missing in\n${r.stdout}`);
    }
    assert.match(config.get("impl"), /^onnxruntime-\d+\.\d+\.\d+$/);
    assert.equal(config.get("execution-provider"), "cpu");
    assert.equal(config.get("graph-optimization-level"), "all");
    assert.match(config.get("exporter"), /^torch-/);
    assert.ok(config.has("calibration-bert-base") && config.has("calibration-resnet50"), "calibration lines");
    assert.match(config.get("kernel-timing"), /^ONNX Runtime's own time/);
    const manifest = loadManifest(MODELS);
    const points = [...manifest.points, ...kernelPoints(true)];
    const rows = lines.filter((l) => l.startsWith("Benchmark"));
    assert.equal(rows.length, 2 + kernelPoints(true).length, r.stdout);
    for (const row of rows) {
      const f = row.split("\t").map((s) => s.trim());
      const m = /^(.*?)(?:-(\d+))?$/.exec(f[0]);
      const p = points.find((q) => q.name === m[1]);
      assert.ok(p && p.short, `${f[0]}: not a short point`);
      assert.equal(m[2], "2", `${f[0]}: the suffix is the cores given (GOMAXPROCS=2), as zbench's`);
      assert.ok(Number(threadsOf(config.get("intra-op-threads"), p.model)) <= 2, `${p.model}: intra-op threads`);
      assert.equal(f[1], "1");
      const metrics = new Map(f.slice(2).map((s) => s.split(/\s+/)).map(([v, u]) => [u, Number(v)]));
      assert.deepEqual([...metrics.keys()], ["ns/op", "GFLOP/s", "GB/s", ...(p.unit ? [p.unit] : []), "rel-err"]);
      assert.ok(metrics.get("ns/op") > 0);
      assert.ok(metrics.get("rel-err") <= p.tol, `${p.name}: rel-err ${metrics.get("rel-err")} over ${p.tol}`);
    }
    assert.equal(lines.at(-1), "PASS");
  });

  test("refuses fewer threads than zbench's cores", () => {
    const r = runPeer(["--short", "--threads", "1", "--bench", "ResNet"], { GOMAXPROCS: "2" });
    assert.equal(r.status, EXIT_REFUSED, r.stderr);
    assert.match(r.stderr, /refusing to run: --threads 1 is fewer than the 2 cores zbench uses/);
    assert.equal(r.stdout, "");
  });

  test("rejects bad flags naming them", () => {
    const r = runPeer(["--count", "0"]);
    assert.equal(r.status, EXIT_USAGE);
    assert.match(r.stderr, /--count "0": want a positive integer/);
  });

  test("profile.mjs summarises a profiled run", () => {
    const r = spawnSync(process.execPath, [path.join(HERE, "profile.mjs"), "--warmup", "1", "--runs", "1"], { encoding: "utf8", maxBuffer: 1 << 24 });
    assert.equal(r.status, 0, r.stderr);
    for (const section of ["## The optimised graph", "## Time by kernel", "## Convolutions by shape", "## Every node"]) {
      assert.ok(r.stdout.includes(section), section);
    }
    assert.match(r.stdout, /\| 3→64 7×7 \/2 224×224→112×112 \| 1 \|/);
  });
});

describe("single-op graphs (Kernels, MatMul)", () => {
  test("toHalf rounds to nearest even, fromHalf inverts it", () => {
    for (const [x, h] of [
      [1, 0x3c00], [-2, 0xc000], [65504, 0x7bff], [65520, 0x7c00], [-Infinity, 0xfc00], [0, 0], [2 ** -24, 1],
      [2 ** -25, 0], [3 * 2 ** -26, 1], [1 + 2 ** -11, 0x3c00], [1 + 3 * 2 ** -11, 0x3c02], [2 ** -14, 0x0400], [0.1, 0x2e66],
    ]) {
      assert.equal(toHalf(x), h, `toHalf(${x})`);
    }
    assert.equal(toHalf(NaN) & 0x7e00, 0x7e00);
    for (let h = 0; h < 0x10000; h++) {
      if ((h & 0x7c00) === 0x7c00 && h & 0x3ff) continue; // NaN
      assert.equal(toHalf(fromHalf(h)), h, `half 0x${h.toString(16)}`);
    }
  });

  test("erf and gelu against known values", () => {
    for (const [x, want] of [[0, 0], [0.5, 0.5204998778130465], [1, 0.8427007929497149], [-2, -0.9953222650189527], [3, 0.9999779095030014], [5, 0.9999999999984626]]) {
      assert.ok(Math.abs(erf(x) - want) < 1e-15, `erf(${x}) = ${erf(x)}, want ${want}`);
    }
    assert.ok(Math.abs(gelu(1) - 0.8413447460685429) < 1e-15);
    assert.ok(Math.abs(gelu(-1) + 0.15865525393145707) < 1e-15);
  });

  test("uniform is seeded, in [-1, 1), and rounded to f16 for f16", () => {
    const u = uniform(10, "f32", 10000);
    assert.deepEqual(uniform(10, "f32", 10000), u);
    assert.notDeepEqual(uniform(11, "f32", 10000), u);
    assert.ok(u.every((x) => x >= -1 && x < 1));
    const mean = u.reduce((a, b) => a + b, 0) / u.length;
    assert.ok(Math.abs(mean) < 0.05, `mean ${mean}`);
    assert.ok(uniform(10, "f16", 1000).every((x) => fromHalf(toHalf(x)) === x));
  });

  test("singleOpModel writes one node that graphNodes reads back", () => {
    const m = singleOpModel({ opType: "Gelu", opset: 23, inputs: { x: { type: "float32", shape: [2, 3] } }, outputs: { y: { type: "float32", shape: [2, 3] } },
      attrs: { approximate: "none", axis: { int: -1 }, epsilon: { float: 1e-12 } } });
    assert.deepEqual(graphNodes(Buffer.from(m)), [{ name: "gelu", opType: "Gelu", domain: "", attrs: { approximate: "none" } }]);
    assert.throws(() => singleOpModel({ opType: "Relu", opset: 23, inputs: { x: { type: "int4", shape: [1] } }, outputs: {} }), /x: element type int4/);
    assert.throws(() => singleOpModel({ opType: "Relu", opset: 23, inputs: {}, outputs: {}, attrs: { a: 1 } }), /attribute a: 1 is not/);
  });

  // Small points of every op (batch 1, seq 3; 5×5 and 7×9 products) in
  // ONNX Runtime against the float64 references.
  const { ort } = loadOrt();
  const small = [
    ...kernelsPoints(KERNEL_OPS, ["f32", "f16"], [[1, 3]], true),
    squareMatMul("f32", 5, true),
    squareMatMul("f16", 5, true),
    decodeMatMul(7, 9),
  ];
  const runCheck = async (p) => {
    const { check } = p.prepare(ort);
    const session = await ort.InferenceSession.create(p.source(), sessionOptions({ intra: 1, mode: "sequential", spin: false }, p.overrides));
    try {
      return await check(session);
    } finally {
      await session.release();
    }
  };
  for (const p of small) {
    test(`${p.name}: ONNX Runtime's output is the direct computation's`, async () => {
      const err = await runCheck(p);
      assert.ok(err <= p.tol, `rel-err ${err} over ${p.tol}`);
      assert.ok(err < 1e-3, `rel-err ${err}`);
    });
  }

  // The checks see a graph that computes something else.
  const byName = (op, dt = "f32") => small.find((p) => p.name.includes(`op=${op}/`) && p.name.includes(`dtype=${dt}/`));
  for (const [what, p, graph] of [
    ["GELU's tanh approximation", byName("gelu"), (g) => ({ ...g, attrs: { approximate: "tanh" } })],
    ["softmax over the wrong axis", byName("softmax"), (g) => ({ ...g, attrs: { axis: { int: 2 } } })],
    ["layernorm with eps 0.1", byName("layernorm"), (g) => ({ ...g, attrs: { axis: { int: -1 }, epsilon: { float: 0.1 } } })],
    ["causal attention", byName("attention"), (g) => ({ ...g, attrs: { is_causal: { int: 1 } } })],
    ["a·bᵀ for a·b", squareMatMul("f32", 5, true), (g) => ({ ...g, opType: "Gemm", attrs: { transB: { int: 1 } } })],
    ["relu as identity", byName("relu"), (g) => ({ ...g, opType: "Identity" })],
  ]) {
    test(`the check fails ${what}`, async () => {
      const err = await runCheck({ ...p, source: () => singleOpModel(graph(p.graph)) });
      assert.ok(err > 5 * p.tol, `rel-err ${err}, within five times the tolerance ${p.tol}`);
    });
  }

  test("the f16 and bf16 configuration lines say what ONNX Runtime does", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "onnxpeer-"));
    try {
      const casts = new Map();
      for (const p of small.filter((q) => q.dtype === "f16" && !q.name.includes("m=5/"))) {
        const file = path.join(dir, "opt.onnx");
        const s = await ort.InferenceSession.create(p.source(), { ...sessionOptions({ intra: 1, mode: "sequential", spin: false }), optimizedModelFilePath: file, logSeverityLevel: 3 });
        await s.release();
        casts.set(p.graph.opType, graphNodes(fs.readFileSync(file)).some((n) => n.opType === "Cast"));
      }
      const s = await ort.InferenceSession.create(squareMatMul("f16", 5, true).source(), { ...sessionOptions({ intra: 1, mode: "sequential", spin: false }), optimizedModelFilePath: path.join(dir, "mm.onnx"), logSeverityLevel: 3 });
      await s.release();
      casts.set("MatMul", graphNodes(fs.readFileSync(path.join(dir, "mm.onnx"))).some((n) => n.opType === "Cast"));
      const [native, cast] = /runs (.*) in float16 and inserts casts to float32 around (.*), which/.exec(F16_NOTE).slice(1).map((l) => l.split(/, | and /).sort());
      assert.deepEqual([...casts].filter(([, c]) => !c).map(([op]) => op).sort(), native);
      assert.deepEqual([...casts].filter(([, c]) => c).map(([op]) => op).sort(), cast);
    } finally {
      fs.rmSync(dir, { recursive: true });
    }
    assert.match(BF16_NOTE, /no bfloat16 kernels/);
    for (const p of small.filter((q) => q.dtype === "f32")) {
      const g = JSON.parse(JSON.stringify(p.graph));
      for (const t of [...Object.values(g.inputs), ...Object.values(g.outputs)]) t.type = "bfloat16";
      await assert.rejects(ort.InferenceSession.create(singleOpModel(g), { logSeverityLevel: 4 }), /implementation|Unsupported data type/, p.name);
    }
  });

  /** The work of zbench's rows of a run: FLOPs and bytes per op, from ns/op, GFLOP/s and GB/s. */
  const work = (text) => {
    const out = new Map();
    for (const line of text.split("\n")) {
      const m = /^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.e+-]+) ns\/op((?:\s+[\d.e+-]+ \S+)+)/.exec(line);
      if (!m) continue;
      const metrics = new Map([...m[3].matchAll(/([\d.e+-]+) (\S+)/g)].map((x) => [x[2], Number(x[1])]));
      out.set(m[1], { flops: metrics.get("GFLOP/s") * Number(m[2]), bytes: metrics.get("GB/s") * Number(m[2]) });
    }
    return out;
  };
  const sameWork = (points, zbench, where) => {
    for (const p of points) {
      const z = zbench.get(p.name);
      assert.ok(z, `${p.name}: not among ${where}'s rows`);
      assert.ok(Math.abs(z.flops / p.flops - 1) < 5e-3, `${p.name}: ${p.flops} FLOPs, zbench ${z.flops}`);
      assert.ok(Math.abs(z.bytes / p.bytes - 1) < 5e-3, `${p.name}: ${p.bytes} bytes, zbench ${z.bytes}`);
    }
  };

  test("the points are zbench's, with its FLOPs and bytes (the committed baseline)", () => {
    const points = kernelPoints(false);
    assert.equal(points.length, 7 + KERNEL_OPS.length * 2 * 2);
    sameWork(points, work(fs.readFileSync(ZBENCH_BASELINE, "utf8")), ZBENCH_BASELINE);
  });

  test("the -short points are zbench's, with its FLOPs and bytes (go test -short)", { timeout: 600_000 }, () => {
    const r = spawnSync("go", ["test", "./bench_test", "-short", "-run", "^$", "-bench", `^Benchmark(Kernels|MatMul)$/(op=(${KERNEL_OPS.join("|")})|dev=cpu)$`, "-benchtime", "1x"],
      { cwd: REPO, encoding: "utf8", env: { GOTOOLCHAIN: "local", ...process.env }, maxBuffer: 1 << 24 });
    assert.equal(r.status, 0, r.stderr + r.stdout);
    sameWork(kernelPoints(true), work(r.stdout), "go test -short");
  });

  for (const tc of [
    { pattern: "Kernels/op=gelu", want: 0 },
    { pattern: "MatMul/dev=cpu/dtype=f16", want: 0 },
    { pattern: "MatMul/dev=cpu/dtype=int8", want: 1 },
    { pattern: "Kernels/op=conv2d", want: 1 },
    { pattern: "Llama|Kernels/op=softmax/dev=cpu/dtype=f32/batch=1/", want: 0 },
    { pattern: "Kernels/op=softmax/dev=cpu/dtype=bf16", want: 1 },
    { pattern: "BERT/dev=cpu", want: 0 },
    { pattern: "Kernels/op=relu/dev=cuda", want: 1 },
  ]) {
    test(`--selects --bench ${tc.pattern}: exit ${tc.want}`, () => {
      const r = runPeer(["--selects", "--bench", tc.pattern]);
      assert.equal(r.status, tc.want, r.stderr);
      assert.equal(r.stdout, "");
    });
  }
});
