// Tests of the Node peers' shared harness. Run with
//
//   node --test baselines/peers/node/

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";

import {
  RefusedError,
  UsageError,
  calibrateThreads,
  checkThreads,
  cpuName,
  cpuinfoName,
  formatRow,
  headerLines,
  machineLoad,
  makeMatcher,
  measure,
  parseBenchtime,
  pretty,
  splitPattern,
  zbenchProcs,
} from "./harness.mjs";

/** rand is a seeded source for the fuzz tests (mulberry32). */
function rand(seed) {
  let a = seed >>> 0;
  return {
    int: (n) => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
    },
  };
}

describe("parseBenchtime", () => {
  for (const [text, want] of [
    ["1s", { ns: 1e9 }],
    ["500ms", { ns: 5e8 }],
    ["1m30s", { ns: 90e9 }],
    ["1.5s", { ns: 1.5e9 }],
    ["1.5m", { ns: 90e9 }],
    ["10x", { iters: 10 }],
  ]) {
    test(`parseBenchtime(${text})`, () => assert.deepEqual(parseBenchtime(text), want));
  }
  for (const text of ["", "0x", "1", "s", "1d", "-1s", "0s", "1s ", "1 s"]) {
    test(`parseBenchtime(${JSON.stringify(text)}) is a usage error naming --benchtime`, () => {
      assert.throws(() => parseBenchtime(text), (err) => err instanceof UsageError && /--benchtime/.test(err.message));
    });
  }

  test("fuzz: a duration, a count or an error naming --benchtime", () => {
    const r = rand(1);
    const alphabet = "0123456789.xmsuµh -";
    for (let i = 0; i < 5000; i++) {
      const s = Array.from({ length: r.int(8) }, () => alphabet[r.int(alphabet.length)]).join("");
      try {
        const bt = parseBenchtime(s);
        assert.ok(("ns" in bt && bt.ns > 0) || ("iters" in bt && Number.isInteger(bt.iters) && bt.iters > 0), s);
      } catch (err) {
        assert.match(err.message, /--benchtime/, s);
      }
    }
  });
});

describe("measure", () => {
  test("grows the count until a run takes the benchtime, as testing.B does", async () => {
    const runs = [];
    const op = async () => {
      runs[runs.length - 1].calls++;
      const start = process.hrtime.bigint();
      while (process.hrtime.bigint() - start < 200_000n); // 0.2 ms of work
    };
    const goal = 20e6;
    const { n, ns } = await measure(op, { ns: goal }, () => runs.push({ calls: 0 }));
    assert.ok(ns >= goal, `last run ${ns} ns, want at least ${goal}`);
    assert.equal(runs.at(-1).calls, n);
    assert.equal(runs[0].calls, 1, "the first run is one iteration");
    for (let i = 1; i < runs.length; i++) {
      assert.ok(runs[i].calls > runs[i - 1].calls && runs[i].calls <= 100 * runs[i - 1].calls, `run ${i}: ${runs[i].calls} after ${runs[i - 1].calls}`);
    }
  });

  for (const [iters, want] of [
    [1, [1]],
    [3, [1, 3]],
  ]) {
    test(`${iters}x runs one iteration, then exactly ${iters} when more`, async () => {
      const runs = [];
      const r = await measure(() => runs[runs.length - 1]++, { iters }, () => runs.push(0));
      assert.equal(r.n, iters);
      assert.deepEqual(runs, want);
    });
  }
});

