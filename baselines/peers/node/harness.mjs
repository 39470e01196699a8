// What the Node peers (onnxpeer, llamacpp) share with go test -bench and
// with each other: --benchtime, the timing loop, Go benchmark lines, the
// --bench matching, the header lines, the cores zbench uses, the machine's
// load, the thread guard and the thread calibration.

import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

/** Exit status of a bad command line. */
export const EXIT_USAGE = 2;

/** Exit status of a run the environment or thread guard refuses (the PyTorch peer's). */
export const EXIT_REFUSED = 3;

/** The package of zbench's benchmarks, as go test prints it in "pkg:". */
export const PKG = "github.com/zbench/zbench/bench_test";

/** How much faster (as a fraction) fewer threads must run in a calibration to be chosen. */
export const FEWER_THREADS_MARGIN = 0.05;

/** The share of all CPUs that other processes may use before a run without the machine being called busy. */
export const BUSY_SHARE = 0.25;

/** UsageError is a bad command line: the peers print it with their usage and exit EXIT_USAGE. */
export class UsageError extends Error {}

/** RefusedError is a setup a peer does not run in: exit status EXIT_REFUSED. */
export class RefusedError extends Error {}

// ---------------------------------------------------------------- timing

/**
 * parseBenchtime reads go test's -benchtime: a duration ("1s", "500ms",
 * "1m30s") as {ns}, or an iteration count ("100x") as {iters}.
 * @param {string} s
 * @returns {{ns: number} | {iters: number}}
 */
export function parseBenchtime(s) {
  const x = /^(\d+)x$/.exec(s);
  if (x) {
    const iters = Number(x[1]);
    if (iters < 1) throw new UsageError(`--benchtime ${s}: the count must be at least 1`);
    return { iters };
  }
  const unit = { ns: 1, us: 1e3, "µs": 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };
  let ns = 0;
  let rest = s;
  while (rest.length > 0) {
    const m = /^(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/.exec(rest);
    if (!m) throw new UsageError(`--benchtime ${s}: want a duration (1s, 500ms) or a count (100x)`);
    ns += Number(m[1]) * unit[m[2]];
    rest = rest.slice(m[0].length);
  }
  if (!(ns > 0)) throw new UsageError(`--benchtime ${s}: want a duration (1s, 500ms) or a count (100x)`);
  return { ns };
}

/**
 * timeN is the nanoseconds that n awaited calls of op take.
 * @param {() => unknown} op
 * @param {number} n
 */
export async function timeN(op, n) {
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await op();
  return Number(process.hrtime.bigint() - start);
}

/** predictN is testing.B's predictN: the next count after last iterations took prevns, aiming at goalns. */
function predictN(goalns, last, prevns) {
  let n = Math.floor((goalns * last) / Math.max(prevns, 1));
  n += Math.floor(n / 5);
  n = Math.min(n, 100 * last);
  n = Math.max(n, last + 1);
  return Math.min(n, 1e9);
}

/**
 * measure runs op as testing.B runs a benchmark: a run of one iteration,
 * then runs of predicted counts until one takes at least the benchtime,
 * or one run of one iteration and one of exactly iters; it returns the
 * last run. reset is awaited before each run, outside the timer.
 * @param {() => unknown} op
 * @param {{ns: number} | {iters: number}} benchtime
 * @param {() => unknown} [reset]
 * @returns {Promise<{n: number, ns: number}>}
 */
export async function measure(op, benchtime, reset = () => {}) {
  const run = async (n) => {
    await reset();
    return timeN(op, n);
  };
  let n = 1;
  let ns = await run(1);
  if ("iters" in benchtime) {
    if (benchtime.iters > 1) {
      n = benchtime.iters;
      ns = await run(n);
    }
    return { n, ns };
  }
  while (ns < benchtime.ns && n < 1e9) {
    n = predictN(benchtime.ns, n, ns);
    ns = await run(n);
  }
  return { n, ns };
}

// ---------------------------------------------------------------- format

/**
 * pretty is a metric's value as Go's testing.prettyPrint formats it, except
 * that values below 1e-4, where Go keeps fewer than four significant
 * digits, are printed with four in exponent form in Go's widest field.
 * @param {number} x
 */
export function pretty(x) {
  const y = Math.abs(x);
  if (y === 0 || y >= 999.95) return x.toFixed(0).padStart(10);
  if (y >= 99.995) return x.toFixed(1).padStart(12);
  if (y >= 9.9995) return x.toFixed(2).padStart(13);
  if (y >= 0.99995) return x.toFixed(3).padStart(14);
  if (y >= 0.099995) return x.toFixed(4).padStart(15);
  if (y >= 0.0099995) return x.toFixed(5).padStart(16);
  if (y >= 0.00099995) return x.toFixed(6).padStart(17);
  if (y >= 1e-4) return x.toFixed(7).padStart(18);
  return x.toExponential(3).replace(/e([+-])(\d)$/, "e$10$2").padStart(18);
}

/**
 * formatRow is one result line in Go benchmark format: the name with the
 * "-P" suffix of procs (none when 1), the iterations, ns/op, then the
 * metrics in the order given.
 * @param {string} name the full name, "Benchmark..." and its sub-names
 * @param {number} procs the cores the name carries, as Go's carry GOMAXPROCS
 * @param {number} n iterations
 * @param {number} ns the run's nanoseconds
 * @param {[number, string][]} metrics value and unit pairs
 */
export function formatRow(name, procs, n, ns, metrics) {
  const full = procs > 1 ? `${name}-${procs}` : name;
  return [full, String(n).padStart(8), `${pretty(ns / n)} ns/op`, ...metrics.map(([v, u]) => `${pretty(v)} ${u}`)].join("\t");
}

/**
 * splitPattern is go test's splitRegexp: the pattern's alternatives (split
 * at each top-level "|"), each split at its top-level slashes into one
 * regexp per level of a name. Brackets and parentheses nest, a backslash
 * escapes the next character.
 * @param {string} pattern
 * @returns {string[][]}
 */
export function splitPattern(pattern) {
  const alts = [];
  let levels = [];
  let brackets = 0;
  let parens = 0;
  let start = 0;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\") i++;
    else if (c === "[") brackets++;
    else if (c === "]") brackets = Math.max(0, brackets - 1);
    else if (c === "(" && brackets === 0) parens++;
    else if (c === ")" && brackets === 0) parens--;
    else if ((c === "/" || c === "|") && brackets === 0 && parens === 0) {
      levels.push(pattern.slice(start, i));
      start = i + 1;
      if (c === "|") {
        alts.push(levels);
        levels = [];
      }
    }
  }
  levels.push(pattern.slice(start));
  alts.push(levels);
  return alts;
}

