"""PyTorch peer of zbench's Go benchmarks.

The peer's command line: which benchmarks to run, and the run
(baselines/peers/README.md)."""

import importlib
import json
import pkgutil

import torchpeer
from torchpeer.harness import *  # noqa: F401,F403
from torchpeer.matmul import *  # noqa: F401,F403
from torchpeer.kernels import *  # noqa: F401,F403
from torchpeer.encoder import *  # noqa: F401,F403
from torchpeer.decoder import *  # noqa: F401,F403
from torchpeer.vision import *  # noqa: F401,F403
from torchpeer import tune

def split_pattern(s):
    """Splits a -bench pattern as the testing package does: at its top-level
    | into alternatives, and each alternative at its top-level / into one
    regexp per level of a name (brackets and parentheses kept whole)."""
    alts, levels, brackets, parens, start, i = [], [], 0, 0, 0, 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            brackets += 1
        elif c == "]":
            brackets = max(0, brackets - 1)
        elif c == "(" and brackets == 0:
            parens += 1
        elif c == ")" and brackets == 0:
            parens -= 1
        elif c in "/|" and brackets == 0 and parens == 0:
            levels.append(s[start:i])
            start = i + 1
            if c == "|":
                alts.append(levels)
                levels = []
        i += 1
    levels.append(s[start:])
    alts.append(levels)
    return alts


def make_matcher(pattern):
    """Go's -bench matching: a name matches when, for one alternative of
    split_pattern, each level's unanchored regexp matches the same level of
    the name, and the name has at least as many levels."""
    alts = [[re.compile(p) for p in levels] for levels in split_pattern(pattern)]

    def match(name):
        elems = name.split("/")
        return any(len(regs) <= len(elems) and all(r.search(e) for r, e in zip(regs, elems)) for regs in alts)

    return match


# STDIN_DONE starts the line --stdin writes to stderr after each pattern.
STDIN_DONE = "torch_bench: done:"


def no_match_warning(pattern):
    """What the peer says when --bench matched none of its benchmarks."""
    return (f"torch_bench: warning: --bench {pattern!r} matched no benchmark (as go test -bench, the pattern is "
            "split at its top-level | into alternatives and each at / into one regexp per level of the name)")


def workload_modules():
    """The torchpeer modules that list their own benchmarks (a function
    benchmarks(ctx, short) returning Bench values), in name order."""
    mods = []
    for info in sorted(pkgutil.iter_modules(torchpeer.__path__), key=lambda m: m.name):
        if info.name.endswith("_test") or info.name == "cli":
            continue
        mod = importlib.import_module("torchpeer." + info.name)
        if callable(getattr(mod, "benchmarks", None)):
            mods.append(mod)
    return mods


