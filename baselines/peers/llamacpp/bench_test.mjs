// The llama.cpp peer's test: its prompts, timing and output format, its
// setup guard, and that llama.cpp runs the model zbench runs (greedy
// tokens and logits of the llama-tiny GGUF goldens against the PyTorch
// reference's generation golden). Run by make peer-llamacpp-test:
//
//   scripts/install-llamacpp.sh && node --test baselines/peers/llamacpp/

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { installDir, loadLlamaCpp } from "./lib/engine.mjs";
import { zbenchProcs } from "../node/harness.mjs";
import { PCG, llamaPrompts, uniform } from "./lib/prompts.mjs";
import { GENERATE_GOLDEN, againstReference } from "./lib/reference.mjs";
import { readSafetensors } from "./lib/safetensors.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../../..");
const BENCH = path.join(HERE, "bench.mjs");
const GGUF_DIR = path.join(ROOT, "testdata/golden/llama-tiny-gguf");

// The GGUF goldens of testdata/reference/gguf.py (llama-tiny), their
// types and dtypes in zbench's names.
const GOLDENS = [
  { file: "model-f32.gguf", type: "F32", dtype: "f32" },
  { file: "model-f16.gguf", type: "F16", dtype: "f16" },
  { file: "model-q8_0.gguf", type: "Q8_0", dtype: "q8_0" },
  { file: "model-q4_0.gguf", type: "Q4_0", dtype: "w4a16" },
];

