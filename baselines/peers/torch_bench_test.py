#!/usr/bin/env python3
"""Tests of the PyTorch peer (torch_bench.py): its environment guard
refuses to run on the reference BLAS and with fewer threads than zbench's
cores, says why and how to fix it, and runs on OpenBLAS; its Llama
benchmarks run the reference on the tiny shape within tolerance, and --llama
hf asks for transformers where it is missing; its ResNet benchmark runs
torchvision's ResNet-50 with zbench's FLOP and byte counts, within
tolerance; its int8 cases (the W8A8 matmul, BERT-base under dynamic
quantization) run on the CPU's quantized engine with zbench's counts,
within int8's tolerances; its e4m3 and e5m2 cases (the scaled FP8
matmuls through torch._scaled_mm) say why they are skipped where torch or
the device cannot run them (Debian's torch 1.13 has no FP8 dtype), and
their scales, saturation and both forms of torch._scaled_mm (torch
2.1-2.3's and 2.4+'s, stood in for on the CPU) give benchFP8MatMul's
products. Its best configuration (--tune auto): a planted spinning pool
is not what it reports, and is clearly slower than what it reports; its
choices (the margin, the thread counts, the launches, a trial that takes
fewer threads only when faster) and its merged output, on stand-ins. The
other tests run with --tune off: the guard and the workloads, without
calibration runs.

The BLAS torch loads is chosen per run with LD_LIBRARY_PATH: a temporary
directory whose libblas.so.3 (and liblapack.so.3) link to Debian's reference
BLAS (libblas3, which python3-torch depends on) or to OpenBLAS
(libopenblas0-pthread, installed by scripts/install-python-ref.sh). Nothing
is skipped: a missing torch or library fails with what to install.

    /usr/bin/python3 baselines/peers/torch_bench_test.py    (make peer-test)
"""