/**
 * makeMatcher is go test's -bench selection of a benchmark by its full
 * name: the name matches when for one alternative of splitPattern each
 * level's unanchored regexp matches the same level of the name. A name
 * with fewer levels than the alternative does not match (go test runs such
 * a benchmark only to look for sub-benchmarks, and prints no row for it).
 * A pattern that is not a regexp is a UsageError naming --bench.
 * @param {string} pattern
 * @returns {(name: string) => boolean}
 */
export function makeMatcher(pattern) {
  const alts = splitPattern(pattern).map((levels) =>
    levels.map((p) => {
      try {
        return new RegExp(p);
      } catch (err) {
        throw new UsageError(`--bench ${pattern}: ${err.message}`);
      }
    }),
  );
  return (name) => {
    const elems = name.split("/");
    return alts.some((regs) => regs.length <= elems.length && regs.every((r, i) => r.test(elems[i])));
  };
}

// ---------------------------------------------------------------- environment

/**
 * goTestCPU is the "cpu:" line's value that go test prints on this
 * machine, from a benchmark of a throwaway module, or null where go
 * cannot run it. (On x86 Go names the CPU by its CPUID brand string, which
 * virtual machines may set apart from /proc/cpuinfo and from what the
 * kernel's cpuid device reports, so asking go test is the one exact way.)
 */
