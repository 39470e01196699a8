"""What every workload of the peer shares: timing as go test -bench does it, the
environment guard and its configuration lines, the run context and the
helpers (seeded inputs, relative error, work counts)."""

import argparse
import copy
import ctypes
import gc
import inspect
import math
import os
import platform
import re
import sys
import sysconfig
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F

# The BERT modules and seeded weights of the golden reference.
REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
REFERENCE_DIR = os.path.join(REPO_DIR, "testdata", "reference")
sys.path.insert(0, REFERENCE_DIR)
import bert as bert_ref  # noqa: E402
import llama as llama_ref  # noqa: E402
import llama_hf_check  # noqa: E402
import lora as lora_ref  # noqa: E402

PKG = "github.com/zbench/zbench/bench_test"

# BERT-base dimensions.
HIDDEN, HEADS, HEAD_D, FFN, LN_EPS = 768, 12, 64, 3072, 1e-12

# tf32 is float32 storage with TF32 tensor-core matmuls (BenchmarkMatMul on
# GPUs only); int8 is the int8 operands of BenchmarkMatMul's W8A8 product
# (its output is float32) and BenchmarkBERT's int8 linear layers. e4m3 and
# e5m2 (BenchmarkMatMul's FP8 products) are not here: torch.float8_e4m3fn
# and float8_e5m2 are torch >= 2.1's (FP8_FORMATS, fp8matmul_setup).
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32,
          "int8": torch.int8}

# Largest rel-err accepted per dtype: kernels.Tolerance; tf32 (10-bit
# mantissas in) gets f16's, as in bench_test; int8 is bench_test's
# int8MatMulErr, for the W8A8 product against the float32 product of the
# unquantized inputs (per-tensor int8 of uniform values errs by about 0.4%
# per element, 0.6% in a product); e4m3 and e5m2 are kernels.Tolerance(E4M3)
# and (E5M2), for the scaled FP8 products against the float32 product of
# the values before the cast (E4M3's three mantissa bits cost about 3% per
# product, e5m2's E5M2 a with its two about twice that).
TOLERANCE = {"f32": 2e-5, "f16": 2e-3, "bf16": 1.6e-2, "tf32": 2e-3, "int8": 1e-2, "e4m3": 1e-1, "e5m2": 1e-1}

# Largest rel-err accepted for a whole model's outputs (BenchmarkBERT,
# BenchmarkBERTTrain): five times the single ops' for the 16-bit dtypes;
# mixed (float16 attention core) gets f16's; int8 (BERT's linear layers
# quantized, against the float64 model of the unquantized weights) five
# times the int8 matmul's.
MODEL_TOLERANCE = {"f32": 2e-5, "f16": 1e-2, "bf16": 8e-2, "mixed": 1e-2, "int8": 5e-2}

# The int8 scheme's largest magnitude (kernels.QMax): symmetric, the narrow
# range [-127, 127], zero points 0.
QMAX = 127

# FP8 E4M3's largest finite value (kernels.FP8Max(E4M3)): OCP's "e4m3fn",
# no infinities, torch.float8_e4m3fn.
E4M3_MAX = 448.0

# FP8 E5M2's largest finite value (kernels.FP8Max(E5M2)): OCP's E5M2, with
# infinities, torch.float8_e5m2.
E5M2_MAX = 57344.0

# BenchmarkMatMul's FP8 dtypes, a's format in the scaled product (b is
# always E4M3): the name of its torch dtype (torch >= 2.1) and its largest
# finite value.
FP8_FORMATS = {"e4m3": ("float8_e4m3fn", E4M3_MAX), "e5m2": ("float8_e5m2", E5M2_MAX)}

# The compute capability of NVIDIA's FP8 tensor cores (Ada 8.9, Hopper
# 9.0 and newer), below which the FP8 cases are skipped, as zbench's CUDA
# backend skips it (kernels.FP8.FP8Supported).
FP8_MIN_CAPABILITY = (8, 9)

# The quantized engines of the CPU int8 cases, the first this torch has
# (torch.backends.quantized.supported_engines): fbgemm (x86), x86 (torch
# 2's fbgemm-or-oneDNN), onednn (Debian's torch 1.13 is built without
# fbgemm), qnnpack (ARM).
INT8_ENGINES = ("fbgemm", "x86", "onednn", "qnnpack")