describe("format", () => {
  test("pretty formats as Go's testing.prettyPrint, below 1e-4 in exponent form", () => {
    for (const [x, want] of [
      [0, "         0"],
      [12345678.9, "  12345679"],
      [123.45, "       123.5"],
      [12.345, "        12.35"],
      [1.2345, "         1.234"],
      [0.12345, "         0.1235"],
      [0.012345, "         0.01235"],
      [0.0012345, "         0.001234"],
      [0.00012346, "         0.0001235"],
      [6.448e-7, "         6.448e-07"],
    ]) {
      assert.equal(pretty(x), want, String(x));
    }
  });

  test("formatRow writes Go benchmark lines", () => {
    const row = formatRow("BenchmarkX/dev=cpu", 2, 10, 12345678, [
      [81.5, "tok/s"],
      [0.25, "ttft-ms"],
    ]);
    assert.equal(row, "BenchmarkX/dev=cpu-2\t      10\t   1234568 ns/op\t        81.50 tok/s\t         0.2500 ttft-ms");
    assert.equal(formatRow("BenchmarkX", 1, 1, 50, []), "BenchmarkX\t       1\t        50.00 ns/op");
  });

  test("headerLines are go test's", () => {
    const [goos, goarch, pkg, cpu, model] = headerLines();
    assert.equal(goos, `goos: ${process.platform}`);
    assert.match(goarch, /^goarch: (amd64|arm64)$/);
    assert.equal(pkg, "pkg: github.com/zbench/zbench/bench_test");
    assert.equal(cpu, `cpu: ${cpuName()}`);
    const want = fs.readFileSync("/proc/cpuinfo", "latin1").match(/^model name\s*:\s*(.*?)\s*$/m);
    assert.equal(model, want ? `cpu-model: ${want[1]}` : undefined, "the OS's model name, as zbench's cpu-model: line");
  });

  test("cpuName is what go test prints", { timeout: 300_000 }, () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "harness-cpu-"));
    try {
      fs.writeFileSync(path.join(dir, "go.mod"), "module x\n");
      fs.writeFileSync(path.join(dir, "x_test.go"), 'package x\n\nimport "testing"\n\nfunc BenchmarkX(b *testing.B) {\n\tfor b.Loop() {\n\t}\n}\n');
      const r = spawnSync("go", ["test", "-run", "^$", "-bench", ".", "-benchtime", "1x"], {
        cwd: dir,
        encoding: "utf8",
        env: { ...process.env, GOTOOLCHAIN: "local", GOFLAGS: "" },
      });
      assert.equal(r.status, 0, `go test: ${r.error ?? ""}${r.stderr}${r.stdout}`);
      const line = r.stdout.split("\n").find((l) => l.startsWith("cpu: "));
      assert.equal(`cpu: ${cpuName()}`, line);
    } finally {
      fs.rmSync(dir, { recursive: true });
    }
  });

  for (const tc of [
    { name: "a name with its frequency", text: "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\ncpu MHz\t\t: 2200.000\n", want: "Intel(R) Xeon(R) CPU @ 2.20GHz" },
    { name: "a name without", text: "processor\t: 0\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2095.991\n", want: "AMD EPYC @ 2095.991MHz" },
    { name: "no MHz", text: "model name\t: AMD EPYC\n", want: "AMD EPYC" },
    { name: "no name", text: "processor\t: 0\n", want: "" },
    { name: "past the first 512 bytes", text: `${"flags\t: x\n".repeat(60)}model name\t: late\n`, want: "" },
  ]) {
    test(`cpuinfoName: ${tc.name}`, () => assert.equal(cpuinfoName(tc.text), tc.want));
  }
});

