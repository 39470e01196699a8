"""The peer's best configuration on a CPU: the settings a PyTorch user tries
(the OpenMP wait policy, OpenBLAS's pthread or OpenMP build, torch's thread
count, oneDNN), timed, the fastest kept (baselines/peers/README.md, "Best
configuration").

Two layers: a launch is what must be fixed before the process starts (the
environment: OMP_WAIT_POLICY, the libblas.so.3 that LD_LIBRARY_PATH puts
first, any --try-env), chosen per workload class by calibration children
that time one proxy benchmark each; knobs are what a running process can
change (torch.set_num_threads with the BLAS's own count, and
torch.backends.mkldnn.enabled), chosen per benchmark by a short trial
before it is measured."""

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Optional

import torch

from torchpeer.harness import log, mkldnn_state, multiarch, run_n

# The command the child processes run.
PEER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "torch_bench.py")

# How much faster a later candidate (fewer threads, oneDNN off, a launch
# other than the environment as given) must be to replace an earlier one:
# below it, trial noise would decide.
MARGIN = 0.03

# Time a knob trial spends per candidate and round; the rounds are
# interleaved (every candidate once per round) and each candidate's fastest
# round counts, so that a stall of the shared machine hits one round.
TRIAL_SECONDS = 0.05
TRIAL_ROUNDS = 3
# Ops longer than this get two rounds (ResNet-50 at batch 8, Llama decode on
# a crippled launch): the trial stays a small part of the measurement.
LONG_OP_SECONDS = 0.25

# The workload classes, by benchmark function: the settings that must be
# fixed at launch act on every OpenMP region and BLAS call of a process, so
# one launch serves a class of workloads that mix them alike, timed on one
# proxy (PROXIES). Functions not listed (workload modules added later) are
# models: class "model".
CLASSES = {
    "BenchmarkMatMul": "gemm",
    "BenchmarkKernels": "elementwise",
    "BenchmarkAttention": "model",
    "BenchmarkBERT": "model",
    "BenchmarkBERTTrain": "model",
    "BenchmarkLlamaPrefill": "model",
    "BenchmarkLlamaDecode": "model",
    "BenchmarkLlamaGenerate": "model",
    "BenchmarkLlamaLoRA": "model",
    "BenchmarkResNet": "conv",
}

# Each class's proxy: the first benchmark (of the full list, or the --short
# one) whose name starts with one of these, in order. Cheap to set up and
# a few hundred milliseconds or less per op, yet the class's mix: BERT-base
# at batch 1 runs sgemm for every linear layer and OpenMP regions for
# GELU, layer norm and softmax between them, as every transformer workload
# does (Llama's decode and LoRA included, whose own setup takes minutes);
# ResNet-50 at batch 1 runs oneDNN's convolutions and OpenMP's batch norm
# and ReLU; the 1024³ matmul is sgemm alone; GELU is an OpenMP region
# alone.
PROXIES = {
    "gemm": ("BenchmarkMatMul/dev=cpu/dtype=f32/m=1024/", "BenchmarkMatMul/dev=cpu/dtype=f32/"),
    "elementwise": ("BenchmarkKernels/op=gelu/dev=cpu/dtype=f32/",),
    "model": ("BenchmarkBERT/dev=cpu/dtype=f32/batch=1/seq=128",),
    "conv": ("BenchmarkResNet/dev=cpu/model=resnet50/dtype=f32/batch=1",),
}

def workload_class(name):
    """The class of a benchmark (CLASSES), by its function name."""
    return CLASSES.get(name.split("/", 1)[0], "model")


def proxy(names, cls):
    """The proxy benchmark of class cls among names (PROXIES), else the
    class's first benchmark."""
    for prefix in PROXIES.get(cls, ()):
        for n in names:
            if n.startswith(prefix):
                return n
    return next(n for n in names if workload_class(n) == cls)


def choose(times, order):
    """The fastest of order (candidates by preference) under times (seconds
    per op; None or missing: failed): a later candidate replaces the current
    one only when more than MARGIN faster. None when none ran."""
    best = None
    for c in order:
        t = times.get(c)
        if t is None:
            continue
        if best is None or t < times[best] * (1 - MARGIN):
            best = c
    return best


# ---------------------------------------------------------------- knobs