# Exit status of a run the environment check refuses (see Env).
EXIT_REFUSED = 3

# L2 size assumed when torch cannot tell it (its device properties have
# L2_cache_size from torch 2.x on).
DEFAULT_L2_BYTES = 50 << 20

# Unit metadata as golang.org/x/perf/benchfmt parses it (lower-case keys),
# the same lines as zbench.Units.
UNITS = [
    "Unit GFLOP/s better=higher",
    "Unit GB/s better=higher",
    "Unit img/s better=higher",
    "Unit seq/s better=higher",
    "Unit tok/s better=higher",
    "Unit ttft-ms better=lower",
    "Unit rel-err better=lower assume=exact",
    "Unit peak-B better=lower assume=exact",
]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- timing


def parse_benchtime(s):
    """Go's -benchtime: a duration ("1s", "500ms", "1.5m") or "Nx"."""
    m = re.fullmatch(r"(\d+)x", s)
    if m:
        n = int(m.group(1))
        if n < 1:
            raise argparse.ArgumentTypeError(f"invalid count {s!r}")
        return ("n", n)
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    m = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)", s)
    if not m:
        raise argparse.ArgumentTypeError(f"invalid duration {s!r}: want e.g. 1s, 500ms or 10x")
    return ("d", float(m.group(1)) * units[m.group(2)])


def run_n(fn, n, sync):
    """Times n calls of fn, the device synchronised after each call inside
    the timer, as zbench.Measure does: ns/op is what a caller waits."""
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
        sync()
    return time.perf_counter() - t0


def run_n_cold(fn, n, sync, flush):
    """Times n calls of fn with the caches flushed before each: the flush
    and a synchronize run outside the timer (b.StopTimer in Go), and each
    call is timed on its own, fn and synchronize inside the timer."""
    total = 0.0
    for _ in range(n):
        flush()
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        total += time.perf_counter() - t0
    return total


def measure(fn, benchtime, sync, flush=None):
    """Returns (iterations, seconds) of the last timed loop, grown as
    testing.B.launch grows b.N: predict the count that fills the benchtime
    from the previous loop, run 1.2x that, at most 100x the previous count
    and at least one more, until a loop lasts the benchtime. With flush
    (cache=cold) the seconds are the timed calls' alone, without the
    flushes, as testing.B counts only the time its timer ran."""
    if flush is not None:
        timed = lambda k: run_n_cold(fn, k, sync, flush)
    else:
        timed = lambda k: run_n(fn, k, sync)
    kind, val = benchtime
    n = 1
    dt = timed(n)  # testing.B's run1
    if kind == "n":
        if val > 1:
            n = val
            dt = timed(n)
        return n, dt
    while dt < val and n < 1_000_000_000:
        last = n
        prev = max(dt, 1e-9)
        n = int(val * last / prev)
        n += n // 5
        n = min(n, 100 * last)
        n = max(n, last + 1)
        n = min(n, 1_000_000_000)
        dt = timed(n)
    return n, dt


def pretty(x):
    """Formats a metric as Go's testing.prettyPrint does, but keeps small
    values (rel-err) in exponent form rather than rounding them to 0."""
    y = abs(x)
    if y == 0 or y >= 999.95:
        return f"{x:10.0f}"
    if y >= 99.995:
        return f"{x:12.1f}"
    if y >= 9.9995:
        return f"{x:13.2f}"
    if y >= 0.99995:
        return f"{x:14.3f}"
    if y >= 0.099995:
        return f"{x:15.4f}"
    if y >= 0.0099995:
        return f"{x:16.5f}"
    return f"{x:16.4g}"


# ---------------------------------------------------------------- environment


def os_cpu_model():
    """The OS's name of the processor, /proc/cpuinfo's first "model name",
    as zbench's cpu-model: line gives it (scripts/machine-id.sh names a
    baseline folder from it), or "" where there is none."""
    try:
        with open("/proc/cpuinfo", encoding="latin-1") as f:
            for line in f:
                k, sep, v = line.partition(":")
                if sep and k.strip() == "model name":
                    return v.strip()
    except OSError:
        pass
    return ""