import json
import math
import os
import subprocess
import sys
import sysconfig
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "torch_bench.py")
LIBDIR = "/usr/lib/" + (sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu")
SETUP = "run scripts/install-python-ref.sh (make python-ref)"

# Environment variables that would change the thread counts under test.
CLEARED = ("GOMAXPROCS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
           "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "LD_LIBRARY_PATH", "LD_PRELOAD")


def blas_dir(tmp, name, libs):
    """A directory under tmp whose entries link to libs ({name: target}),
    for LD_LIBRARY_PATH."""
    d = os.path.join(tmp, name)
    os.mkdir(d)
    for link, target in libs.items():
        if not os.path.exists(target):
            raise AssertionError(f"{target} is missing: {SETUP}")
        os.symlink(target, os.path.join(d, link))
    return d


def openblas_libdir():
    for flavour in ("openblas-pthread", "openblas-openmp"):
        d = os.path.join(LIBDIR, flavour)
        if os.path.exists(os.path.join(d, "libblas.so.3")):
            return d
    raise AssertionError(f"no OpenBLAS in {LIBDIR}/openblas-pthread or openblas-openmp: {SETUP}")


# Runs in a peer's Python: the peer's FP8 helpers (torchpeer.matmul) on the CPU, with
# float16 standing in for float8_e4m3fn and float8_e5m2 and Python
# stand-ins for both forms of torch._scaled_mm (and a GPU's compute
# capability), so that the logic runs without FP8 kernels; prints what the
# test checks, as JSON.
FP8_SCRIPT = r"""
import json, sys
import torch
sys.path.insert(0, sys.argv[1])
import torchpeer.matmul as tb  # the FP8 helpers, and the harness they import

res = {"version": torch.__version__, "has_fp8": hasattr(torch, "float8_e4m3fn")}
a = tb.uniform(1, (64, 64), torch.float32, "cpu")
for dt, m in (("e4m3", 448.0), ("e5m2", 57344.0)):
    s = tb.fp8_scale(a, dt)
    r = {"scale": [s.dtype == torch.float32, list(s.shape), s.item(), (torch.tensor(m) / a.abs().max()).item()]}
    r["sat_amax"] = tb.fp8_saturated(a, s, dt).abs().max().item()
    r["sat_edges"] = tb.fp8_saturated(torch.tensor([float("nan"), 1e30, -1e30, 0.5, 60000.0]), torch.ones(1),
                                       dt).tolist()
    r["zero_scale"] = tb.fp8_scale(torch.zeros(4, 4), dt).tolist()
    r["cases"] = {f"{'gpu' if gpu else 'cpu'}-{'short' if short else 'full'}":
                  [n for d, n, _ in tb.matmul_cases(short, gpu) if d == dt]
                  for gpu in (False, True) for short in (False, True)}
    res[dt] = r
res["order"] = [d for d, n, _ in tb.matmul_cases(False, True) if n == 8192]
native = tb.Ctx("cpu", False, False)
res["native"] = tb.fp8_config_lines(native)
res["native_e5m2"] = tb.fp8_gemm(native, "e5m2")[1]

# torch with float8_e4m3fn and _scaled_mm but no float8_e5m2: e5m2 alone is
# unsupported.
torch.float8_e4m3fn = torch.float16
torch._scaled_mm = lambda *args, **kw: 1 / 0  # must not be tried below 8.9
e5m2 = getattr(torch, "float8_e5m2", None)
if e5m2 is not None:
    del torch.float8_e5m2
res["no_e5m2"] = [tb.fp8_unsupported(tb.Ctx("cpu", False, False), dt) for dt in ("e4m3", "e5m2")]
torch.float8_e5m2 = torch.float16

torch.cuda.get_device_capability = lambda d=None: (8, 0)
torch.cuda.get_device_name = lambda d=None: "NVIDIA A100"
gpu = tb.Ctx("cpu", False, False)
gpu.cuda = True
res["sm80"] = tb.fp8_config_lines(gpu)
res["sm80_e5m2"] = tb.fp8_unsupported(gpu, "e5m2")
torch.cuda.get_device_capability = lambda d=None: (9, 0)
res["sm90"] = [tb.fp8_unsupported(gpu, dt) for dt in ("e4m3", "e5m2")]

calls = []
seen = []  # |a|'s and |b|'s largest values and a's scale, per timed product


def product(a, b, sa, sb):
    assert a.dtype == b.dtype == torch.float16 and b.stride(0) == 1, "FP8 a times column-major b"
    assert sa.dtype == sb.dtype == torch.float32 and sa.numel() == sb.numel() == 1
    if a.shape[0] == 256:
        seen.append([a.float().abs().max().item(), b.float().abs().max().item(), sa.item()])
    return (a.float() @ b.float()) * sa * sb


def modern(a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False, out=None):
    assert out_dtype == torch.float32 and not use_fast_accum
    calls.append("modern" + ("-out" if out is not None else ""))
    r = product(a, b, scale_a, scale_b)
    return r if out is None else out.copy_(r)


def legacy(a, b, *, bias=None, out_dtype=None, scale_a=None, scale_b=None, scale_result=None, use_fast_accum=False,
           out=None):
    assert out_dtype == torch.float32 and not use_fast_accum
    calls.append("legacy" + ("-out" if out is not None else ""))
    r = product(a, b, scale_a, scale_b)
    if out is None:
        return r, r.abs().amax()
    out[0].copy_(r)
    out[1].copy_(r.abs().amax())
    return out


def nokernel(*args, **kw):
    raise NotImplementedError("Could not run 'aten::_scaled_mm' with arguments from the 'CPU' backend.\nmore")


a256 = tb.uniform(1, (256, 256), torch.float32, "cpu")
for name, f in (("modern", modern), ("legacy", legacy), ("nokernel", nokernel)):
    torch._scaled_mm = f
    for alloc in (False, True):
        ctx = tb.Ctx("cpu", alloc, False)
        config = tb.fp8_config_lines(ctx)
        for dt in ("e4m3", "e5m2"):
            calls.clear()
            seen.clear()
            r = {"config": config}
            try:
                w = tb.fp8matmul_setup(ctx, 256, dt)
            except NotImplementedError as e:
                r["skip"] = str(e)
            else:
                w.op()
                r.update({"rel_err": w.check(), "flops": w.flops, "bytes": w.nbytes, "seen": seen[-1],
                          "inv_scale": (1 / tb.fp8_scale(a256, dt)).item()})
            r["calls"] = sorted(set(calls))
            res[f"{name}-{'alloc' if alloc else 'prealloc'}-{dt}"] = r


# A torch whose _scaled_mm lacks the e5m2×e4m3 mix (bfloat16 stands in
# for float8_e5m2 here, to tell a's dtype from b's): e4m3 runs, e5m2 alone
# is skipped, with the reason on the config line.
def nomix(a, b, scale_a, scale_b, out_dtype=None, out=None, **kw):
    if a.dtype != b.dtype:
        raise RuntimeError(f"mixed FP8 operands are not supported: {a.dtype} and {b.dtype}\nmore")
    return modern(a, b, scale_a, scale_b, out_dtype=out_dtype, out=out, **kw)


torch.float8_e5m2 = torch.bfloat16
torch._scaled_mm = nomix
ctx = tb.Ctx("cpu", False, False)
r = {"config": tb.fp8_config_lines(ctx)}
for dt in ("e4m3", "e5m2"):
    try:
        w = tb.fp8matmul_setup(ctx, 256, dt)
    except NotImplementedError as e:
        r[dt] = "skip: " + str(e)
    else:
        w.op()
        r[dt] = w.check()
res["nomix"] = r
print(json.dumps(res))
"""


# Runs in a peer's Python: torchpeer.tune's logic on stand-ins (timings,
# a BLAS, ops whose speed depends on the thread count); prints what the test
# checks, as JSON.
TUNE_SCRIPT = r"""
import contextlib, io, json, os, sys, time
import torch
sys.path.insert(0, sys.argv[1])
from torchpeer import tune
from torchpeer.harness import Blas, find_blas

res = {}
t = {"a": 1.0, "b": 0.98, "c": 0.5}
res["choose"] = [tune.choose(t, ["a", "b"]), tune.choose({"a": 1.0, "b": 0.975}, ["a", "b"]),
                 tune.choose({"a": 1.0, "b": 0.96}, ["a", "b"]), tune.choose({"a": None, "b": 2.0}, ["a", "b"]),
                 tune.choose({}, ["a"]), tune.choose(t, ["a", "b", "c"])]
res["thread_counts"] = [tune.thread_counts(n) for n in (1, 2, 6, 8)]
launches, notes = tune.launches(Blas("openblas", "/opt/libopenblas.so"), [])
res["launches_given"] = [[l.label, l.env] for l in launches]
os.environ["OMP_WAIT_POLICY"] = "passive"
launches, notes2 = tune.launches(Blas("mkl", "/opt/libmkl_rt.so"), ["LD_PRELOAD=/x.so"])
res["launches_kept"] = [[l.label, l.env] for l in launches]
res["launch_notes"] = notes2
del os.environ["OMP_WAIT_POLICY"]
res["debian"] = [[l.label, l.env] for l in tune.launches(find_blas(), [])[0]]

blas = Blas("openblas", "/opt/libopenblas.so")
def op_faster_at(n):
    return lambda: time.sleep(0.002 if torch.get_num_threads() == n else 0.01)
for key, n, fixed in (("one_faster", 1, False), ("two_faster", 2, False)):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        k, _ = tune.tune_knobs("BenchmarkX", op_faster_at(n), lambda: None, blas, 2, fixed, 2)
    res[key], res[key + "_log"] = k.threads, err.getvalue()
k, times = tune.tune_knobs("BenchmarkX", op_faster_at(1), lambda: None, blas, 2, True, 2)
res["fixed"] = [k.threads, len(times)]
conv = torch.nn.Conv2d(64, 64, 3, padding=1).eval()
x = torch.randn(1, 64, 56, 56)
with torch.no_grad():
    res["mkldnn"] = [tune.uses_mkldnn(lambda: conv(x)), tune.uses_mkldnn(lambda: x @ x)]

out = io.StringIO()
p = tune.Printer(out)
p.start()
p.lines(["goos: linux", "gomp-spincount: 9", "torch-threads: 2", "Unit ns/op better=lower", "BenchmarkA 1", "PASS"])
p.start()
p.lines(["goos: linux", "torch-threads: 2", "Unit ns/op better=lower", "torch-threads: 1", "BenchmarkB 1", "FAIL",
         "torch-threads: 2", "torch-threads: 2", "BenchmarkC 1"])
res["printer"], res["printer_failed"] = out.getvalue().splitlines(), p.failed
print(json.dumps(res))
"""


def rows(stdout):
    """The benchmark names of the result rows."""
    return [l.split()[0] for l in stdout.splitlines() if l.startswith("Benchmark")]


def ns_per_op(stdout):
    """The ns/op of the first result row."""
    row = next(l.split() for l in stdout.splitlines() if l.startswith("Benchmark"))
    return float(row[row.index("ns/op") - 1])


def config(stdout):
    """The key: value configuration lines of a benchmark output."""
    out = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key and " " not in key and key[0].islower():
            out[key] = value
    return out


class ReferenceDeviceTest(unittest.TestCase):
    """The Llama and LoRA references the peer runs on a GPU create every
    tensor on their input's device: run on the meta device, any tensor made
    on the CPU instead fails the operation it meets."""

    def test_llama_and_lora_off_the_cpu(self):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "testdata", "reference"))
        import torch
        import llama as llama_ref
        import lora as lora_ref
        cfg = llama_ref.LlamaConfig.from_dict(llama_ref.TINY_CONFIG)
        model = llama_ref.LlamaForCausalLM(cfg)
        lora_ref.inject(model, 8, 32, ["q_proj", "v_proj"], 0.0)
        model = model.to("meta")
        ids = torch.randint(3, cfg.vocab_size, (2, 16)).to("meta")
        logits = model(ids)
        self.assertEqual(list(logits.shape), [2, 16, cfg.vocab_size])
        self.assertEqual(lora_ref.causal_lm_loss(logits, ids).device.type, "meta")
        cache = [[None, None] for _ in range(cfg.num_hidden_layers)]
        model(ids, attention_mask=torch.ones(2, 16, dtype=torch.int64).to("meta"), past_key_values=cache)
        step = model(ids[:, :1], attention_mask=torch.ones(2, 17, dtype=torch.int64).to("meta"), past_key_values=cache)
        self.assertEqual(list(step.shape), [2, 1, cfg.vocab_size])


class GuardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        r = subprocess.run([sys.executable, "-c", "import torch, numpy"], capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError(f"{sys.executable} cannot import torch and numpy: {SETUP}\n{r.stderr}")
        cls.tmp = tempfile.TemporaryDirectory(prefix="torch-bench-test-")
        cls.reference = blas_dir(cls.tmp.name, "reference", {
            "libblas.so.3": os.path.join(LIBDIR, "blas", "libblas.so.3"),
            "liblapack.so.3": os.path.join(LIBDIR, "lapack", "liblapack.so.3"),
        })
        ob = openblas_libdir()
        # OpenBLAS's libblas.so.3 finds libopenblas.so.0 in its own
        # directory ($ORIGIN): the link's, here.
        cls.openblas = blas_dir(cls.tmp.name, "openblas", {
            lib: os.path.join(ob, lib) for lib in ("libblas.so.3", "liblapack.so.3", "libopenblas.so.0")
        })

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def peer(self, *args, libdir=None, env=None, tune=False, cpus=None, timeout=300, stdin=None):
        """Runs the peer; without tune, with --tune off (the environment and
        threads as given: the guard and the workloads under test, without
        the tuning's calibration runs); with cpus, on those CPUs alone;
        stdin, when given, is its input."""
        e = {k: v for k, v in os.environ.items() if k not in CLEARED}
        if libdir:
            e["LD_LIBRARY_PATH"] = libdir
        e.update(env or {})
        flags = [] if tune else ["--tune", "off"]
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        return subprocess.run([sys.executable, PEER, *args, *flags], capture_output=True, text=True, env=e,
                              timeout=timeout, preexec_fn=pin, input=stdin)

    def assertRefused(self, r, *messages):
        self.assertEqual(r.returncode, 3, f"want exit status 3 (refused)\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
        for m in messages:
            self.assertIn(m, r.stderr)

    def assertRuns(self, r):
        self.assertEqual(r.returncode, 0, f"want exit status 0\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")

    def test_refuses_reference_blas(self):
        r = self.peer("--check", libdir=self.reference)
        self.assertRefused(r, "refusing to run: torch calls the reference BLAS",
                           f"(via {self.reference}/libblas.so.3), which comes first from LD_LIBRARY_PATH",
                           "scripts/install-python-ref.sh", "sudo apt-get install libopenblas0-pthread",
                           "sudo update-alternatives --set libblas.so.3-", "--allow-slow-blas")
        c = config(r.stdout)
        self.assertEqual(c.get("blas"), "reference")
        self.assertIn(os.path.realpath(os.path.join(LIBDIR, "blas", "libblas.so.3")), c.get("blas-lib", ""))
        self.assertEqual(c.get("peer-usable"), "no (reference BLAS)")

    def test_refuses_before_benchmarks(self):
        r = self.peer("--short", "--benchtime", "1x", "--bench", "MatMul", libdir=self.reference)
        self.assertRefused(r, "refusing to run: torch calls the reference BLAS")
        self.assertEqual(r.stdout, "", "a refused run prints no results")

    def test_allow_slow_blas_marks_results(self):
        r = self.peer("--short", "--benchtime", "1x", "--bench", "MatMul/dev=cpu/dtype=f32/m=256/n=256/k=256/transfer=resident",
                      "--allow-slow-blas", libdir=self.reference)
        self.assertRuns(r)
        self.assertEqual(config(r.stdout).get("peer-usable"), "no (reference BLAS)")
        lines = r.stdout.splitlines()
        results = [i for i, l in enumerate(lines) if l.startswith("BenchmarkMatMul/")]
        self.assertEqual(len(results), 1, r.stdout)
        self.assertLess(lines.index("peer-usable: no (reference BLAS)"), results[0], "the mark comes before the results")
        self.assertIn("--allow-slow-blas", r.stderr)

    def test_bench_pattern_as_go_test(self):
        # go test -bench splits a pattern at its top-level | into
        # alternatives and each at / into one regexp per level: an
        # alternation of two paths selects both; a pattern of no benchmark
        # runs nothing, and the peer says so.
        r = self.peer("--short", "--benchtime", "1x", "--tune", "off",
                      "--bench", "MatMul/dev=cpu/dtype=f32/m=256$|Kernels/op=relu/dev=cpu/dtype=f32/",
                      libdir=self.openblas)
        self.assertRuns(r)
        names = rows(r.stdout)
        self.assertTrue(names and all(n.startswith(("BenchmarkMatMul/dev=cpu/dtype=f32/m=256/",
                                                    "BenchmarkKernels/op=relu/dev=cpu/dtype=f32/")) for n in names),
                        r.stdout)
        self.assertEqual({n.split("/")[0] for n in names}, {"BenchmarkMatMul", "BenchmarkKernels"}, r.stdout)
        for pattern in ("NoSuchWorkload", "MatMul/dev=nosuch|BERT/dev=cpu/dtype=nosuch"):
            r = self.peer("--short", "--benchtime", "1x", "--bench", pattern, libdir=self.openblas)
            self.assertRuns(r)
            self.assertNotIn("\nBenchmark", r.stdout)
            self.assertIn("matched no benchmark", r.stderr)

    def test_stdin_runs_each_pattern_as_it_comes(self):
        r = self.peer("--stdin", "--benchtime", "1x", "--threads", "2", "--min-threads", "2", libdir=self.openblas,
                      stdin="MatMul/dev=cpu/dtype=f32/m=1024/\nNoSuchBench\nMatMul/dev=cpu/dtype=bf16/m=1024/\n")
        self.assertRuns(r)
        rows = [l.split()[0] for l in r.stdout.splitlines() if l.startswith("Benchmark")]
        self.assertEqual([n.split("/")[2] for n in rows], ["dtype=f32", "dtype=f32", "dtype=bf16"], rows)
        self.assertEqual(sum(l.startswith("goos:") for l in r.stdout.splitlines()), 1, "one header for every pattern")
        done = [l for l in r.stderr.splitlines() if l.startswith("torch_bench: done:")]
        self.assertEqual(done, ["torch_bench: done: MatMul/dev=cpu/dtype=f32/m=1024/", "torch_bench: done: NoSuchBench",
                                "torch_bench: done: MatMul/dev=cpu/dtype=bf16/m=1024/"])
        self.assertIn("--bench 'NoSuchBench' matched no benchmark", r.stderr)

    def test_stdin_refuses_tuning(self):
        r = self.peer("--stdin", "--threads", "2", "--min-threads", "2", libdir=self.openblas, tune=True, stdin="")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--stdin runs without tuning", r.stderr)

    def test_refuses_few_threads(self):
        r = self.peer("--check", "--threads", "1", "--min-threads", "2", libdir=self.openblas)
        self.assertRefused(r, "refusing to run: torch runs 1 intra-op thread(s) while zbench uses 2 cores",
                           "--min-threads")
        self.assertNotIn("BLAS", r.stderr.split("refusing to run:", 1)[1].split("\n", 1)[0])
        c = config(r.stdout)
        self.assertEqual(c.get("torch-threads"), "1")
        self.assertEqual(c.get("min-threads"), "2")

    def test_min_threads_from_gomaxprocs(self):
        r = self.peer("--check", "--threads", "1", libdir=self.openblas, env={"GOMAXPROCS": "2"})
        self.assertRefused(r, "zbench uses 2 cores")
        r = self.peer("--check", "--threads", "1", libdir=self.openblas, env={"GOMAXPROCS": "1"})
        self.assertRuns(r)
        self.assertEqual(config(r.stdout).get("min-threads"), "1")

    def test_accepts_openblas(self):
        r = self.peer("--check", "--threads", "2", "--min-threads", "2", libdir=self.openblas)
        self.assertRuns(r)
        self.assertIn("environment ok: openblas BLAS", r.stderr)
        c = config(r.stdout)
        self.assertEqual(c.get("blas"), "openblas")
        self.assertIn("openblas", c.get("blas-lib", ""))
        self.assertIn(f"(via {self.openblas}/libblas.so.3)", c.get("blas-lib", ""))
        self.assertTrue(c.get("blas-config", "").startswith("OpenBLAS "), c)
        self.assertEqual(c.get("torch-threads"), "2")
        self.assertEqual(c.get("blas-threads"), "2")
        self.assertIn("torch-interop-threads", c)
        self.assertIn("omp-wait-policy", c)
        self.assertEqual(c.get("peer-usable"), "yes")

    def test_wait_policy_from_environment(self):
        r = self.peer("--check", "--threads", "2", "--min-threads", "2", libdir=self.openblas,
                      env={"OMP_WAIT_POLICY": "passive"})
        self.assertRuns(r)
        self.assertTrue(config(r.stdout).get("omp-wait-policy", "").startswith("PASSIVE (OMP_WAIT_POLICY"), r.stdout)

    def test_installed_setup_uses_openblas(self):
        # What make bench runs: the libblas.so.3 the system selects.
        r = self.peer("--check", "--threads", "2", "--min-threads", "2")
        self.assertEqual(r.returncode, 0, f"the installed setup is refused: {SETUP}\n{r.stderr}")
        self.assertEqual(config(r.stdout).get("blas"), "openblas", r.stdout)

    # The best configuration (--tune auto).

    def test_tuned_avoids_spinning_pool(self):
        # The spinning pool, planted for good: GOMP_SPINCOUNT=infinite
        # keeps torch's OpenMP workers spinning after every parallel region
        # whatever the wait policy (libgomp's GOMP_SPINCOUNT overrides
        # OMP_WAIT_POLICY's spin count), so that on two CPUs torch's two
        # threads and OpenBLAS's pthread worker, three busy threads, share
        # two cores at every sgemm: the setup the peer ran in by default.
        # The peer must not report it (OpenBLAS's pthread build at two
        # threads) and must beat it clearly.
        cpus = sorted(os.sched_getaffinity(0))
        self.assertGreaterEqual(len(cpus), 2, "the spinning pool needs two CPUs")
        bench = "BERT$/dev=cpu/dtype=f32/batch=1/seq=128"
        env = {"GOMP_SPINCOUNT": "infinite", "GOMAXPROCS": "2"}
        slow = self.peer("--short", "--benchtime", "3x", "--bench", bench, libdir=self.openblas, env=env,
                         cpus=cpus[:2], timeout=900)
        self.assertRuns(slow)
        c = config(slow.stdout)
        self.assertEqual((c.get("blas-build"), c.get("torch-threads"), c.get("peer-tuning")),
                         ("pthread", "2", "off (the environment and the threads as given)"), slow.stdout)
        r = self.peer("--short", "--benchtime", "3x", "--bench", bench, libdir=self.openblas, env=env, tune=True,
                      cpus=cpus[:2], timeout=900)
        self.assertRuns(r)
        c = config(r.stdout)
        for key in ("omp-wait-policy", "blas-build", "torch-threads", "mkldnn", "peer-env", "peer-tuning"):
            self.assertIn(key, c, r.stdout)
        self.assertIn(c["blas-build"], ("pthread", "openmp"), r.stdout)
        self.assertNotEqual((c["blas-build"], c["torch-threads"]), ("pthread", "2"),
                            f"the spinning pool reported as the peer's result\n{r.stdout}\n{r.stderr}")
        self.assertIn("omp-wait-policy=default blas=pthread", c["peer-tuning"])
        self.assertIn("blas=openmp", c["peer-tuning"], "libopenblas0-openmp is tried: " + SETUP)
        if c["blas-build"] == "openmp":
            self.assertIn("openblas-openmp", c["peer-env"], r.stdout)
        if c["torch-threads"] == "1":
            self.assertIn("torch at 1 thread(s) ran faster", r.stderr)
        name = "BenchmarkBERT/dev=cpu/dtype=f32/batch=1/seq=128-2"  # zbench's name at GOMAXPROCS 2
        self.assertEqual(rows(r.stdout), [name], r.stdout)
        self.assertEqual(rows(slow.stdout), [name], slow.stdout)
        self.assertLess(ns_per_op(r.stdout), 0.7 * ns_per_op(slow.stdout),
                        f"tuned\n{r.stdout}\nplanted\n{slow.stdout}")
        self.assertEqual(r.stdout.splitlines()[-1], "PASS")
        self.assertEqual(r.stdout.count("\ngoos: "), 0, "one header")

    def test_check_lists_launches(self):
        r = self.peer("--check", "--threads", "2", "--min-threads", "2", libdir=self.openblas, tune=True)
        self.assertRuns(r)
        want = ("auto, not run by --check: launches omp-wait-policy=default blas=pthread, "
                "omp-wait-policy=PASSIVE blas=pthread, omp-wait-policy=default blas=openmp, "
                "omp-wait-policy=PASSIVE blas=openmp")
        self.assertEqual(config(r.stdout).get("peer-tuning"), want, f"{r.stdout}\n{SETUP}")
        r = self.peer("--check", "--threads", "2", "--min-threads", "2", libdir=self.openblas, tune=True,
                      env={"OMP_WAIT_POLICY": "passive"})
        self.assertRuns(r)
        self.assertEqual(config(r.stdout).get("peer-tuning"),
                         "auto, not run by --check: launches omp-wait-policy=PASSIVE blas=pthread, "
                         "omp-wait-policy=PASSIVE blas=openmp; OMP_WAIT_POLICY=passive kept as given", r.stdout)

    def test_tuning_logic(self):
        # tune's choices and output on their own, in this process: the
        # margin that keeps the default unless beaten, the thread counts,
        # the launches, a trial that picks 1 thread only when it is faster
        # (and says so), oneDNN's use found by the profiler, and one
        # configuration line per change.
        e = {k: v for k, v in os.environ.items() if k not in CLEARED}
        e["LD_LIBRARY_PATH"] = self.openblas
        p = subprocess.run([sys.executable, "-c", TUNE_SCRIPT, HERE], capture_output=True, text=True, env=e,
                           timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        res = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(res["choose"], ["a", "a", "b", "b", None, "c"])
        self.assertEqual(res["thread_counts"], [[1], [2, 1], [6, 3, 1], [8, 4, 2, 1]])
        self.assertEqual(res["launches_given"], [["omp-wait-policy=default blas=openblas", {}],
                                                 ["omp-wait-policy=PASSIVE blas=openblas",
                                                  {"OMP_WAIT_POLICY": "PASSIVE"}]])
        self.assertEqual(res["launches_kept"], [["omp-wait-policy=PASSIVE blas=mkl", {}],
                                                ["try-env LD_PRELOAD=/x.so", {"LD_PRELOAD": "/x.so"}]])
        self.assertEqual(res["launch_notes"][0], "OMP_WAIT_POLICY=passive kept as given")
        self.assertIn("the BLAS kept as found (mkl", res["launch_notes"][1])
        self.assertEqual(res["debian"][0][0], "omp-wait-policy=default blas=pthread")
        self.assertIn("omp-wait-policy=PASSIVE blas=openmp", [l for l, _ in res["debian"]],
                      "libopenblas0-openmp is tried: " + SETUP)
        # 1 thread 5x faster: chosen and said; 2 threads faster: kept;
        # --threads 2 fixed: 1 is not tried.
        self.assertEqual(res["one_faster"], 1)
        self.assertIn("torch at 1 thread(s) ran faster", res["one_faster_log"])
        self.assertIn("load average", res["one_faster_log"])
        self.assertEqual(res["two_faster"], 2)
        self.assertEqual(res["two_faster_log"], "")
        self.assertEqual(res["fixed"], [2, 0], "one candidate: no trial")
        self.assertEqual(res["mkldnn"], [True, False])
        # A second process's output: its header's unchanged lines and the
        # Unit lines dropped, a key it lacks cleared before its rows.
        self.assertEqual(res["printer"], ["goos: linux", "gomp-spincount: 9", "torch-threads: 2",
                                          "Unit ns/op better=lower", "BenchmarkA 1", "gomp-spincount:",
                                          "torch-threads: 1", "BenchmarkB 1", "torch-threads: 2", "BenchmarkC 1"])
        self.assertTrue(res["printer_failed"])

    # The Llama benchmarks, on the tiny checkpoint's shape.

    def test_reference_llama(self):
        r = self.peer("--short", "--benchtime", "1x", "--threads", "2", "--min-threads", "2", "--bench", "Llama",
                      libdir=self.openblas)
        self.assertRuns(r)
        self.assertEqual(config(r.stdout).get("llama-impl"), "reference")
        rows = [l.split() for l in r.stdout.splitlines() if l.startswith("BenchmarkLlama")]
        self.assertEqual([row[0].split("/")[0] for row in rows],
                         ["BenchmarkLlamaPrefill", "BenchmarkLlamaDecode", "BenchmarkLlamaGenerate",
                          "BenchmarkLlamaLoRA"], r.stdout)
        for row in rows:
            units = {row[i + 1]: float(row[i]) for i in range(2, len(row) - 1, 2)}
            self.assertLess(units["rel-err"], 1e-4, row)
            self.assertGreater(units["tok/s"], 0, row)
        self.assertIn("ttft-ms", rows[2])

    # BenchmarkResNet, batch 1 (--short), one timed op.

    def test_resnet(self):
        r = self.peer("--short", "--benchtime", "1x", "--threads", "2", "--min-threads", "2", "--bench", "ResNet",
                      libdir=self.openblas)
        self.assertRuns(r)
        self.assertIn("Unit img/s better=higher", r.stdout.splitlines())
        self.assertEqual(config(r.stdout).get("resnet-memory-format"), "contiguous")
        rows = [l.split() for l in r.stdout.splitlines() if l.startswith("Benchmark")]
        self.assertEqual([row[0] for row in rows], ["BenchmarkResNet/dev=cpu/model=resnet50/dtype=f32/batch=1-2"],
                         r.stdout)
        row = rows[0]
        self.assertEqual(row[1], "1", "--benchtime 1x")
        units = {row[i + 1]: float(row[i]) for i in range(2, len(row) - 1, 2)}
        self.assertEqual(sorted(units), sorted(["ns/op", "GFLOP/s", "GB/s", "img/s", "rel-err"]), row)
        ns = units["ns/op"]
        self.assertAlmostEqual(units["img/s"] * ns / 1e9, 1, delta=1e-3, msg=row)  # batch 1
        # models/resnet's Config.FLOPs(1, 224, 224) and WeightBytes (with
        # torch's four BatchNorm vectors) plus the float32 input.
        self.assertAlmostEqual(units["GFLOP/s"] * ns / 8.178368512e9, 1, delta=1e-3, msg=row)
        self.assertAlmostEqual(units["GB/s"] * ns / (4 * 25610152 + 4 * 3 * 224 * 224), 1, delta=1e-3, msg=row)
        self.assertLess(units["rel-err"], 1e-5, row)  # the golden's f32_rel_err: 3.8e-7 (tolerance 1e-4)

    # The int8 cases (--short): the W8A8 matmul at 256 and BERT-base under
    # dynamic quantization, batch 1, seq 128, one timed op each.

    def test_int8(self):
        r = self.peer("--short", "--benchtime", "1x", "--threads", "2", "--min-threads", "2",
                      "--bench", "(MatMul|BERT)$/dev=cpu/dtype=int8", libdir=self.openblas)
        self.assertRuns(r)
        c = config(r.stdout)
        self.assertIn(c.get("int8-engine"), ("fbgemm", "x86", "onednn", "qnnpack"), r.stdout)
        self.assertIn(c.get("int8-reduce-range"), ("true", "false"), r.stdout)
        rows = [l.split() for l in r.stdout.splitlines() if l.startswith("Benchmark")]
        self.assertEqual([row[0] for row in rows],
                         ["BenchmarkMatMul/dev=cpu/dtype=int8/m=256/n=256/k=256/transfer=resident-2",
                          "BenchmarkBERT/dev=cpu/dtype=int8/batch=1/seq=128-2"], r.stdout)
        mm, bert = ({row[i + 1]: float(row[i]) for i in range(2, len(row) - 1, 2)} for row in rows)
        self.assertEqual(sorted(mm), sorted(["ns/op", "GFLOP/s", "GB/s", "rel-err"]), rows[0])
        # bench_test's benchQMatMul: 2n³ operations; int8 a and b read,
        # the float32 output written.
        self.assertAlmostEqual(mm["GFLOP/s"] * mm["ns/op"] / (2 * 256 ** 3), 1, delta=1e-3, msg=rows[0])
        self.assertAlmostEqual(mm["GB/s"] * mm["ns/op"] / (6 * 256 ** 2), 1, delta=1e-3, msg=rows[0])
        # 8-bit a (or 7-bit with reduce_range) and per-channel b against the
        # unquantized product: about 0.55% (0.9%), under int8's 1e-2; not
        # the exactness of a float product.
        self.assertLess(mm["rel-err"], 1e-2, rows[0])
        self.assertGreater(mm["rel-err"], 1e-3, rows[0])
        self.assertEqual(sorted(bert), sorted(["ns/op", "seq/s", "rel-err"]), rows[1])
        self.assertAlmostEqual(bert["seq/s"] * bert["ns/op"] / 1e9, 1, delta=1e-3, msg=rows[1])  # batch 1
        self.assertLess(bert["rel-err"], 5e-2, rows[1])
        self.assertGreater(bert["rel-err"], 1e-3, rows[1])

    # The FP8 cases (BenchmarkMatMul's scaled FP8 products, 1024 on CPUs:
    # e4m3, a and b in E4M3; e5m2, a in E5M2): run where torch has FP8 and
    # a CPU torch._scaled_mm, else skipped with the reason on both the
    # fp8-engine line and the SKIP line.

    def check_fp8(self, dt, err_min):
        name = f"BenchmarkMatMul/dev=cpu/dtype={dt}/m=1024/n=1024/k=1024/transfer=resident"
        r = self.peer("--benchtime", "1x", "--threads", "2", "--min-threads", "2",
                      "--bench", f"MatMul$/dev=cpu/dtype={dt}", libdir=self.openblas)
        self.assertRuns(r)
        engine = config(r.stdout).get("fp8-engine", "")
        rows = [l.split() for l in r.stdout.splitlines() if l.startswith("Benchmark")]
        # The reason (test_fp8_helpers): none (why) skips both cases;
        # torch._scaled_mm (e5m2: none (why)) the e5m2 case alone.
        mixless = "torch._scaled_mm (e5m2: none ("
        why = None
        if engine.startswith("none ("):
            why = engine[len("none ("):-1]
        elif engine.startswith(mixless) and dt == "e5m2":
            why = engine[len(mixless):-2]
        if why is not None:
            self.assertIn(f"--- SKIP: {name}: {why}\n", r.stderr)
            self.assertEqual(rows, [], r.stdout)
            self.assertIn("PASS", r.stdout.splitlines())
            return
        self.assertTrue(engine == "torch._scaled_mm" or engine.startswith(mixless), r.stdout)
        self.assertEqual([row[0] for row in rows], [name + "-2"], r.stdout)
        mm = {rows[0][i + 1]: float(rows[0][i]) for i in range(2, len(rows[0]) - 1, 2)}
        # benchFP8MatMul: 2n³; FP8 a and b read, the float32 output
        # written; FP8's rounding under 1e-1.
        self.assertAlmostEqual(mm["GFLOP/s"] * mm["ns/op"] / (2 * 1024 ** 3), 1, delta=1e-3, msg=rows[0])
        self.assertAlmostEqual(mm["GB/s"] * mm["ns/op"] / (6 * 1024 ** 2), 1, delta=1e-3, msg=rows[0])
        self.assertLess(mm["rel-err"], 1e-1, rows[0])
        self.assertGreater(mm["rel-err"], err_min, rows[0])

    def test_e4m3(self):
        self.check_fp8("e4m3", 1e-2)  # E4M3's rounding: about 3.7% here

    def test_e5m2(self):
        self.check_fp8("e5m2", 3e-2)  # E5M2 a: about 6% (zbench: 0.0606)

    def test_fp8_short_has_none(self):
        r = self.peer("--short", "--benchtime", "1x", "--threads", "2", "--min-threads", "2",
                      "--bench", "MatMul$/dev=cpu/dtype=(e4m3|e5m2)", libdir=self.openblas)
        self.assertRuns(r)
        self.assertIn("fp8-engine", config(r.stdout))
        self.assertNotIn("Benchmark", r.stdout, "bench_test's -short has no FP8 case")
        self.assertNotIn("SKIP", r.stderr)

    def test_fp8_helpers(self):
        e = {k: v for k, v in os.environ.items() if k not in CLEARED}
        e["LD_LIBRARY_PATH"] = self.openblas
        p = subprocess.run([sys.executable, "-c", FP8_SCRIPT, HERE], capture_output=True, text=True, env=e, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        res = json.loads(p.stdout.strip().splitlines()[-1])
        # s = fp8_max/amax in float32, [1]; x·s clamped to ±fp8_max (448,
        # 57344), NaN kept, 60000 saturating (torch's E5M2 cast rounds it
        # to inf).
        for dt, m in (("e4m3", 448.0), ("e5m2", 57344.0)):
            r = res[dt]
            is_f32, shape, scale, want = r["scale"]
            self.assertTrue(is_f32, dt)
            self.assertEqual(shape, [1], dt)
            self.assertEqual(scale, want, dt)
            self.assertEqual(r["sat_amax"], m, dt)
            self.assertTrue(math.isnan(r["sat_edges"][0]), r)
            self.assertEqual(r["sat_edges"][1:], [m, -m, 0.5, m], dt)
            self.assertEqual(r["zero_scale"], [1.0], dt)
            # bench_test's matmulCases.
            self.assertEqual(r["cases"], {"cpu-full": [1024], "cpu-short": [], "gpu-full": [4096, 8192],
                                          "gpu-short": []}, dt)
        self.assertEqual(res["order"], ["f16", "bf16", "int8", "e4m3", "e5m2"])
        # A torch without float8_e5m2 skips e5m2 alone.
        self.assertEqual(res["no_e5m2"], [None, f"torch {res['version']} has no torch.float8_e5m2: "
                                                "FP8 E5M2 needs torch >= 2.1"])
        # Skipped below compute capability 8.9 without trying the op; not
        # for that reason at 9.0.
        sm80 = "NVIDIA A100 is compute capability 8.0: FP8 tensor cores need 8.9"
        self.assertEqual(res["sm80"], [f"fp8-engine: none ({sm80})"])
        self.assertEqual(res["sm80_e5m2"], sm80)
        self.assertEqual(res["sm90"], [None, None])
        native = res["native"][0]
        if not res["has_fp8"]:  # Debian's torch 1.13: both skipped, one reason
            why = f"torch {res['version']} has no torch.float8_e4m3fn: FP8 E4M3 needs torch >= 2.1"
            self.assertEqual(native, f"fp8-engine: none ({why})")
            self.assertEqual(res["native_e5m2"], why)
        if native == "fp8-engine: torch._scaled_mm":
            self.assertIsNone(res["native_e5m2"])
        elif native.startswith("fp8-engine: none ("):
            self.assertEqual(native, f"fp8-engine: none ({res['native_e5m2']})")
        else:
            self.assertEqual(native, f"fp8-engine: torch._scaled_mm (e5m2: none ({res['native_e5m2']}))")
        # torch 2.4+'s form (positional scales, a tensor back) and 2.1-2.3's
        # (keyword scales, (out, amax) back), into the preallocated output
        # (out=) or a new one (--alloc): the scaled product of the cast
        # values, float16's rounding of them here; a cast with its own
        # format's scale (|qa| up to 448 or 57344), b always E4M3's.
        for form in ("modern", "legacy"):
            want_calls = {"prealloc": [form + "-out"], "alloc": [form]}
            for mode, calls in want_calls.items():
                for dt, m in (("e4m3", 448.0), ("e5m2", 57344.0)):
                    r = res[f"{form}-{mode}-{dt}"]
                    self.assertEqual(r["config"], ["fp8-engine: torch._scaled_mm"], r)
                    self.assertEqual(r["calls"], calls, r)
                    self.assertEqual(r["flops"], 2 * 256 ** 3, r)
                    self.assertEqual(r["bytes"], 6 * 256 ** 2, r)
                    self.assertLess(r["rel_err"], 1e-3, r)
                    self.assertEqual(r["seen"], [m, 448.0, r["inv_scale"]], r)
        # No kernel for the device: both skipped, the error's first line the
        # reason, once for both forms; e5m2 not tried.
        why = (f"torch {res['version']}'s _scaled_mm fails on cpu: "
               "Could not run 'aten::_scaled_mm' with arguments from the 'CPU' backend.")
        for mode in ("prealloc", "alloc"):
            for dt in ("e4m3", "e5m2"):
                r = res[f"nokernel-{mode}-{dt}"]
                self.assertEqual(r["skip"], why, r)
                self.assertEqual(r["config"], [f"fp8-engine: none ({why})"], r)
                self.assertEqual(r["calls"], [], r)
        # No e5m2×e4m3 mix: e4m3 runs, e5m2 alone is skipped, the mix's
        # error the reason.
        why = (f"torch {res['version']}'s _scaled_mm fails on cpu for float8_e5m2 a and float8_e4m3fn b: "
               "mixed FP8 operands are not supported: torch.bfloat16 and torch.float16")
        r = res["nomix"]
        self.assertEqual(r["config"], [f"fp8-engine: torch._scaled_mm (e5m2: none ({why}))"], r)
        self.assertLess(r["e4m3"], 1e-3, r)
        self.assertEqual(r["e5m2"], "skip: " + why, r)

    def test_hf_llama_needs_transformers(self):
        r = self.peer("--check", "--threads", "2", "--min-threads", "2", "--llama", "hf", libdir=self.openblas)
        try:
            import transformers
        except ImportError:
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--llama hf needs transformers (not installed)", r.stderr)
            return
        self.assertRuns(r)
        self.assertEqual(config(r.stdout).get("llama-impl"), f"transformers-{transformers.__version__}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