function goTestCPU() {
  let dir;
  try {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "zbench-peer-cpu-"));
    fs.writeFileSync(path.join(dir, "go.mod"), "module cpuname\n\ngo 1.21\n");
    fs.writeFileSync(path.join(dir, "cpu_test.go"), 'package cpuname\n\nimport "testing"\n\nfunc BenchmarkCPU(b *testing.B) {}\n');
    const r = spawnSync("go", ["test", "-run", "^$", "-bench", ".", "-benchtime", "1x"], {
      cwd: dir,
      encoding: "utf8",
      env: { ...process.env, GOFLAGS: "", GOWORK: "off" },
      timeout: 300_000,
    });
    if (r.status !== 0) return null;
    const line = r.stdout.split("\n").find((l) => l.startsWith("cpu: "));
    return line === undefined ? null : line.slice(5);
  } catch {
    return null;
  } finally {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * cpuinfoName is Go's internal/sysinfo.osCPUInfoName: "model name" of the
 * first 512 bytes of /proc/cpuinfo, with " @ <cpu MHz>MHz" added when the
 * name carries no frequency.
 * @param {string} text the start of /proc/cpuinfo
 */
export function cpuinfoName(text) {
  let model = "";
  let mhz = "";
  for (const line of text.slice(0, 512).split("\n")) {
    const at = line.indexOf(": ");
    if (at < 0) continue;
    const key = line.slice(0, at).trim();
    if (key === "model name" || key === "Model Name") model = line.slice(at + 2);
    else if (key === "cpu MHz" || key === "CPU MHz") mhz = line.slice(at + 2);
  }
  if (model === "" || mhz === "" || /GHz|MHz/.test(model)) return model;
  return `${model} @ ${mhz}MHz`;
}

let cpuNameMemo;

/**
 * cpuName is the CPU as go test's "cpu:" line names it: what go test prints
 * (goTestCPU), or where go cannot run, Go's reading of /proc/cpuinfo
 * (cpuinfoName), which is what go test prints where CPUID has no brand
 * string.
 */
export function cpuName() {
  if (cpuNameMemo === undefined) {
    cpuNameMemo = goTestCPU();
    if (cpuNameMemo === null) {
      try {
        cpuNameMemo = cpuinfoName(fs.readFileSync("/proc/cpuinfo", "latin1"));
      } catch {
        cpuNameMemo = "";
      }
    }
  }
  return cpuNameMemo;
}

/** goarch is process.arch as Go's GOARCH names it. */
export function goarch(arch = process.arch) {
  return { x64: "amd64", ia32: "386", arm64: "arm64", arm: "arm", ppc64: "ppc64le", s390x: "s390x", riscv64: "riscv64" }[arch] ?? arch;
}

/** headerLines are the configuration lines go test prints before the rows, the same in every peer. */
export function headerLines() {
  const lines = [`goos: ${process.platform === "win32" ? "windows" : process.platform}`, `goarch: ${goarch()}`, `pkg: ${PKG}`, `cpu: ${cpuName()}`];
  const model = osCPUModel();
  if (model) lines.push(`cpu-model: ${model}`);
  return lines;
}

/**
 * osCPUModel is the OS's name of the processor, /proc/cpuinfo's first
 * "model name", as zbench's cpu-model: line gives it (scripts/machine-id.sh
 * names a baseline folder from it), or "" where there is none.
 * @returns {string}
 */
export function osCPUModel() {
  try {
    for (const line of fs.readFileSync("/proc/cpuinfo", "latin1").split("\n")) {
      const i = line.indexOf(":");
      if (i > 0 && line.slice(0, i).trim() === "model name") return line.slice(i + 1).trim();
    }
  } catch {
    // no /proc/cpuinfo: no line
  }
  return "";
}

/**
 * cgroupCPULimit is the CPU limit of this process's cgroup (cpu.max in v2,
 * the CFS quota in v1) in CPUs, or null when there is none.
 * @returns {number | null}
 */
function cgroupCPULimit() {
  let lines;
  try {
    lines = fs.readFileSync("/proc/self/cgroup", "utf8").trim().split("\n");
  } catch {
    return null;
  }
  for (const line of lines) {
    const [, controllers, dir] = line.split(":");
    try {
      if (controllers === "") {
        const [quota, period] = fs.readFileSync(path.join("/sys/fs/cgroup", dir, "cpu.max"), "utf8").trim().split(/\s+/);
        if (quota !== "max") return Number(quota) / Number(period);
      } else if (controllers.split(",").includes("cpu")) {
        const base = path.join("/sys/fs/cgroup", controllers, dir);
        const quota = Number(fs.readFileSync(path.join(base, "cpu.cfs_quota_us"), "utf8"));
        const period = Number(fs.readFileSync(path.join(base, "cpu.cfs_period_us"), "utf8"));
        if (quota > 0) return quota / period;
      }
    } catch {
      continue;
    }
  }
  return null;
}

/**
 * zbenchProcs is the cores zbench's Go benchmarks use, GOMAXPROCS as the
 * Go runtime sets it: the GOMAXPROCS environment variable when it is a
 * positive integer; else the CPUs this process may run on, lowered to the
 * cgroup's CPU limit rounded up, but not below 2.
 * @param {NodeJS.ProcessEnv} env
 * @returns {number}
 */
export function zbenchProcs(env = process.env) {
  const v = (env.GOMAXPROCS ?? "").trim();
  if (/^\d+$/.test(v) && Number(v) > 0) return Number(v);
  let n = os.availableParallelism();
  const limit = cgroupCPULimit();
  if (limit !== null && n > 1) n = Math.min(n, Math.max(2, Math.ceil(limit)));
  return n;
}

/** cpuTimes is the idle and total jiffies of all CPUs from /proc/stat. */
function cpuTimes() {
  const f = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  return { idle: f[3] + (f[4] || 0), total: f.reduce((a, b) => a + b, 0) };
}

/**
 * machineLoad samples how busy the machine is while this process waits ms
 * milliseconds: the share of all CPUs' time other processes used, the
 * 1-minute load average, the CPUs, and whether the share is above
 * BUSY_SHARE (timings are then noisy, and a spinning thread pool may stall).
 * @returns {Promise<{share: number, load1: number, cpus: number, busy: boolean}>}
 */
export async function machineLoad(ms = 1000) {
  const a = cpuTimes();
  await new Promise((r) => setTimeout(r, ms));
  const b = cpuTimes();
  const total = b.total - a.total;
  const share = total > 0 ? 1 - (b.idle - a.idle) / total : 0;
  return { share, load1: os.loadavg()[0], cpus: os.cpus().length, busy: share > BUSY_SHARE };
}

/** describeLoad is a machineLoad result in words, for stderr and the peers' configuration lines. */
export function describeLoad(l) {
  return `other processes used ${(l.share * 100).toFixed(0)}% of the ${l.cpus} CPUs in the second before the run, ` +
    `1-minute load average ${l.load1.toFixed(2)}${l.busy ? ": busy, timings are noisy" : ""}`;
}

// ---------------------------------------------------------------- threads

/**
 * checkThreads is the thread guard: a RefusedError when threads is fewer
 * than minThreads, the cores zbench uses, since engine would then be slower
 * than it can be.
 * @param {number} threads
 * @param {number} minThreads
 * @param {string} engine
 */
export function checkThreads(threads, minThreads, engine) {
  if (threads >= minThreads) return;
  throw new RefusedError(
    `--threads ${threads} is fewer than the ${minThreads} cores zbench uses (GOMAXPROCS, else the CPUs): ` +
      `${engine} would be slower than it can be. Drop --threads (the calibration takes fewer threads, recorded, where they are faster) ` +
      `or give ${minThreads} or more; if zbench ran with fewer cores, say so with GOMAXPROCS=N in the environment or --min-threads N`,
  );
}

/** median is the middle value of xs (the upper one of an even count). */
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/**
 * calibrateThreads times each candidate configuration in rounds interleaved
 * rounds (trial(c) resolves to seconds per op) and returns every
 * candidate's median and the chosen one: the fastest of those with at
 * least full threads, or one with fewer where it is FEWER_THREADS_MARGIN
 * faster than that.
 * @template C
 * @param {C[]} candidates
 * @param {{rounds: number, full: number, threads: (c: C) => number, trial: (c: C) => Promise<number>}} opts
 * @returns {Promise<{best: C, results: {c: C, times: number[], median: number}[]}>}
 */
export async function calibrateThreads(candidates, { rounds, full, threads, trial }) {
  const results = candidates.map((c) => ({ c, times: [], median: NaN }));
  for (let r = 0; r < rounds; r++) {
    for (const t of results) t.times.push(await trial(t.c));
  }
  for (const t of results) t.median = median(t.times);
  const fullOnes = results.filter((t) => threads(t.c) >= full).sort((a, b) => a.median - b.median);
  if (fullOnes.length === 0) throw new Error(`calibration: no candidate has the ${full} threads zbench uses`);
  const bar = fullOnes[0].median * (1 - FEWER_THREADS_MARGIN);
  const fewer = results.filter((t) => threads(t.c) < full && t.median < bar).sort((a, b) => a.median - b.median);
  return { best: (fewer[0] ?? fullOnes[0]).c, results };
}

/** relErr is |got - want|_2 / |want|_2 in float64 (kernels.RelErr), |got - want|_2 where want is all zeros. */
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