describe("makeMatcher", () => {
  const resnet = "BenchmarkResNet/dev=cpu/model=resnet50/dtype=f32/batch=8";
  const bert = "BenchmarkBERT/dev=cpu/dtype=f32/batch=1/seq=128";
  const llama = "BenchmarkLlamaDecode/dev=cpu/dtype=f32/model=tiny/batch=1/ctx=128";
  for (const [pattern, name, want] of [
    [".", resnet, true],
    ["ResNet", resnet, true],
    ["ResNet/dev=cpu", resnet, true],
    ["ResNet//model=resnet(50|18)/dtype=f32/batch=8$", resnet, true],
    ["BERT", resnet, false],
    ["ResNet/dev=cuda", resnet, false],
    ["ResNet/.*/.*/.*/batch=1$", resnet, false],
    ["ResNet/dev=cpu/model=resnet50/dtype=f32/batch=8/more", resnet, false],
    ["BERT/dev=cpu", bert, true],
    ["BERT/dev=cpu", llama, false],
    ["Llama/dev=cpu", llama, true],
    ["LlamaDecode/dev=cpu/dtype=(f32|f16)/", llama, true],
    ["Decode/dtype=f32", llama, false],
    ["BenchmarkLlama(Prefill|Decode|Generate)/dev=cpu", llama, true],
    ["Decode$", llama, true],
    ["^Decode", llama, false],
    ["BERT/dev=cpu|Llama/dev=cpu", llama, true],
    ["BERT/dev=cpu|Llama/dtype=f32", llama, false],
    ["Prefill|Decode/dev=cuda", llama, false],
    ["Prefill|Decode/dev=cuda", "BenchmarkLlamaPrefill/dev=cpu", true],
  ]) {
    test(`${JSON.stringify(pattern)} ${want ? "selects" : "does not select"} ${name}`, () => assert.equal(makeMatcher(pattern)(name), want));
  }

  for (const [pattern, want] of [
    ["", [[""]]],
    ["A/b", [["A", "b"]]],
    ["A/b|C", [["A", "b"], ["C"]]],
    ["A(x|y)/[/|]b\\/c", [["A(x|y)", "[/|]b\\/c"]]],
    ["A]/b", [["A]", "b"]]],
  ]) {
    test(`splitPattern(${JSON.stringify(pattern)})`, () => assert.deepEqual(splitPattern(pattern), want));
  }

  test("a pattern that is not a regexp is a usage error naming --bench", () => {
    assert.throws(() => makeMatcher("BERT/("), (err) => err instanceof UsageError && /^--bench BERT\/\(/.test(err.message));
  });

  test("selects what go test -bench selects", { timeout: 300_000 }, () => {
    // The Go side of the same names, from the go test run of a throwaway module.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "harness-match-"));
    const names = [resnet, bert, llama, "BenchmarkLlamaPrefill/dev=cpu/dtype=f16/model=tiny/batch=1/seq=128"];
    const patterns = [".", "BERT/dev=cpu", "Llama/dev=cpu", "Llama/dev=cpu/dtype=f16", "ResNet|BERT", "Prefill|Decode/dev=cpu/dtype=f32", "ResNet/dev=cpu/model=resnet50/dtype=f32/batch=8/x", "^$", "LlamaDecode//dtype=f32$"];
    try {
      const levels = (n) => n.split("/");
      const body = names
        .map((n) => {
          const [top, ...subs] = levels(n);
          const nest = subs.reduceRight((inner, s) => `b.Run(${JSON.stringify(s)}, func(b *testing.B) {\n${inner}\n})`, "for b.Loop() {\n}");
          return `func ${top}(b *testing.B) {\n${nest}\n}\n`;
        })
        .join("\n");
      fs.writeFileSync(path.join(dir, "go.mod"), "module x\n");
      fs.writeFileSync(path.join(dir, "x_test.go"), `package x\n\nimport "testing"\n\n${body}`);
      for (const p of patterns) {
        const r = spawnSync("go", ["test", "-run", "^$", "-bench", p, "-benchtime", "1x"], {
          cwd: dir,
          encoding: "utf8",
          env: { ...process.env, GOTOOLCHAIN: "local", GOFLAGS: "", GOMAXPROCS: "1" },
        });
        assert.equal(r.status, 0, `go test -bench ${p}: ${r.error ?? ""}${r.stderr}${r.stdout}`);
        const goRows = [...r.stdout.matchAll(/^(Benchmark\S+)\s+\d+\s/gm)].map((m) => m[1]).sort();
        const ours = names.filter(makeMatcher(p)).sort();
        assert.deepEqual(ours, goRows, p);
      }
    } finally {
      fs.rmSync(dir, { recursive: true });
    }
  });
});

describe("environment", () => {
  test("zbenchProcs is GOMAXPROCS when set, else the CPUs (at least 1)", () => {
    assert.equal(zbenchProcs({ GOMAXPROCS: "3" }), 3);
    assert.equal(zbenchProcs({ GOMAXPROCS: " 4 " }), 4);
    for (const v of [undefined, "", "0", "x", "-1"]) {
      const n = zbenchProcs(v === undefined ? {} : { GOMAXPROCS: v });
      assert.ok(n >= 1 && n <= os.availableParallelism(), `${v}: ${n}`);
    }
  });

  test("machineLoad is a share of the CPUs and the load average", async () => {
    const l = await machineLoad(50);
    assert.ok(l.share >= 0 && l.share <= 1, `share ${l.share}`);
    assert.ok(l.load1 >= 0 && l.cpus >= 1);
    assert.equal(l.busy, l.share > 0.25);
  });
});

describe("threads", () => {
  test("checkThreads refuses fewer threads than zbench's cores, naming the fix", () => {
    assert.doesNotThrow(() => checkThreads(2, 2, "E"));
    assert.doesNotThrow(() => checkThreads(4, 2, "E"));
    assert.throws(
      () => checkThreads(1, 2, "E"),
      (err) => err instanceof RefusedError && /^--threads 1 is fewer than the 2 cores zbench uses .*E would be slower.*GOMAXPROCS=N.*--min-threads N$/.test(err.message),
    );
  });

  const trialOf = (times) => {
    const left = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, [...v]]));
    const order = [];
    return { order, trial: async (c) => (order.push(c), left[c].shift()) };
  };
  for (const tc of [
    { name: "full threads when fewer are not 5% faster", times: { 2: [10, 10, 10], 1: [9.6, 9.6, 9.6] }, want: 2 },
    { name: "fewer threads when 5% faster", times: { 2: [10, 10, 10], 1: [9.4, 9.4, 9.4] }, want: 1 },
    { name: "the median of the rounds, not one good round", times: { 2: [10, 10, 10], 1: [5, 11, 11] }, want: 2 },
    { name: "the fastest of several fewer", times: { 4: [10, 10, 10], 3: [9, 9, 9], 2: [8, 8, 8] }, want: 2 },
  ]) {
    test(`calibrateThreads: ${tc.name}`, async () => {
      const cands = Object.keys(tc.times).map(Number).sort((a, b) => b - a);
      const { order, trial } = trialOf(tc.times);
      const { best, results } = await calibrateThreads(cands, { rounds: 3, full: cands[0], threads: (c) => c, trial });
      assert.equal(best, tc.want);
      assert.deepEqual(order, [...cands, ...cands, ...cands], "interleaved rounds");
      assert.deepEqual(results.map((r) => r.c), cands);
    });
  }

  test("calibrateThreads takes the fastest configuration with full threads", async () => {
    const cands = [{ t: 2, id: "a" }, { t: 2, id: "b" }, { t: 1, id: "c" }];
    const times = { a: 10, b: 8, c: 7.8 };
    const { best } = await calibrateThreads(cands, { rounds: 1, full: 2, threads: (c) => c.t, trial: async (c) => times[c.id] });
    assert.equal(best.id, "b");
  });

  test("calibrateThreads without a candidate of full threads is an error", async () => {
    await assert.rejects(calibrateThreads([1], { rounds: 1, full: 2, threads: (c) => c, trial: async () => 1 }), /no candidate has the 2 threads/);
  });
});