@dataclass(frozen=True)
class Knobs:
    """The settings changed inside a running process: torch's intra-op
    threads (and the BLAS's, set alike) and whether convolutions may use
    oneDNN (None: this torch has no oneDNN)."""

    threads: int
    mkldnn: Optional[bool] = None

    def apply(self, blas):
        torch.set_num_threads(self.threads)
        blas.set_threads(self.threads)
        if self.mkldnn is not None:
            torch.backends.mkldnn.enabled = self.mkldnn

    def label(self):
        s = f"torch-threads={self.threads}"
        if self.mkldnn is not None:
            s += " mkldnn=" + ("on" if self.mkldnn else "off")
        return s

    def config_lines(self, blas):
        lines = [f"torch-threads: {self.threads}"]
        if blas.threads is not None:
            lines.append(f"blas-threads: {blas.threads}")
        lines.append("mkldnn: " + mkldnn_state(self.mkldnn))
        return lines


def thread_counts(procs):
    """The thread counts tried: zbench's cores, then halved down to 1."""
    out = [procs]
    while out[-1] > 1:
        out.append(out[-1] // 2)
    return out


def has_mkldnn():
    return torch.backends.mkldnn.is_available()


def uses_mkldnn(op):
    """Whether op calls oneDNN (an aten::mkldnn_* op under torch's
    profiler): only then is oneDNN's switch worth a trial."""
    with torch.autograd.profiler.profile() as prof:
        op()
    return any("mkldnn" in e.name for e in prof.function_events)


def knob_candidates(threads, fixed_threads, mkldnn_used):
    """The knobs to try, the default (zbench's core count, oneDNN on) first:
    every thread count of thread_counts unless --threads fixed one, and
    oneDNN on and off where the op uses it."""
    counts = [threads] if fixed_threads else thread_counts(threads)
    if not has_mkldnn():
        return [Knobs(t, None) for t in counts]
    onednn = [True, False] if mkldnn_used else [True]
    return [Knobs(t, m) for t in counts for m in onednn]


def trial(op, sync, candidates, apply):
    """Times each candidate on op, interleaved (TRIAL_ROUNDS rounds of each
    once, TRIAL_SECONDS each), after one untimed call per candidate;
    returns {candidate: fastest round's seconds per op}."""
    apply(candidates[0])
    one = run_n(op, 1, sync)
    n = max(1, round(TRIAL_SECONDS / max(one, 1e-9)))
    rounds = 2 if one > LONG_OP_SECONDS else TRIAL_ROUNDS
    times = {}
    for c in candidates[1:]:
        apply(c)
        run_n(op, 1, sync)
    for _ in range(rounds):
        for c in candidates:
            apply(c)
            t = run_n(op, n, sync) / n
            times[c] = min(times.get(c, t), t)
    return times


def load_note():
    """The 1-minute load average against the CPUs this process may use, for
    the note on fewer threads."""
    try:
        load = os.getloadavg()[0]
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return ""
    busy = "busy" if load >= cpus / 2 else "not busy"
    return f"; load average {load:.2f} on {cpus} CPUs: the machine is {busy}"


def tune_knobs(name, op, sync, blas, threads, fixed_threads, min_threads):
    """Chooses the knobs for benchmark name (its op warm): returns (the
    chosen Knobs, {Knobs: seconds per op}). Fewer threads than zbench uses
    win only by MARGIN, and the choice is said on stderr."""
    used = has_mkldnn() and uses_mkldnn(op)
    candidates = knob_candidates(threads, fixed_threads, used)
    apply = lambda k: k.apply(blas)  # noqa: E731
    if len(candidates) == 1:
        apply(candidates[0])
        return candidates[0], {}
    times = trial(op, sync, candidates, apply)
    best = choose(times, candidates)
    apply(best)
    if best.threads < min_threads:
        full = min((t for k, t in times.items() if k.threads >= min_threads), default=None)
        vs = f" against {full * 1e3:.4g} ms at {min_threads}" if full is not None else ""
        log(f"torch_bench: {name}: torch at {best.threads} thread(s) ran faster ({times[best] * 1e3:.4g} ms per op{vs})"
            f"{load_note()}; measured with torch-threads: {best.threads}")
    return best, times


# ---------------------------------------------------------------- launches


@dataclass
class Launch:
    """An environment the peer starts a process with: env, the variables
    set (None: unset) on top of the caller's; label, how the config lines
    and stderr name it."""

    label: str
    env: dict = field(default_factory=dict)

    def environ(self, base):
        e = dict(base)
        for k, v in self.env.items():
            if v is None:
                e.pop(k, None)
            elif k == "LD_LIBRARY_PATH" and base.get(k):
                e[k] = v + ":" + base[k]
            else:
                e[k] = v
        return e

    def describe(self):
        """The peer-env: value: the variables as a shell would set them."""
        parts = [f"{k}={v}" for k, v in sorted(self.env.items()) if v is not None]
        parts += [f"-u {k}" for k, v in sorted(self.env.items()) if v is None]
        return " ".join(parts) or "(as given)"


def debian_openblas_dirs():
    """{build: directory} of Debian's OpenBLAS builds installed here
    (libopenblas0-pthread, libopenblas0-openmp), each with its
    libblas.so.3."""
    out = {}
    for build in ("pthread", "openmp"):
        d = os.path.join("/usr/lib", multiarch(), "openblas-" + build)
        if os.path.exists(os.path.join(d, "libblas.so.3")):
            out[build] = d
    return out


def launches(blas, try_env):
    """The launches to time: the wait policy as given or, when
    OMP_WAIT_POLICY is unset, the runtime's default and PASSIVE; times the
    OpenBLAS build torch loads and Debian's other installed build, when
    torch loads one of Debian's; then each --try-env (NAME=VALUE ...) on
    top of the first. The first is the environment as given. Returns
    (launches, notes on what was not tried)."""
    notes = []
    policies = [None, "PASSIVE"]
    if os.environ.get("OMP_WAIT_POLICY", "").strip():
        policies = [None]
        notes.append(f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']} kept as given")
    builds = [(blas.build or blas.name, None)]
    real = os.path.realpath(blas.path or "")
    dirs = debian_openblas_dirs()
    if builds[0][0] in dirs and os.path.dirname(real) == os.path.realpath(dirs[builds[0][0]]):
        builds += [(b, d) for b, d in dirs.items() if b != builds[0][0]]
        if len(builds) == 1:
            notes.append(f"OpenBLAS's {'openmp' if builds[0][0] == 'pthread' else 'pthread'} build is not installed "
                         "(scripts/install-python-ref.sh)")
    else:
        notes.append(f"the BLAS kept as found ({blas.name} {blas.describe()})")
    out = []
    for build, d in builds:
        for policy in policies:
            env = {}
            if policy:
                env["OMP_WAIT_POLICY"] = policy
            if d:
                env["LD_LIBRARY_PATH"] = d
            label = f"omp-wait-policy={policy or os.environ.get('OMP_WAIT_POLICY', '').strip().upper() or 'default'} blas={build}"
            out.append(Launch(label, env))
    for spec in try_env:
        env = dict(out[0].env)
        for item in spec.split():
            k, sep, v = item.partition("=")
            env[k] = v
        out.append(Launch("try-env " + spec, env))
    return out, notes


# ---------------------------------------------------------------- output


def config_key(line):
    """The key of a benchfmt configuration line, else None."""
    key, sep, _ = line.partition(": ")
    if not sep:
        key, sep = line.rstrip(":"), line.endswith(":")
    if sep and key and " " not in key and key[0].islower():
        return key
    return None


class Printer:
    """Prints benchmark output, each configuration line only when its value
    changes (a line applies to the rows after it: benchfmt) and each Unit
    line once; holds back PASS and FAIL, for one verdict at the end. After
    start (a new process's output), the keys its header lacks are cleared
    ("key:", benchfmt's deletion) before its first row."""

    def __init__(self, out=None):
        self.out = out or sys.stdout
        self.config, self.units = {}, set()
        self.header = None  # the keys of the current header, after start
        self.failed = False

    def start(self):
        self.header = set()

    def line(self, s):
        s = s.rstrip("\n")
        key = config_key(s)
        if key is not None:
            if self.header is not None:
                self.header.add(key)
            if self.config.get(key) == s:
                return
            self.config[key] = s
            print(s, file=self.out, flush=True)
            return
        if self.header is not None:
            for k in [k for k in self.config if k not in self.header]:
                del self.config[k]
                print(k + ":", file=self.out)
            self.header = None
        if s.startswith("Unit "):
            if s in self.units:
                return
            self.units.add(s)
        elif s in ("PASS", "FAIL"):
            self.failed |= s == "FAIL"
            return
        print(s, file=self.out, flush=True)

    def lines(self, ss):
        for s in ss:
            self.line(s)


def child_args(argv, *extra):
    """A child's command line: this command's arguments and the child's
    own flags."""
    return [sys.executable, PEER, *argv, "--launch-child", *extra]


def calibrate(argv, launch_list, proxies):
    """Runs each proxy under each launch, a child process per launch;
    returns {launch index: {proxy: seconds per op}} (a child that fails is
    left out, said on stderr)."""
    results = {}
    with tempfile.TemporaryDirectory(prefix="torch-bench-tune-") as tmp:
        names = os.path.join(tmp, "names.json")
        with open(names, "w") as f:
            json.dump(proxies, f)
        for i, launch in enumerate(launch_list):
            out = os.path.join(tmp, f"calibrate-{i}.json")
            t0 = time.perf_counter()
            p = subprocess.run(child_args(argv, "--names", names, "--calibrate", out),
                               env=launch.environ(os.environ), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
            if p.returncode != 0 or not os.path.exists(out):
                why = (p.stderr.strip().splitlines() or ["no output"])[-1]
                log(f"torch_bench: calibration under {launch.label} failed (exit status {p.returncode}): {why}")
                continue
            with open(out) as f:
                results[i] = json.load(f)
            log(f"torch_bench: calibrated {launch.label} in {time.perf_counter() - t0:.1f} s: " +
                ", ".join(f"{n.split('/', 1)[0]} {t * 1e3:.4g} ms" for n, t in results[i].items()))
    return results


def run_tuned(argv, bench_names, all_names, launch_list, notes, threads, fixed_threads):
    """The peer's best configuration: calibrates the launches on each
    class's proxy (from all_names, every benchmark of the run's set, so
    that a run of Llama alone is calibrated on BERT), then runs the benchmarks, in order, a child process per
    run of consecutive benchmarks with the same winning launch, and prints
    their outputs as one; returns the exit status."""
    classes = []
    for n in bench_names:
        c = workload_class(n)
        if c not in classes:
            classes.append(c)
    winner = {c: 0 for c in classes}
    tried = [launch_list[0]]
    proxies = {}
    if len(launch_list) > 1:
        proxies = {c: proxy(all_names, c) for c in classes}
        results = calibrate(argv, launch_list, sorted(set(proxies.values())))
        if not results:
            log("torch_bench: every calibration failed: running in the environment as given")
        for c in classes:
            times = {i: r.get(proxies[c]) for i, r in results.items()}
            best = choose(times, range(len(launch_list)))
            winner[c] = 0 if best is None else best
            if best is not None:
                log(f"torch_bench: {c} workloads ({proxies[c]}): {launch_list[best].label}")
        tried = launch_list
    threads_tried = "|".join(str(t) for t in ([threads] if fixed_threads else thread_counts(threads)))
    tuning = (f"fastest per workload class of launches {', '.join(l.label for l in tried)} "
              f"(calibrated on {', '.join(sorted(set(proxies.values()))) or 'none: one launch'}); "
              f"per benchmark of torch-threads {threads_tried}" +
              (", mkldnn on|off where oneDNN runs" if has_mkldnn() else ""))
    if notes:
        tuning += "; " + "; ".join(notes)
    printer = Printer()
    status = 0
    groups = []
    for n in bench_names:
        w = winner[workload_class(n)]
        if groups and groups[-1][0] == w:
            groups[-1][1].append(n)
        else:
            groups.append((w, [n]))
    with tempfile.TemporaryDirectory(prefix="torch-bench-run-") as tmp:
        for gi, (w, names) in enumerate(groups):
            path = os.path.join(tmp, f"names-{gi}.json")
            with open(path, "w") as f:
                json.dump(names, f)
            launch = launch_list[w]
            p = subprocess.Popen(child_args(argv, "--names", path, "--launch-env", launch.describe(),
                                            "--tuning", tuning),
                                 env=launch.environ(os.environ), stdout=subprocess.PIPE, text=True)
            printer.start()
            for s in p.stdout:
                printer.line(s)
            rc = p.wait()
            if rc not in (0, 1):
                log(f"torch_bench: the run under {launch.label} failed (exit status {rc})")
            if rc != 0:
                status = 1
    failed = printer.failed or status
    print("FAIL" if failed else "PASS", flush=True)
    return 1 if failed else 0