def cpu_model():
    """The CPU as go test's "cpu:" line names it: what go test prints for a
    benchmark of a throwaway module (on x86 Go names the CPU by its CPUID
    brand string, which a virtual machine may set apart from /proc/cpuinfo),
    or where go cannot run, Go's reading of /proc/cpuinfo: "model name" of
    its first 512 bytes, with " @ <cpu MHz>MHz" when the name has no
    frequency (as baselines/peers/node/harness.mjs's cpuName)."""
    import subprocess
    import tempfile

    try:
        with tempfile.TemporaryDirectory(prefix="zbench-peer-cpu-") as d:
            with open(os.path.join(d, "go.mod"), "w") as f:
                f.write("module cpuname\n\ngo 1.21\n")
            with open(os.path.join(d, "cpu_test.go"), "w") as f:
                f.write('package cpuname\n\nimport "testing"\n\nfunc BenchmarkCPU(b *testing.B) {}\n')
            r = subprocess.run(["go", "test", "-run", "^$", "-bench", ".", "-benchtime", "1x"], cwd=d,
                               env={**os.environ, "GOFLAGS": "", "GOWORK": "off"},
                               capture_output=True, text=True, timeout=300)
        if r.returncode == 0:
            for line in r.stdout.split("\n"):
                if line.startswith("cpu: "):
                    return line[5:]
    except (OSError, subprocess.SubprocessError):
        pass
    model, mhz = "", ""
    try:
        with open("/proc/cpuinfo", encoding="latin-1") as f:
            head = f.read(512)
    except OSError:
        return ""
    for line in head.split("\n"):
        key, sep, value = line.partition(": ")
        if not sep:
            continue
        if key.strip() in ("model name", "Model Name"):
            model = value
        elif key.strip() in ("cpu MHz", "CPU MHz"):
            mhz = value
    if not model or not mhz or "GHz" in model or "MHz" in model:
        return model
    return f"{model} @ {mhz}MHz"


def mapped_libraries():
    """The files of the shared objects mapped into this process, in the
    order of /proc/self/maps (the kernel shows them with symlinks resolved)."""
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.split(None, 5)
                if len(fields) == 6 and ".so" in fields[5]:
                    p = fields[5].strip()
                    if p.startswith("/") and p not in paths:
                        paths.append(p)
    except OSError:
        pass
    return paths