/** node runs bench.mjs with args and env added, returning its status and output. */
function bench(args, env = {}) {
  const r = spawnSync(process.execPath, [BENCH, ...args], {
    env: { ...process.env, ...env },
    encoding: "utf8",
    timeout: 600_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** rand is a seeded source for the fuzz tests: Go's PCG. */
function rand(seed) {
  const p = new PCG(BigInt(seed), 1n);
  return { int: (n) => Math.floor(p.float64() * n) };
}

describe("prompts", () => {
  test("PCG is Go's: math/rand/v2's TestPCG values for NewPCG(1, 2)", () => {
    const p = new PCG(1n, 2n);
    const want = [0xc4f5a58656eef510n, 0x9dcec3ad077dec6cn, 0xc8d04605312f8088n, 0xcbedc0dcb63ac19an, 0x3bf98798cae97950n];
    assert.deepEqual(
      want.map(() => p.uint64()),
      want,
    );
  });

  test("uniform is float32 in [-1, 1)", () => {
    const u = uniform(7, 10000);
    for (const x of u) {
      assert.ok(x >= -1 && x < 1, `${x}`);
      assert.equal(Math.fround(x), x);
    }
    const mean = u.reduce((a, b) => a + b, 0) / u.length;
    assert.ok(Math.abs(mean) < 0.05, `mean ${mean}`);
  });

  for (const tc of [
    { seed: 100128, batch: 1, n: 128, vocab: 32000 },
    { seed: 32, batch: 1, n: 32, vocab: 512 },
    { seed: 9, batch: 3, n: 5, vocab: 8 },
  ]) {
    test(`llamaPrompts(${tc.seed}, ${tc.batch}, ${tc.n}, ${tc.vocab}) is seeded, in [3, vocab-1)`, () => {
      const p = llamaPrompts(tc.seed, tc.batch, tc.n, tc.vocab);
      assert.equal(p.length, tc.batch);
      for (const row of p) {
        assert.equal(row.length, tc.n);
        for (const id of row) assert.ok(Number.isInteger(id) && id >= 3 && id < tc.vocab - 1, `${id}`);
      }
      assert.deepEqual(llamaPrompts(tc.seed, tc.batch, tc.n, tc.vocab), p);
      assert.notDeepEqual(llamaPrompts(tc.seed + 1, tc.batch, tc.n, tc.vocab), p);
    });
  }
});

describe("safetensors", () => {
  test("reads the generation golden", () => {
    const g = readSafetensors(GENERATE_GOLDEN);
    assert.deepEqual(g.tensors.get("prompt0/logits").shape.length, 2);
    assert.ok(g.tensors.get("prompt0/ids").data instanceof Int32Array);
  });

  test("fuzz: truncated and mutated files read or fail naming the file", () => {
    const good = fs.readFileSync(GENERATE_GOLDEN);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "llamacpp-peer-"));
    const file = path.join(dir, "x.safetensors");
    const r = rand(2);
    try {
      for (let i = 0; i < 300; i++) {
        let buf = Buffer.from(good.subarray(0, r.int(2) ? good.length : r.int(good.length)));
        for (let k = r.int(4); k > 0 && buf.length > 0; k--) buf[r.int(Math.min(buf.length, 600))] = r.int(256);
        fs.writeFileSync(file, buf);
        try {
          readSafetensors(file);
        } catch (err) {
          assert.ok(err.message.startsWith(file), err.message);
        }
      }
    } finally {
      fs.rmSync(dir, { recursive: true });
    }
  });
});

describe("command line and guard", () => {
  test("--check prints the configuration lines", () => {
    const r = bench(["--check"], { GOMAXPROCS: "2" });
    assert.equal(r.status, 0, r.stderr);
    for (const key of ["impl", "build", "cpu-features", "min-threads", "machine-load", "timing", "prompts", "engine-ns/op"]) {
      assert.match(r.stdout, new RegExp(`^${key}: \\S`, "m"), key);
    }
    assert.match(r.stdout, /^impl: llama\.cpp \S+ \(ggml-org\/llama\.cpp, as node-llama-cpp 3\.22\.1 reports it\)$/m);
    assert.match(r.stdout, /^build: prebuilt CPU .*ggml CPU backend libggml-cpu-\w+\.so$/m);
    assert.match(r.stdout, /^min-threads: 2 /m);
    assert.match(r.stdout, /^Unit tok\/s better=higher$/m);
    assert.match(r.stdout, /^Unit ttft-ms better=lower$/m);
  });

  for (const tc of [
    { name: "fewer threads than GOMAXPROCS", args: ["--check", "--threads", "1"], env: { GOMAXPROCS: "2" }, status: 3, err: /refusing to run: --threads 1 is fewer than the 2 cores zbench uses/ },
    { name: "fewer threads than --min-threads", args: ["--check", "--threads", "2", "--min-threads", "4"], env: {}, status: 3, err: /fewer than the 4 cores/ },
    { name: "GOMAXPROCS=1 allows one thread", args: ["--check", "--threads", "1"], env: { GOMAXPROCS: "1" }, status: 0, err: /^(llamacpp peer: the machine is busy.*\n)?$/ },
    { name: "a bad count", args: ["--count", "0", "x.gguf"], env: {}, status: 2, err: /--count 0: want a positive integer/ },
    { name: "a bad regexp", args: ["--bench", "(", "x.gguf"], env: {}, status: 2, err: /--bench \(/ },
    { name: "no file", args: [], env: {}, status: 2, err: /no GGUF file given/ },
    { name: "a missing file", args: ["--no-calibrate", "/nonexistent/m.gguf"], env: {}, status: 1, err: /\/nonexistent\/m\.gguf: no such GGUF file/ },
    { name: "--selects: a pattern of none of its benchmarks", args: ["--selects", "--bench", "BERT/dev=cpu"], env: {}, status: 1, err: /^$/ },
    { name: "--selects: an alternative that names one", args: ["--selects", "--bench", "BERT/dev=cpu|LlamaDecode/dev=cpu/dtype=w4a16"], env: {}, status: 0, err: /^$/ },
    { name: "--selects: a GPU pattern", args: ["--selects", "--bench", "Llama/dev=cuda"], env: {}, status: 1, err: /^$/ },
  ]) {
    test(tc.name, () => {
      const r = bench(tc.args, tc.env);
      assert.equal(r.status, tc.status, r.stderr);
      assert.match(r.stderr, tc.err);
    });
  }

  test("a file that is not GGUF is an error naming it", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "llamacpp-peer-"));
    const file = path.join(dir, "bad.gguf");
    try {
      fs.writeFileSync(file, "not a gguf file at all");
      const r = bench(["--no-calibrate", file]);
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, new RegExp(`${file}: llama\\.cpp cannot load it`));
    } finally {
      fs.rmSync(dir, { recursive: true });
    }
  });
});

