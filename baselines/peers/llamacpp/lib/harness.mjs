// What the llama.cpp peer shares with go test -bench: timing, the Go
// benchmark format, and the cores zbench uses.

import fs from "node:fs";
import os from "node:os";

/**
 * parseBenchtime reads go test's -benchtime: a duration ("1s", "500ms",
 * "1m30s") or an iteration count ("100x").
 * @param {string} s
 * @returns {{ns: number} | {iters: number}}
 */
export function parseBenchtime(s) {
  const x = /^(\d+)x$/.exec(s);
  if (x) {
    const iters = Number(x[1]);
    if (iters < 1) throw new Error(`--benchtime ${s}: the count must be at least 1`);
    return { iters };
  }
  const unit = { ns: 1, us: 1e3, "µs": 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };
  let ns = 0;
  let rest = s;
  while (rest.length > 0) {
    const m = /^(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/.exec(rest);
    if (!m) throw new Error(`--benchtime ${s}: want a duration (1s, 500ms) or a count (100x)`);
    ns += Number(m[1]) * unit[m[2]];
    rest = rest.slice(m[0].length);
  }
  if (!(ns > 0)) throw new Error(`--benchtime ${s}: want a duration (1s, 500ms) or a count (100x)`);
  return { ns };
}

/**
 * predictN is testing.B's predictN: the next iteration count, aiming at
 * goalns from the last run of prevIters iterations in prevns.
 */
function predictN(goalns, prevIters, prevns, last) {
  if (prevns <= 0) prevns = 1;
  let n = Math.floor((goalns * prevIters) / prevns);
  n += Math.floor(n / 5);
  n = Math.min(n, 100 * last);
  n = Math.max(n, last + 1);
  return Math.min(n, 1e9);
}

/**
 * measure runs op as testing.B runs a benchmark: a run of one iteration,
 * then runs of predicted counts until one takes at least the benchtime
 * (or exactly iters iterations), and returns the last run; reset is
 * called before each run.
 * @param {() => Promise<void>} op
 * @param {{ns: number} | {iters: number}} benchtime
 * @param {() => Promise<void> | void} [reset]
 * @returns {Promise<{n: number, ns: number}>}
 */
export async function measure(op, benchtime, reset = () => {}) {
  const runN = async (n) => {
    await reset();
    const start = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await op();
    return Number(process.hrtime.bigint() - start);
  };
  if ("iters" in benchtime) return { n: benchtime.iters, ns: await runN(benchtime.iters) };
  let n = 1;
  let ns = await runN(1);
  while (ns < benchtime.ns && n < 1e9) {
    n = predictN(benchtime.ns, n, ns, n);
    ns = await runN(n);
  }
  return { n, ns };
}

/** prettyMetric formats a metric's value as testing.BenchmarkResult does. */
function prettyMetric(x, unit) {
  const y = Math.abs(x);
  let [width, digits] = [18, 7];
  if (y === 0 || y >= 999.95) [width, digits] = [10, 0];
  else if (y >= 99.995) [width, digits] = [12, 1];
  else if (y >= 9.9995) [width, digits] = [13, 2];
  else if (y >= 0.99995) [width, digits] = [14, 3];
  else if (y >= 0.099995) [width, digits] = [15, 4];
  else if (y >= 0.0099995) [width, digits] = [16, 5];
  else if (y >= 0.00099995) [width, digits] = [17, 6];
  return `${x.toFixed(digits).padStart(width)} ${unit}`;
}

/**
 * formatRow is one result line in Go benchmark format: the name with the
 * "-P" suffix of procs (none when 1), iterations, ns/op, then the metrics.
 * @param {string} name the full name, "Benchmark..." and its sub-names
 * @param {number} procs
 * @param {number} n iterations
 * @param {number} ns the run's nanoseconds
 * @param {[number, string][]} metrics value and unit pairs
 */
export function formatRow(name, procs, n, ns, metrics) {
  const full = procs > 1 ? `${name}-${procs}` : name;
  const perOp = ns / n;
  const nsop = perOp >= 100 ? Math.round(perOp).toString().padStart(12) : perOp.toFixed(2).padStart(12);
  return [full, String(n).padStart(8), `${nsop} ns/op`, ...metrics.map(([v, u]) => prettyMetric(v, u))].join("\t");
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
    const [, controllers, path] = line.split(":");
    try {
      if (controllers === "") {
        const [quota, period] = fs.readFileSync(`/sys/fs/cgroup${path}/cpu.max`, "utf8").trim().split(/\s+/);
        if (quota !== "max") return Number(quota) / Number(period);
      } else if (controllers.split(",").includes("cpu")) {
        const base = `/sys/fs/cgroup/${controllers}${path}`;
        const quota = Number(fs.readFileSync(`${base}/cpu.cfs_quota_us`, "utf8"));
        const period = Number(fs.readFileSync(`${base}/cpu.cfs_period_us`, "utf8"));
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

/**
 * machineLoad is the 1-minute load average against the CPUs, and whether
 * other work is running (load at least 0.5): timings are then noisy, and a
 * spinning thread pool may stall.
 * @returns {{load: number, cpus: number, busy: boolean}}
 */
export function machineLoad() {
  const load = os.loadavg()[0];
  return { load, cpus: os.availableParallelism(), busy: load >= 0.5 };
}