def cgroup_cpu_limit():
    """The CPU bandwidth limit of this process's cgroup (cgroup v2 cpu.max
    or v1 cpu.cfs_quota_us / cpu.cfs_period_us) in CPUs, or None."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        return None
    for hid, controllers, path in (l for l in lines if len(l) == 3):
        try:
            if hid == "0" and controllers == "":
                with open(os.path.join("/sys/fs/cgroup", path.lstrip("/"), "cpu.max")) as f:
                    quota, period = f.read().split()
                if quota != "max":
                    return int(quota) / int(period)
            elif "cpu" in controllers.split(","):
                base = os.path.join("/sys/fs/cgroup", controllers, path.lstrip("/"))
                with open(os.path.join(base, "cpu.cfs_quota_us")) as f:
                    quota = int(f.read())
                with open(os.path.join(base, "cpu.cfs_period_us")) as f:
                    period = int(f.read())
                if quota > 0:
                    return quota / period
        except (OSError, ValueError, ZeroDivisionError):
            continue
    return None


def zbench_procs():
    """The cores zbench's Go benchmarks use, GOMAXPROCS as the Go runtime
    sets it: the GOMAXPROCS environment variable when it is a positive
    integer; else the CPUs this process may run on (runtime.NumCPU: the
    affinity mask), lowered to the cgroup's CPU limit rounded up, but not
    below 2 (Go 1.25's container-aware default)."""
    env = os.environ.get("GOMAXPROCS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    limit = cgroup_cpu_limit()
    if limit is not None and n > 1:
        n = min(n, max(2, math.ceil(limit)))
    return n


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def symbol_file(handle, symbol):
    """The file (the path as the dynamic linker opened it) that defines
    symbol as dlsym finds it through handle, or None."""
    try:
        addr = ctypes.cast(getattr(handle, symbol), ctypes.c_void_p).value
        dladdr = ctypes.CDLL(None).dladdr
    except (AttributeError, OSError):
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
    info = DlInfo()
    if not addr or not dladdr(addr, ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.fsdecode(info.dli_fname)


def c_call(handle, symbol, restype):
    """What a C function of no arguments returns (a str for c_char_p, an int
    for c_int), or None when the library has no such function."""
    try:
        fn = getattr(handle, symbol)
    except AttributeError:
        return None
    fn.restype = restype
    v = fn()
    if restype is ctypes.c_char_p:
        return v.decode(errors="replace").strip() if v else None
    return int(v)


class Blas:
    """The BLAS library torch's float32 matmuls call, found at run time.

    name: openblas, mkl, blis, atlas, flexiblas, reference (Netlib's, as in
    Debian's libblas3), none (torch has no BLAS) or unknown; path: the file
    that implements it, symlinks resolved; via: the path the dynamic linker
    opened for torch (the libblas.so.3 alternative, an LD_LIBRARY_PATH entry),
    where it differs; config: the library's own description (OpenBLAS's
    openblas_get_config, MKL's version, FlexiBLAS's backend); threads: its
    thread count where it has one.
    """

    def __init__(self, name, path, via=None, config=None, handle=None):
        self.name, self.path, self.via, self.config, self.handle = name, path, via, config, handle

    @property
    def slow(self):
        return self.name in ("reference", "none")

    @property
    def threads(self):
        h = self.handle
        if h is None:
            return 1 if self.name == "reference" else None
        for symbol in ("openblas_get_num_threads", "mkl_get_max_threads", "bli_thread_get_num_threads"):
            n = c_call(h, symbol, ctypes.c_int)
            if n is not None:
                return n
        return None

    def set_threads(self, n):
        """A "generic" torch build calls the system BLAS, which keeps its
        own thread count (OpenBLAS: every core) whatever
        torch.set_num_threads says: give it the same count."""
        if self.handle is None:
            return
        for symbol in ("openblas_set_num_threads", "mkl_set_num_threads", "bli_thread_set_num_threads"):
            try:
                fn = getattr(self.handle, symbol)
            except AttributeError:
                continue
            fn.restype = None
            fn(ctypes.c_int(n))
            return

    @property
    def build(self):
        """How the BLAS runs its threads: OpenBLAS's openblas_get_parallel
        (serial, pthread, openmp), else None."""
        if self.name != "openblas" or self.handle is None:
            return None
        n = c_call(self.handle, "openblas_get_parallel", ctypes.c_int)
        return None if n is None else {0: "serial", 1: "pthread", 2: "openmp"}.get(n, f"unknown ({n})")

    def describe(self):
        """The blas-lib: value: the library's file, and what torch opened."""
        if self.via and self.via != self.path:
            return f"{self.path} (via {self.via})"
        return self.path


def find_blas():
    """Which BLAS torch's matmuls really call: the library that defines
    sgemm_ for torch's CPU library, as the dynamic linker binds it (the
    global scope first, then libtorch_cpu's own dependencies), named by the
    vendor functions it exports. A torch with its BLAS linked in (the pip
    wheels' MKL or OpenBLAS) is named from its build configuration."""
    torch.randn(64, 64) @ torch.randn(64, 64)  # a BLAS loaded lazily is mapped now
    libs = mapped_libraries()
    torch_cpu = next((p for p in libs if os.path.basename(p).startswith("libtorch_cpu")), None)
    opened = symbol_file(ctypes.CDLL(None), "sgemm_")
    if opened is None and torch_cpu:
        try:
            opened = symbol_file(ctypes.CDLL(torch_cpu), "sgemm_")
        except OSError:
            pass
    m = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    info = m.group(1) if m else "unknown"
    if opened is None or (torch_cpu and os.path.realpath(opened) == os.path.realpath(torch_cpu)):
        name = {"open": "openblas", "mkl": "mkl"}.get(info, "none" if info in ("generic", "unknown") else info)
        where = f"{torch_cpu} (linked in)" if torch_cpu and name != "none" else "-"
        return Blas(name, where)
    handle = ctypes.CDLL(opened)
    real = os.path.realpath(opened)
    probes = (("openblas", "openblas_get_config"), ("mkl", "mkl_get_max_threads"),
              ("blis", "bli_info_get_version_str"), ("flexiblas", "flexiblas_current_backend"),
              ("atlas", "ATL_buildinfo"))
    for name, symbol in probes:
        lib = symbol_file(handle, symbol)
        if lib is None:
            continue
        config = None
        if name == "openblas":
            config = c_call(handle, "openblas_get_config", ctypes.c_char_p)
        elif name == "blis":
            config = "BLIS " + (c_call(handle, "bli_info_get_version_str", ctypes.c_char_p) or "")
        elif name == "mkl":
            buf = ctypes.create_string_buffer(256)
            try:
                handle.MKL_Get_Version_String(buf, ctypes.c_int(len(buf)))
                config = buf.value.decode(errors="replace").strip()
            except AttributeError:
                pass
        elif name == "flexiblas":
            buf = ctypes.create_string_buffer(256)
            handle.flexiblas_current_backend(buf, ctypes.c_size_t(len(buf)))
            config = "backend " + buf.value.decode(errors="replace")
            if "NETLIB" in config.upper():
                name = "reference"
        return Blas(name, os.path.realpath(lib), via=opened, config=config, handle=handle)
    # No vendor functions: Netlib's reference BLAS (Debian's libblas3 in
    # .../blas/, Fedora's blas) exports the standard routines alone.
    base = os.path.basename(real)
    if base.startswith(("libblas.", "librefblas.", "libcblas.")):
        return Blas("reference", real, via=opened)
    return Blas("unknown", real, via=opened)


def omp_wait_policy(libs):
    """How the OpenMP threads of torch's intra-op pool wait between
    parallel regions: OMP_WAIT_POLICY when set, else the runtime's default
    (GNU libgomp, Debian's and the pip wheels': spin 300000 iterations,
    then sleep on a futex; LLVM/Intel libomp: spin KMP_BLOCKTIME, 200 ms,
    then sleep)."""
    runtime = next((os.path.basename(p) for p in libs
                    if os.path.basename(p).startswith(("libgomp", "libiomp", "libomp"))), None)
    env = os.environ.get("OMP_WAIT_POLICY", "").strip()
    if env:
        return f"{env.upper()} (OMP_WAIT_POLICY; {runtime or 'no OpenMP runtime'})"
    if runtime is None:
        return "none (no OpenMP runtime mapped)"
    if runtime.startswith("libgomp"):
        spin = os.environ.get("GOMP_SPINCOUNT", "").strip() or "300000"
        return f"default ({runtime}: spin {spin} iterations, then sleep)"
    spin = os.environ.get("KMP_BLOCKTIME", "").strip() or "200"
    return f"default ({runtime}: spin {spin} ms, then sleep)"


def mkldnn_state(on=None):
    """The mkldnn: value: whether torch's convolutions may use oneDNN
    (torch.backends.mkldnn.enabled, or on where given)."""
    if not torch.backends.mkldnn.is_available():
        return "none (torch is built without oneDNN)"
    if on is None:
        on = torch.backends.mkldnn.enabled
    return "on" if on else "off"


def multiarch():
    """Debian's multiarch triplet of this machine (x86_64-linux-gnu)."""
    return sysconfig.get_config_var("MULTIARCH") or f"{platform.machine()}-linux-gnu"


def blas_alternative():
    """Debian's name of the libblas.so.3 alternative for this architecture."""
    return "libblas.so.3-" + multiarch()


def openblas_libblas():
    """The libblas.so.3 of Debian's libopenblas0-pthread."""
    return f"/usr/lib/{multiarch()}/openblas-pthread/libblas.so.3"


class Env:
    """What the comparison with zbench depends on, and why it would not be
    fair: blas_problems (overridden by --allow-slow-blas, the results then
    marked unusable) and thread_problems (fixed by --threads or by the core
    count zbench really ran with, --min-threads)."""

    def __init__(self, blas, min_threads, device):
        self.blas = blas
        self.min_threads = min_threads
        self.torch_threads = torch.get_num_threads()
        self.interop_threads = torch.get_num_interop_threads()
        self.blas_threads = blas.threads
        self.libs = mapped_libraries()
        self.blas_problems, self.thread_problems = [], []
        if device != "cpu":
            return  # the BLAS and the CPU threads do not time anything on a GPU
        fix = self.blas_fix()
        if blas.name == "reference":
            self.blas_problems.append((
                "reference BLAS",
                f"torch calls the reference BLAS, {blas.describe()}{self.ld_path_note()}: "
                "unoptimised and single-threaded, its matmuls run ten or more times slower than "
                "OpenBLAS's, so zbench would look faster than PyTorch really is.", fix))
        elif blas.name == "none":
            self.blas_problems.append((
                "no BLAS", f"torch {torch.__version__} calls no BLAS library (BLAS_INFO is not set): "
                "its matmuls use its own unoptimised loops, so zbench would look faster than PyTorch really is.", fix))
        elif self.blas_threads is not None and self.blas_threads < min(min_threads, self.torch_threads):
            self.blas_problems.append((
                f"BLAS threads {self.blas_threads} < {min_threads}",
                f"torch's BLAS, {blas.name} {blas.describe()}, runs {self.blas_threads} thread(s) "
                f"while zbench uses {min_threads} cores (a single-threaded build, or a cap such as "
                "OPENBLAS_NUM_THREADS): the peer would be slower than PyTorch can be.", fix))
        if self.torch_threads < min_threads:
            self.thread_problems.append((
                f"torch threads {self.torch_threads} < {min_threads}",
                f"torch runs {self.torch_threads} intra-op thread(s) while zbench uses {min_threads} cores "
                f"(GOMAXPROCS; --min-threads {min_threads}): the peer would be slower than PyTorch can be.",
                ["drop --threads (its default is zbench's core count), or give --threads "
                 f"{min_threads} or more; if zbench ran with fewer cores (GOMAXPROCS=N), say so: "
                 "GOMAXPROCS=N in the environment or --min-threads N"]))

    def blas_fix(self):
        alt = blas_alternative()
        return [
            "run scripts/install-python-ref.sh as root or with sudo (it installs OpenBLAS and selects it), or by hand:",
            "  sudo apt-get install libopenblas0-pthread",
            f"  sudo update-alternatives --set {alt} {openblas_libblas()}",
            f"update-alternatives --display {alt} shows which libblas.so.3 is selected.",
            "To run anyway, every result marked \"peer-usable: no\": --allow-slow-blas",
        ]

    def ld_path_note(self):
        via = self.blas.via
        if not via:
            return ""
        d = os.path.dirname(os.path.abspath(via))
        for entry in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
            if entry and os.path.abspath(entry) == d:
                return f", which comes first from LD_LIBRARY_PATH={os.environ['LD_LIBRARY_PATH']} (unset it)"
        return ""

    def refusals(self, allow_slow_blas):
        """The problems that stop a run."""
        return self.thread_problems + ([] if allow_slow_blas else self.blas_problems)

    def usable(self):
        """The peer-usable: value."""
        problems = self.blas_problems + self.thread_problems
        if not problems:
            return "yes"
        return "no (" + "; ".join(short for short, _, _ in problems) + ")"

    def config_lines(self):
        lines = [
            f"torch-threads: {self.torch_threads}",
            f"torch-interop-threads: {self.interop_threads}",
            f"min-threads: {self.min_threads}",
            f"blas: {self.blas.name}",
            f"blas-lib: {self.blas.describe()}",
        ]
        if self.blas_threads is not None:
            lines.append(f"blas-threads: {self.blas_threads}")
        if self.blas.config:
            lines.append(f"blas-config: {self.blas.config}")
        if self.blas.build:
            lines.append(f"blas-build: {self.blas.build}")
        lines.append(f"omp-wait-policy: {omp_wait_policy(self.libs)}")
        lines.append("mkldnn: " + mkldnn_state())
        return lines


def refuse(problems):
    """Says why the peer will not run and how to fix it; the exit status."""
    for _, why, fix in problems:
        log(f"torch_bench: refusing to run: {why}")
        log(f"torch_bench: fix: {fix[0]}")
        for line in fix[1:]:
            log(f"torch_bench: {line}")
    return EXIT_REFUSED


def goarch():
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower(), platform.machine().lower())


# ---------------------------------------------------------------- helpers


class Ctx:
    """What every benchmark needs: the device, its sync, the op wrapper."""

    def __init__(self, device, alloc, compile_, llama="reference", resnet_format="auto"):
        self.device = torch.device(device)
        # ResNet's memory format: channels_last (NHWC, what cuDNN's
        # tensor-core convolutions want) on GPUs and torch's default,
        # contiguous NCHW, on CPUs, unless asked for one.
        if resnet_format == "auto":
            resnet_format = "channels_last" if device == "cuda" else "contiguous"
        self.resnet_format = resnet_format
        self.llama = llama  # the Llama implementation: reference or hf
        self.dev = device  # the name in benchmark names
        self.alloc = alloc
        self.compile = compile_
        self.cuda = device == "cuda"
        self.upcast = set()  # ops run in f32 for f16 (filled by probe_f16)
        self.has_sdpa = hasattr(F, "scaled_dot_product_attention")
        self.l2_bytes = 0
        self._flush_buf = None
        self._fp8 = {}  # fp8_gemm's (call, why not) per FP8 dtype of a, found once
        if self.cuda:
            # Conv nets of fixed shapes: cuDNN times its algorithms for
            # each new shape and keeps the fastest (the PyTorch tuning
            # guide's advice), in the warm-up.
            torch.backends.cudnn.benchmark = True
            props = torch.cuda.get_device_properties(self.device.index if self.device.index is not None else torch.cuda.current_device())
            self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or DEFAULT_L2_BYTES)

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def wrap(self, fn):
        # Static shapes: every benchmark gets its own compilation for its
        # own sizes (reset_compiled drops the previous ones), not a
        # dynamic-shape graph or, past dynamo's recompile limit, eager.
        return torch.compile(fn, dynamic=False) if self.compile else fn

    def reset_compiled(self):
        """Forgets the compiled code of earlier benchmarks (their lambdas
        share code objects, which dynamo caches on)."""
        if self.compile:
            dynamo = getattr(torch, "_dynamo", None)
            if dynamo is not None and hasattr(dynamo, "reset"):
                dynamo.reset()

    def can_flush(self):
        """Whether the device's caches can be flushed (kernels.CacheFlusher):
        the GPU's L2."""
        return self.cuda

    def flush(self):
        """Evicts the L2 by writing zeros over a buffer of its size (the Go
        backend's FlushCache); the caller synchronises."""
        if self._flush_buf is None:
            self._flush_buf = torch.empty(max(1, self.l2_bytes // 4), dtype=torch.float32, device=self.device)
        self._flush_buf.zero_()

    def set_tf32(self, on):
        """Allows TF32 tensor cores for float32 matmuls (cuBLAS) and
        convolutions (cuDNN) for dtype=tf32, or forbids them (every other
        case). No-op off CUDA."""
        if not self.cuda:
            return
        set_tf32_matmul(on)
        set_tf32_cudnn(on)


def _backend_attr(mod, name):
    """getattr that also treats torch 1.x's AssertionError for unknown
    backend flags (cuBLASModule.__getattr__) as absent."""
    try:
        return getattr(mod, name)
    except Exception:
        return None


def set_tf32_matmul(on):
    """Sets cuBLAS's TF32 use for float32 matmuls with
    torch.backends.cuda.matmul.allow_tf32. Torch 2.9+ also has the
    fp32_precision API and deprecates this flag, but its setter keeps both
    APIs' states in step, while setting fp32_precision alone leaves a later
    read of allow_tf32 (as inductor does) failing on "mix of the legacy and
    new APIs": this one is safe on every version. Its deprecation warning is
    silenced."""
    mm = _backend_attr(torch.backends.cuda, "matmul")
    if mm is None or _backend_attr(mm, "allow_tf32") is None:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mm.allow_tf32 = on


def set_tf32_cudnn(on):
    """Sets cuDNN's TF32 use for float32 convolutions with
    torch.backends.cudnn.allow_tf32, which, unlike the matmuls' flag,
    defaults to True. The legacy flag, which every version has, for the
    reason set_tf32_matmul gives."""
    cudnn = _backend_attr(torch.backends, "cudnn")
    if cudnn is None or _backend_attr(cudnn, "allow_tf32") is None:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cudnn.allow_tf32 = on


def uniform(seed, shape, dtype, device):
    """Uniform [-1, 1) values rounded to dtype, made on the CPU with a fixed
    seed (the same inputs on every device)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1
    return x.to(dtype).to(device)


def rel_err(got, want):
    """|got - want|_2 / |want|_2 in float64 (kernels.RelErr)."""
    got = got.detach().to("cpu", torch.float64)
    want = want.detach().to("cpu", torch.float64)
    den = torch.linalg.vector_norm(want).item()
    num = torch.linalg.vector_norm(got - want).item()
    return num / den if den else num


def probe_f16(ctx):
    """Finds the ops this torch cannot run in float16 on ctx's device."""
    x = torch.zeros(4, 8, dtype=torch.float16, device=ctx.device)
    w = torch.ones(8, dtype=torch.float16, device=ctx.device)
    probes = {
        "matmul": lambda: x @ x.t(),
        "relu": lambda: torch.relu(x),
        "gelu": lambda: F.gelu(x),
        "layernorm": lambda: F.layer_norm(x, (8,), w, w, LN_EPS),
        "softmax": lambda: torch.softmax(x, -1),
        "attention": lambda: attention_ref_ops(ctx, x.view(1, 1, 4, 8), x.view(1, 1, 4, 8), x.view(1, 1, 4, 8)),
    }
    for op, f in probes.items():
        try:
            f()
        except RuntimeError as e:
            if "Half" not in str(e):
                raise
            ctx.upcast.add(op)


def attention_ref_ops(ctx, q, k, v, causal=False):
    """softmax(q·kᵀ/√d)·v, the query row i seeing keys 0…i when causal:
    scaled_dot_product_attention where torch has it (flash attention on
    GPUs in 2.x), else the explicit ops."""
    if ctx.has_sdpa:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    s = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(q.shape[-1]))
    if causal:
        n, m = s.shape[-2], s.shape[-1]
        s = s.masked_fill(torch.ones(n, m, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


class Work:
    """One benchmark: the op to time, its work, and its check. rates are
    (amount per op, unit) pairs reported per second (seq/s, tok/s); peak
    reports the device's peak memory (CUDA)."""

    def __init__(self, op, check, flops=0.0, nbytes=0.0, rates=(), peak=False, extra=None):
        self.op, self.check, self.flops, self.nbytes = op, check, flops, nbytes
        self.rates, self.peak = list(rates), peak
        # extra, optional, returns (value, unit) pairs measured by the op
        # itself over the calls so far (BenchmarkLlamaGenerate's ttft-ms).
        self.extra = extra


def upcast_op(x_in, out, f32_op, inputs_f32, out_f32):
    """Wraps an op computed in float32 for a dtype the device lacks: the
    casts of the inputs into f32 buffers and of the result back run inside
    the timed call."""

    def op():
        for src, dst in zip(x_in, inputs_f32):
            dst.copy_(src)
        f32_op()
        out.copy_(out_f32)

    return op


# ---------------------------------------------------------------- MatMul


def need_f16(ctx, dt):
    """Skips (NotImplementedError: the SKIP line) a 16-bit float model on a
    device this torch has no float16 kernels on; the models are not
    upcast."""
    if dt in ("f16", "mixed") and ctx.upcast:
        raise NotImplementedError(f"torch {torch.__version__} has no float16 kernels on {ctx.dev}")


def free_device_memory(ctx):
    gc.collect()
    if ctx.cuda:
        torch.cuda.empty_cache()


class Bench:
    """One named benchmark: its setup (returning a Work), its dtype and
    tolerance (default: the dtype's TOLERANCE), whether it runs with TF32
    matmuls and with cold caches."""

    def __init__(self, name, dt, setup, tf32=False, cold=False, tol=None):
        self.name, self.dt, self.setup, self.tf32, self.cold = name, dt, setup, tf32, cold
        self.tol = TOLERANCE[dt] if tol is None else tol