describe("llama.cpp runs zbench's model", () => {
  let engine;
  let golden;
  before(async () => {
    engine = await loadLlamaCpp(installDir());
    golden = readSafetensors(GENERATE_GOLDEN);
  });
  after(async () => {
    await engine?.dispose();
  });

  for (const g of GOLDENS) {
    test(`${g.file}: greedy tokens and logits against the PyTorch reference`, async (t) => {
      const r = await againstReference(engine, path.join(GGUF_DIR, g.file), g.type, golden);
      t.diagnostic(`${g.file}: prompt 0 logits rel-err ${r.relErr.toExponential(2)}, teacher-forced ${r.forced} of ${r.all}`);
      assert.deepEqual(r.failures, []);
      assert.equal(r.model.dtype, g.dtype);
    });
  }
});

describe("the driver's output", () => {
  // zbench's names of the same benchmarks in -short mode (the tiny model,
  // f32, at the CPU shapes), from go test itself.
  const goNames = () => {
    const r = spawnSync(
      "go",
      ["test", "./bench_test", "-short", "-run", "^$", "-bench", "^BenchmarkLlama(Prefill|Decode|Generate)$", "-benchtime", "1x"],
      { cwd: ROOT, encoding: "utf8", env: { ...process.env, GOTOOLCHAIN: "local" }, timeout: 900_000 },
    );
    assert.equal(r.status, 0, `go test: ${r.stderr}${r.stdout}`);
    return new Set([...r.stdout.matchAll(/^(BenchmarkLlama(?:Prefill|Decode|Generate)\/\S+)\s+\d+\s/gm)].map((m) => m[1]));
  };

  test("rows under zbench's names, one per dtype, with its configuration lines", () => {
    const procs = zbenchProcs();
    const files = GOLDENS.map((g) => path.join(GGUF_DIR, g.file));
    const r = bench(["--benchtime", "1x", "--count", "2", ...files]);
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.trimEnd().split("\n");
    const rows = lines.filter((l) => l.startsWith("Benchmark"));
    const suffix = procs > 1 ? `-${procs}` : "";
    const want = GOLDENS.flatMap((g) => [
      `BenchmarkLlamaPrefill/dev=cpu/dtype=${g.dtype}/model=tiny/batch=1/seq=128${suffix}`,
      `BenchmarkLlamaDecode/dev=cpu/dtype=${g.dtype}/model=tiny/batch=1/ctx=128${suffix}`,
      `BenchmarkLlamaGenerate/dev=cpu/dtype=${g.dtype}/model=tiny/prompt=32/new=16${suffix}`,
    ]);
    assert.deepEqual(
      rows.map((l) => l.split("\t")[0]),
      want.flatMap((_, i) => (i % 3 === 0 ? [...want.slice(i, i + 3), ...want.slice(i, i + 3)] : [])),
    );
    for (const row of rows) {
      const m = /^(\S+)\t\s*1\t\s*(\d+) ns\/op((?:\t\s*[\d.]+ \S+)+)$/.exec(row);
      assert.ok(m, `not a Go benchmark line: ${row}`);
      const units = [...m[3].matchAll(/ (\S+)(?=\t|$)/g)].map((u) => u[1]);
      assert.deepEqual(units, row.startsWith("BenchmarkLlamaGenerate") ? ["ttft-ms", "tok/s", "engine-ns/op"] : ["tok/s", "engine-ns/op"], row);
    }
    // Each file's lines come before its rows.
    for (const g of GOLDENS) {
      const at = lines.indexOf(`gguf-file: ${g.file}`);
      assert.ok(at >= 0, `no gguf-file line for ${g.file}`);
      assert.match(lines[at + 1], new RegExp(`^gguf-type: ${g.type} \\(dtype=${g.dtype}; tensors: \\d+ ${g.type}(, \\d+ \\w+)*\\)$`));
      assert.match(lines[at + 2], new RegExp(`^threads: (${procs}|${procs - 1}) \\((calibrated: decode step [\\d.]+ ms at ${procs} threads|the cores zbench uses)`));
      assert.match(lines[at + 3], /^llama-context: .*flash attention auto \((enabled|disabled)\)$/);
      assert.match(lines[at + 4], new RegExp(`^BenchmarkLlamaPrefill/dev=cpu/dtype=${g.dtype}/`));
    }
    // The f32 names are zbench's.
    const names = goNames();
    for (const name of want.filter((n) => n.includes("dtype=f32/"))) assert.ok(names.has(name), `${name} is not one of zbench's: ${[...names].join(", ")}`);
  });
});
