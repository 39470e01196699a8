#!/usr/bin/env python3
"""PyTorch peer of zbench's BenchmarkGPT2.

Runs GPT-2 small inference with the modules of testdata/reference/gpt2.py
(Hugging Face GPT2LMHeadModel semantics, the goldens' reference) and its
seeded synthetic weights, as bench_test/gpt2_test.go does, and prints the
results in Go benchmark format under the same names and units, so that one
benchstat call compares zbench with PyTorch:

    /usr/bin/python3 baselines/peers/gpt2_peer.py > torch-gpt2.txt
    go test ./bench_test -run '^$' -bench GPT2 > go.txt
    benchstat -table "" go.txt torch-gpt2.txt

The timing rules are torch_bench.py's (measure: one warm-up call outside the
timer, testing.B's growth of the iteration count, --benchtime as go test's),
which this script imports. One op is model.eval() under torch.no_grad on
[batch, seq] ids: the logits of every position; tok/s is batch·seq over
seconds per op. rel-err is the last position's logits on the golden input
(testdata/golden/gpt2.safetensors, case small) against the float64
reference; at the golden's shape the benchmark's own input is the golden's.
A result over the dtype's model tolerance is not timed.

dtype=f32 and bf16 (the model cast to bfloat16) run on CPUs and GPUs, f16
on GPUs only (torch 1.13 has no float16 kernels on CPUs); int8 is not run:
torch's dynamic quantization converts nn.Linear modules, and GPT-2's layers
are Hugging Face's Conv1D. Config lines: impl, torch-threads (--threads,
default the cores zbench uses), torch_bench.py's BLAS lines (a run on
the reference BLAS is refused, as there, unless --allow-slow-blas) and, on
CUDA, gpu.
"""

import argparse
import gc
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "testdata", "reference"))

import torch_bench as tb  # noqa: E402
from bert import parse_safetensors  # noqa: E402
import gpt2 as gpt2_ref  # noqa: E402

GOLDEN = os.path.join(REPO, "testdata", "golden", "gpt2.safetensors")
GOLDEN_CASE = "small"
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def cases(short, gpu):
    """BenchmarkGPT2's (dtype, batch, seq), as gpt2DTypes and gpt2Shapes."""
    if short:
        return [("f32", 1, 128)]
    shapes = [(1, 128), (8, 128), (32, 128), (8, 1024)] if gpu else [(1, 128)]
    return [(dt, b, s) for dt in ("f32", "f16", "bf16") for b, s in shapes]


def golden():
    """The golden case's input_ids [batch, seq] and last-position logits."""
    with open(GOLDEN, "rb") as f:
        meta, t = parse_safetensors(f.read())
    return t[GOLDEN_CASE + "/input_ids"].long(), t[GOLDEN_CASE + "/logits"].double(), meta


def setup(device, dt, batch, seq, ids_ref, want):
    """(op, check) of GPT-2 small in dt over [batch, seq] ids."""
    if dt == "f16" and device == "cpu":
        raise NotImplementedError(f"torch {torch.__version__} has no float16 kernels on cpu")
    cfg = gpt2_ref.GPT2Config(gpt2_ref.SMALL_CONFIG)
    model = gpt2_ref.synthetic_(gpt2_ref.GPT2LMHeadModel(cfg), gpt2_ref.SMALL_SEED)
    model.to(device=device, dtype=DTYPES[dt]).eval()
    if (batch, seq) == tuple(ids_ref.shape):
        ids = ids_ref
    else:
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(batch * 1000 + seq))
    ids = ids.to(device)
    box = [None]

    def op():
        with torch.no_grad():
            box[0] = model(ids)

    def check():
        logits = box[0]
        if tuple(ids.shape) != tuple(ids_ref.shape):
            with torch.no_grad():
                logits = model(ids_ref.to(device))
        return tb.rel_err(logits[:, -1:], want)

    return op, check


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", action="store_true", help="the quick set (go test -short)")
    ap.add_argument("--benchtime", default="1s", type=tb.parse_benchtime, help='time per benchmark ("1s") or count ("10x"), as go test -benchtime')
    ap.add_argument("--count", default=1, type=int, help="run each benchmark N times, as go test -count")
    ap.add_argument("--threads", default=None, type=int, help="torch.set_num_threads (default: the cores zbench uses, as GOMAXPROCS); the -P name suffix")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--allow-slow-blas", action="store_true", help="run even when torch calls the reference BLAS, as torch_bench.py's flag")
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device available to torch")
    threads = tb.zbench_procs() if args.threads is None else args.threads
    if threads < 1 or args.count < 1:
        ap.error("--threads and --count must be >= 1")
    torch.set_num_threads(threads)
    cuda = args.device == "cuda"
    blas = tb.find_blas()
    blas.set_threads(threads)
    env = tb.Env(blas, threads, args.device)
    refusals = env.refusals(args.allow_slow_blas)
    if refusals:
        return tb.refuse(refusals)
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    print("goos: " + sys.platform)
    print("goarch: " + tb.goarch())
    print("pkg: " + tb.PKG)
    print("cpu: " + tb.cpu_model())
    print(f"impl: torch-{torch.__version__}")
    for line in env.config_lines():  # torch-threads, blas, ...
        print(line)
    print("peer-usable: " + env.usable())
    if cuda:
        print("gpu: " + torch.cuda.get_device_name())
    for u in tb.UNITS:
        print(u)
    sys.stdout.flush()

    ids_ref, want, _ = golden()
    suffix = f"-{threads}" if threads != 1 else ""
    failed = False
    for dt, batch, seq in cases(args.short, cuda):
        name = f"BenchmarkGPT2/dev={args.device}/dtype={dt}/batch={batch}/seq={seq}"
        try:
            op, check = setup(args.device, dt, batch, seq, ids_ref, want)
        except NotImplementedError as e:
            tb.log(f"--- SKIP: {name}: {e}")
            continue
        tol = tb.MODEL_TOLERANCE[dt]
        for _ in range(args.count):
            op()  # warm-up, outside the timer
            sync()
            err = check()
            if not err <= tol:
                tb.log(f"--- FAIL: {name}: rel-err {err:.3g} exceeds {tol:.3g}: not timing a wrong result")
                failed = True
                break
            n, secs = tb.measure(op, args.benchtime, sync)
            per_op = secs / n
            print("\t".join([f"{name}{suffix}", f"{n:8d}", f"{tb.pretty(per_op * 1e9)} ns/op",
                             f"{tb.pretty(batch * seq / per_op)} tok/s", f"{tb.pretty(err)} rel-err"]), flush=True)
        del op, check
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