def benchmarks(ctx, short):
    """(name, setup) of every benchmark in the order go test runs them."""
    out = []
    for dt, n, transfer in matmul_cases(short, ctx.cuda):
        name = f"BenchmarkMatMul/dev={ctx.dev}/dtype={dt}/m={n}/n={n}/k={n}/transfer={transfer}"
        if dt == "int8":
            out.append(Bench(name, dt, lambda n=n: qmatmul_setup(ctx, n)))
            continue
        if dt in FP8_FORMATS:
            out.append(Bench(name, dt, lambda dt=dt, n=n: fp8matmul_setup(ctx, n, dt)))
            continue
        out.append(Bench(name, dt, lambda dt=dt, n=n, transfer=transfer: matmul_setup(ctx, dt, n, transfer),
                         tf32=dt == "tf32"))
    # cache=hot and cache=cold on devices that can flush their caches, no
    # cache key elsewhere (bench_test's cacheModes).
    caches = ["hot", "cold"] if ctx.can_flush() else [None]
    for op in KERNEL_OPS:
        for dt in kernel_dtypes(short):
            for batch, seq in kernel_shapes(short):
                for cache in caches:
                    name = f"BenchmarkKernels/op={op}/dev={ctx.dev}/dtype={dt}/batch={batch}/seq={seq}"
                    if cache:
                        name += f"/cache={cache}"
                    out.append(Bench(name, dt, lambda op=op, dt=dt, b=batch, s=seq: kernel_setup(ctx, op, dt, b, s),
                                     cold=cache == "cold"))
    for dt in attention_dtypes(short, ctx.cuda):
        for batch, heads, seq, hdim, causal in attention_shapes(short, ctx.cuda):
            name = (f"BenchmarkAttention/dev={ctx.dev}/dtype={dt}/batch={batch}/heads={heads}"
                    f"/seq={seq}/hdim={hdim}/causal={'true' if causal else 'false'}")
            out.append(Bench(name, dt, lambda dt=dt, b=batch, h=heads, s=seq, d=hdim, c=causal: attention_setup(
                ctx, dt, b, s, heads=h, hdim=d, causal=c, row_step=max(1, s // 16))))
    for dt, batch, seq in bert_cases(short, ctx.cuda):
        name = f"BenchmarkBERT/dev={ctx.dev}/dtype={dt}/batch={batch}/seq={seq}"
        out.append(Bench(name, dt, lambda dt=dt, b=batch, s=seq: bert_setup(ctx, dt, b, s),
                         tol=MODEL_TOLERANCE[dt]))
    for dt, batch in bert_train_cases(short, ctx.cuda):
        name = f"BenchmarkBERTTrain/dev={ctx.dev}/dtype={dt}/batch={batch}/seq={BERT_TRAIN_SEQ}"
        out.append(Bench(name, dt, lambda dt=dt, b=batch: bert_train_setup(ctx, dt, b),
                         tol=MODEL_TOLERANCE[dt]))
    model, dts, prefill, decode, generate = llama_cases(short, ctx.cuda)
    for dt in dts if ctx.cuda else dts[:1]:
        for batch, seq in prefill:
            name = f"BenchmarkLlamaPrefill/dev={ctx.dev}/dtype={dt}/model={model}/batch={batch}/seq={seq}"
            out.append(Bench(name, dt, lambda dt=dt, b=batch, s=seq: llama_prefill_setup(ctx, model, dt, b, s),
                             tol=MODEL_TOLERANCE[dt]))
    for dt in dts:
        for batch, c in decode:
            name = f"BenchmarkLlamaDecode/dev={ctx.dev}/dtype={dt}/model={model}/batch={batch}/ctx={c}"
            out.append(Bench(name, dt, lambda dt=dt, b=batch, c=c: llama_decode_setup(ctx, model, dt, b, c),
                             tol=MODEL_TOLERANCE[dt]))
    for dt in dts if ctx.cuda else dts[:1]:
        for prompt, new in generate:
            name = f"BenchmarkLlamaGenerate/dev={ctx.dev}/dtype={dt}/model={model}/prompt={prompt}/new={new}"
            out.append(Bench(name, dt, lambda dt=dt, p=prompt, n=new: llama_generate_setup(ctx, model, dt, p, n),
                             tol=MODEL_TOLERANCE[dt]))
    for lmodel, dt, batch, seq in lora_cases(short, ctx.cuda):
        name = f"BenchmarkLlamaLoRA/dev={ctx.dev}/dtype={dt}/model={lmodel}/batch={batch}/seq={seq}"
        out.append(Bench(name, dt, lambda m=lmodel, dt=dt, b=batch, s=seq: lora_setup(ctx, m, dt, b, s),
                         tol=MODEL_TOLERANCE[dt]))
    for dt, batch in resnet_cases(short, ctx.cuda):
        name = f"BenchmarkResNet/dev={ctx.dev}/model={RESNET_MODEL}/dtype={dt}/batch={batch}"
        if dt == "int8":
            out.append(Bench(name, dt, lambda b=batch: resnet_int8_setup(ctx, b), tol=RESNET_TOLERANCE[dt]))
            continue
        out.append(Bench(name, dt, lambda dt=dt, b=batch: resnet_setup(ctx, dt, b),
                         tf32=dt == "tf32", tol=RESNET_TOLERANCE[dt]))
    # Workload modules of their own (a model added by docs/adding-a-model.md):
    # every torchpeer module with a benchmarks(ctx, short), in name order.
    for mod in workload_modules():
        out.extend(mod.benchmarks(ctx, short))
    return out


# ---------------------------------------------------------------- main


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", action="store_true", help="the quick set (go test -short)")
    ap.add_argument("--bench", default=".", metavar="REGEX", help="run only the benchmarks matching REGEX, as go test -bench (default: all)")
    ap.add_argument("--benchtime", default="1s", type=parse_benchtime, help='time per benchmark ("1s", "500ms") or fixed count ("10x"), as go test -benchtime (default 1s)')
    ap.add_argument("--count", default=1, type=int, help="run each benchmark N times, as go test -count")
    ap.add_argument("--threads", default=None, type=int, help="torch.set_num_threads and the BLAS's thread count (default: the cores zbench uses, as GOMAXPROCS); the -P name suffix")
    ap.add_argument("--min-threads", default=None, type=int, metavar="N", help="refuse to run with fewer torch or BLAS threads than N: the cores zbench uses (default: GOMAXPROCS from the environment, else the CPUs this process may use, as the Go runtime sets it)")
    ap.add_argument("--allow-slow-blas", action="store_true", help="run even when torch calls the reference BLAS (or none, or a single-threaded one), every result marked \"peer-usable: no\"")
    ap.add_argument("--check", action="store_true", help="check the environment and print the configuration lines, run no benchmark (exit status 3 when a run would be refused)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--compile", action="store_true", help="wrap the ops in torch.compile (torch >= 2)")
    ap.add_argument("--llama", default="reference", choices=["reference", "hf"],
                    help="the Llama benchmarks' implementation: testdata/reference/llama.py's module (and lora.py's LoRA), or transformers' LlamaForCausalLM and generate (and peft's LoRA)")
    ap.add_argument("--resnet-memory-format", default="auto", choices=["auto", "contiguous", "channels_last"],
                    help="BenchmarkResNet's memory format (default auto: channels_last on GPUs, contiguous NCHW on CPUs)")
    ap.add_argument("--alloc", action="store_true", help="let every call allocate its output (the everyday API) instead of writing preallocated outputs")
    ap.add_argument("--tune", default="auto", choices=["auto", "off"],
                    help="auto (the default, on --device cpu): time the OpenMP wait policy, OpenBLAS's pthread and OpenMP builds, torch's thread count and oneDNN, and run each benchmark in the fastest (README.md, \"Best configuration\"); off: run in the environment and with --threads as given")
    ap.add_argument("--try-env", action="append", default=[], metavar="'NAME=VALUE ...'",
                    help="with --tune auto, also time a launch with these variables set (e.g. LD_PRELOAD of another malloc); repeatable")
    # A child process of --tune auto: its launch is fixed, its knobs tuned
    # per benchmark; --names: the exact benchmarks to run (a JSON list);
    # --calibrate: write each one's fastest seconds per op there (JSON)
    # instead of measuring; --launch-env and --tuning: its config lines.
    ap.add_argument("--launch-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--names", help=argparse.SUPPRESS)
    ap.add_argument("--calibrate", help=argparse.SUPPRESS)
    ap.add_argument("--launch-env", help=argparse.SUPPRESS)
    ap.add_argument("--tuning", help=argparse.SUPPRESS)
    ap.add_argument("--stdin", action="store_true",
                    help="read --bench patterns from stdin, one a line, run each when it comes and then write "
                         f"{STDIN_DONE!r} and the pattern to stderr: one process, one start-up, for a caller that "
                         "interleaves its own runs with the peer's (not with --tune auto on the CPU)")
    args = ap.parse_args(argv)

    if args.count < 1:
        ap.error("--count must be >= 1")
    if args.compile and not hasattr(torch, "compile"):
        ap.error(f"--compile needs torch >= 2 (have {torch.__version__})")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device available to torch")

    procs = zbench_procs()
    threads = procs if args.threads is None else args.threads
    min_threads = procs if args.min_threads is None else args.min_threads
    if threads < 1:
        ap.error("--threads must be >= 1")
    if min_threads < 1:
        ap.error("--min-threads must be >= 1")
    torch.set_num_threads(threads)
    if args.llama == "hf":
        try:
            import transformers
        except ImportError:
            ap.error("--llama hf needs transformers (not installed)")
    ctx = Ctx(args.device, args.alloc, args.compile, args.llama, args.resnet_memory_format)
    probe_f16(ctx)
    match = make_matcher(args.bench)
    if args.names:
        with open(args.names) as f:
            names = set(json.load(f))
        match = names.__contains__
    blas = find_blas()
    blas.set_threads(threads)
    env = Env(blas, min_threads, args.device)
    refusals = env.refusals(args.allow_slow_blas)
    if refusals and not args.check:
        return refuse(refusals)
    # The knobs are tuned per benchmark in a child of --tune auto; the
    # parent runs no benchmark itself.
    tuning = args.device == "cpu" and args.tune == "auto"
    if args.stdin and (tuning or args.calibrate or args.check):
        ap.error("--stdin runs without tuning (--tune off, or --device cuda), --calibrate or --check")
    if tuning and not args.check and not args.launch_child:
        every = [b.name for b in benchmarks(ctx, args.short)]
        chosen = [n for n in every if match(n)]
        if chosen:
            launch_list, notes = tune.launches(blas, args.try_env)
            return tune.run_tuned(sys.argv[1:] if argv is None else list(argv), chosen, every, launch_list, notes,
                                  threads, args.threads is not None)
    # Every line through out: a config line only when its value changes.
    out = tune.Printer()
    emit = out.line

    emit("goos: " + {"win32": "windows"}.get(sys.platform, sys.platform))
    emit("goarch: " + goarch())
    emit("pkg: " + PKG)
    emit("cpu: " + cpu_model())
    model = os_cpu_model()
    if model:
        emit("cpu-model: " + model)
    emit(f"impl: torch-{torch.__version__}")
    for line in env.config_lines():
        emit(line)
    if ctx.cuda:
        emit("gpu: " + torch.cuda.get_device_name())
        emit("cuda: " + str(torch.version.cuda))
        emit(f"gpu-l2-bytes: {ctx.l2_bytes}")
    # Thread settings from the environment change results (with Debian's
    # torch, OpenMP threads spin-waiting after a parallel region compete
    # with OpenBLAS's own threads; OMP_WAIT_POLICY=PASSIVE avoids that, and
    # omp-wait-policy: above says which applies): label the results with
    # them.
    # (TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 turns TF32 on for every float32
    # matmul, whatever allow_tf32 says.)
    for var in ("GOMP_SPINCOUNT", "KMP_BLOCKTIME", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"):
        if os.environ.get(var):
            emit(f"{var.lower().replace('_', '-')}: {os.environ[var]}")
    emit("attention: " + ("sdpa" if ctx.has_sdpa else "eager"))
    emit("resnet-memory-format: " + ctx.resnet_format)
    for line in int8_config_lines(ctx) + fp8_config_lines(ctx):
        emit(line)
    if ctx.cuda:
        emit("cudnn-benchmark: " + str(torch.backends.cudnn.benchmark).lower())
    if args.llama == "hf":
        emit(f"llama-impl: transformers-{transformers.__version__}")
        try:
            import peft
            emit(f"lora-impl: peft-{peft.__version__}")
        except ImportError:
            emit("lora-impl: none (peft is not installed: BenchmarkLlamaLoRA is skipped)")
    else:
        emit("llama-impl: reference")
    emit("outputs: " + ("allocated" if args.alloc or args.compile else "preallocated"))
    if args.compile:
        emit("compile: torch.compile")
    if ctx.upcast and not args.calibrate:
        ops = ",".join(o for o in ["matmul"] + KERNEL_OPS if o in ctx.upcast)
        emit("f16-upcast: " + ops)
        log(f"torch {torch.__version__} has no float16 kernels on {args.device} for {ops}: "
            "their dtype=f16 benchmarks compute in float32, casting inputs and output inside the timer")
    if args.launch_env:
        emit("peer-env: " + args.launch_env)
    if args.tuning:
        emit("peer-tuning: " + args.tuning)
    elif not tuning:
        emit("peer-tuning: off (the environment and the threads as given)")
    elif args.check:
        launch_list, notes = tune.launches(blas, args.try_env)
        emit("peer-tuning: auto, not run by --check: launches " + ", ".join(l.label for l in launch_list) +
             "".join("; " + n for n in notes))
    emit("peer-usable: " + env.usable())
    if args.check:
        sys.stdout.flush()
        if refusals:
            return refuse(refusals)
        if env.blas_problems:
            log(f"torch_bench: a run would go ahead (--allow-slow-blas), its results marked peer-usable: {env.usable()}")
        else:
            log(f"torch_bench: environment ok: {blas.name} BLAS, {env.torch_threads} torch threads "
                f"for zbench's {min_threads} cores")
        return 0
    if env.blas_problems:
        log("torch_bench: running anyway (--allow-slow-blas): every result is marked peer-usable: " + env.usable())
    for u in UNITS:
        emit(u)
    sys.stdout.flush()

    suffix = f"-{threads}" if threads != 1 else ""
    calibrated = {}  # --calibrate: the fastest seconds per op of each benchmark

    def run(match):
        """Runs the benchmarks match selects: whether one failed, and how
        many it matched."""
        failed, matched = False, 0
        for bench in benchmarks(ctx, args.short):
            name, tol = bench.name, bench.tol
            if not match(name):
                continue
            matched += 1
            if run_one(bench, name, tol):
                failed = True
        return failed, matched

    def run_one(bench, name, tol):
        """Runs one benchmark; whether it failed its check."""
        # TF32 for dtype=tf32 alone: the f32 cases measure IEEE float32.
        ctx.set_tf32(bench.tf32)
        ctx.reset_compiled()
        flush = ctx.flush if bench.cold else None
        try:
            work = bench.setup()
        except (NotImplementedError, RuntimeError) as e:
            log(f"--- SKIP: {name}: {e}")
            return False
        if tuning:
            work.op()  # warm-up, outside the trial
            ctx.sync()
            knobs, times = tune.tune_knobs(name, work.op, ctx.sync, blas, threads, args.threads is not None,
                                           min_threads)
            if args.calibrate:
                if not times:
                    times = tune.trial(work.op, ctx.sync, [knobs], lambda k: k.apply(blas))
                calibrated[name] = min(times.values())
                del work
                free_device_memory(ctx)
                return False
            for line in knobs.config_lines(blas):
                emit(line)
        err, failed = None, False
        for _ in range(args.count):
            work.op()  # warm-up, outside the timer
            ctx.sync()
            if err is None:
                err = work.check()
                if not err <= tol:  # also catches NaN
                    log(f"--- FAIL: {name}: rel-err {err:.3g} exceeds {tol:.3g}: not timing a wrong result")
                    failed = True
                    break
            if work.peak and ctx.cuda:
                torch.cuda.reset_peak_memory_stats()
            n, secs = measure(work.op, args.benchtime, ctx.sync, flush)
            per_op = secs / n
            fields = [f"{name}{suffix}", f"{n:8d}", f"{pretty(per_op * 1e9)} ns/op"]
            if work.flops:
                fields.append(f"{pretty(work.flops / per_op / 1e9)} GFLOP/s")
            if work.nbytes:
                fields.append(f"{pretty(work.nbytes / per_op / 1e9)} GB/s")
            for amount, unit in work.rates:
                fields.append(f"{pretty(amount / per_op)} {unit}")
            if work.extra is not None:
                for value, unit in work.extra():
                    fields.append(f"{pretty(value)} {unit}")
            if work.peak and ctx.cuda:
                fields.append(f"{pretty(torch.cuda.max_memory_allocated())} peak-B")
            fields.append(f"{pretty(err)} rel-err")
            emit("\t".join(fields))
        del work
        ctx.set_tf32(False)
        free_device_memory(ctx)
        return failed

    if args.stdin:
        failed = False
        for line in sys.stdin:
            pattern = line.strip()
            if not pattern:
                continue
            f, matched = run(make_matcher(pattern))
            if not matched:
                log(no_match_warning(pattern))
            failed = failed or f
            sys.stdout.flush()
            log(f"{STDIN_DONE} {pattern}")
    else:
        failed, matched = run(match)
        if not matched:
            log(no_match_warning(args.bench))
    if args.calibrate:
        with open(args.calibrate, "w") as f:
            json.dump(calibrated, f)
    if failed:
        print("FAIL")
        return 1
    print("PASS")
    return 0
