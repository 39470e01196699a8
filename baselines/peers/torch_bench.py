#!/usr/bin/env python3
"""PyTorch peer of zbench's Go benchmarks.

Runs the workloads of bench_test (BenchmarkMatMul, BenchmarkKernels,
BenchmarkAttention, BenchmarkBERT, BenchmarkBERTTrain, BenchmarkLlamaPrefill,
BenchmarkLlamaDecode, BenchmarkLlamaGenerate, BenchmarkLlamaLoRA,
BenchmarkResNet) with PyTorch
and prints the results in Go benchmark format, under the same names, so that
one benchstat call compares zbench with PyTorch:

    /usr/bin/python3 baselines/peers/torch_bench.py > torch.txt
    go test ./bench_test -run '^$' -bench . > go.txt
    benchstat -table "" go.txt torch.txt

(benchstat makes one table per distinct set of configuration lines, and the
two files differ in several: impl, blas, go, gomaxprocs, ... -table "" puts
both files in one table, one column each, without printing the
configuration; -ignore with the differing keys does the same and prints the
shared ones.)

The rules are the Go harness's (zbench.Measure under testing.B):

  * operands are made once, outside the timer; one warm-up call runs outside
    the timer and its output is checked against a float64 reference
    (rel-err = |out - ref|_2 / |ref|_2); a result over the dtype's
    tolerance is not timed, like Go's "not timing a wrong result";
  * the timed loop grows its iteration count as testing.B does until one
    loop takes at least --benchtime (or runs exactly N iterations for "Nx"),
    timed with time.perf_counter, the device synchronised inside the timer;
  * outputs are preallocated and written with the out= forms of the ATen
    ops, as the Go kernels write into preallocated tensors (--alloc uses the
    everyday allocating calls instead; on CPU that mostly measures the C
    allocator: outputs over glibc's 32 MiB mmap threshold are mapped and
    page-faulted afresh in every iteration). Layer norm and, in torch 2.x,
    scaled_dot_product_attention have no real out= kernel and allocate
    their (small) outputs in either mode;
  * torch.set_num_threads(N), and the BLAS's own thread count set to N, N
    the cores zbench uses (GOMAXPROCS, as the Go runtime sets it; --threads
    changes it); names carry the thread count as Go's carry GOMAXPROCS
    ("-P", omitted when it is 1).

Before any benchmark, the peer checks that it is the PyTorch a user would
have, and refuses to run (exit status 3, the reason and the fix on stderr)
when it is not, on --device cpu:

  * torch's BLAS, found at run time (the library that defines sgemm_ for
    torch, resolved through /proc/self/maps and the dynamic linker, named
    by the vendor functions it exports), is the reference implementation:
    Debian's python3-torch pulls libblas3 unless OpenBLAS is installed
    (scripts/install-python-ref.sh installs it and selects the libblas.so.3
    alternative), or is missing, or runs fewer threads than torch;
    --allow-slow-blas runs anyway, every result then under the config
    line "peer-usable: no (...)";
  * torch's intra-op threads are fewer than the cores zbench uses
    (--min-threads N, default GOMAXPROCS as above).

--check runs that check and prints the configuration lines, no benchmark:
torch-threads and torch-interop-threads, min-threads, blas (openblas, mkl,
blis, reference, ...), blas-lib (the library's file, and the path torch
opened), blas-threads, blas-config (e.g. openblas_get_config), the OpenMP
wait policy (omp-wait-policy: OMP_WAIT_POLICY, else the runtime's default;
GNU libgomp, which Debian's torch uses, spins 300000 iterations, then
sleeps) and peer-usable.

Where the device lacks a dtype's kernel (torch 1.13 has no float16 kernels
on CPU at all), the op runs in float32 with the casts inside the timer; the
config line "f16-upcast:" lists such ops, and stderr says so.

Works with torch 1.13 and 2.x; with --device cuda each timed loop ends with
torch.cuda.synchronize(), and --compile wraps the ops in torch.compile
(torch >= 2; a fresh static-shape compilation per benchmark). Attention uses
F.scaled_dot_product_attention where torch has it (2.x; flash attention on
GPUs) and the explicit matmul-softmax-matmul otherwise; the config line
"attention:" says which.

BenchmarkBERT and BenchmarkBERTTrain run the modules of
testdata/reference/bert.py (Hugging Face BertModel and BertForMaskedLM
semantics, the goldens' reference) with its seeded synthetic weights (seed
20261121), as the Go side does:

  * BenchmarkBERT: BERT-base inference (model.eval(), torch.no_grad) on
    random ids with an all-ones attention mask (which, as in Hugging Face's
    sdpa path, the model drops outside torch.compile); seq/s is batch over
    seconds per op. dtype=mixed is float32 weights with the attention core
    (q·kᵀ, softmax, ·v) in float16 (GPUs only); dtype=int8 (CPUs only) is
    below. The check recomputes the first and last sequence of the batch
    in float64 from the same (rounded) weights: rel-err over their
    last_hidden_state and pooler_output;
  * BenchmarkBERTTrain: one AdamW step (lr 1e-4, weight decay 0.01 on the
    parameters of dim >= 2) per op of a 6-layer BertForMaskedLM on a fixed
    batch with 15% of the positions masked, set_to_none zero_grad, forward
    and loss, backward, step; dtype=bf16 is torch.autocast to bfloat16
    (GPUs only). tok/s is batch·seq over seconds per op. The check compares
    the first row's logits of the warm-up step (the first step) with a
    float64 forward of the initial weights;
  * the models allocate their activations and outputs in every mode; on
    CUDA peak-B is torch.cuda.max_memory_allocated over the timed loop
    (weights, optimizer state and inputs included), its peak statistics
    reset after the warm-up and check;
  * whole models accumulate the rounding of many ops: rel-err is held to
    MODEL_TOLERANCE, not the single ops' TOLERANCE.

The Llama benchmarks run TinyLlama-1.1B's shape (the tiny checkpoint's
with --short) with the seeded synthetic weights of
testdata/reference/llama.py, through one of two implementations (--llama;
the config line "llama-impl:" names it):

  * reference (the default): llama.py's module, a KV cache grown by
    torch.cat as Hugging Face's dynamic cache is; a decode op copies the
    cache list so that every op decodes at the same context; generate is a
    user's loop, each token's argmax read back with .item();
  * hf: transformers' LlamaForCausalLM (its default attention, sdpa) loaded
    with the same weights: prefill and decode with a DynamicCache (cropped
    back to ctx after each decode op), generate with model.generate
    (greedy, min_new_tokens = max_new_tokens so every op makes the same
    tokens), ttft-ms from a streamer's first new token; with --compile, a
    static cache and the forward compiled with torch.compile
    (mode="reduce-overhead"), as Hugging Face's guide to fast generation
    does. Needs transformers (the GPU host has it).

Prefill asks for the last position's logits only (logits_to_keep=1), as
zbench's prefill and generate's do. rel-err is the model's logits on the
golden case of testdata/golden/llama.safetensors against the reference's
float64 ones.

BenchmarkLlamaLoRA is LoRA fine-tuning as Hugging Face PEFT does it, one op
a training step: forward, loss (HF LlamaForCausalLM's shifted cross
entropy), backward, torch.nn.utils.clip_grad_norm_ (max norm 1), AdamW (lr
2e-4) over the adapter alone, zero_grad(set_to_none=True). The adapter is
LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1, target_modules=["q_proj",
"v_proj"]) over a frozen base (requires_grad False) with the seeded
synthetic weights of llama.py, and starts from testdata/reference/lora.py's
initial adapter (B nonzero, unlike PEFT's zeros, so that the adapter takes
part in the checked loss; the speed is the same); the batch is random ids,
full length (no padding), labels = ids. Models: model=tinyllama-2l on CPUs
(TinyLlama-1.1B's width and vocabulary, its first 2 layers), batch 1, seq
128; model=tinyllama-1.1b in bf16 on GPUs, batches 4 and 8, seq 512; model=tiny
(the tiny checkpoint's shape), batch 1, seq 32 with --short. dtype=f32 is
everything in float32; dtype=bf16 (GPUs only) is the base weights in
bfloat16 and the adapter in float32 under torch.autocast(bfloat16), as
PEFT and transformers users train. --llama reference runs lora.py's
LoraLinear (PEFT's semantics) in llama.py's model; --llama hf runs
transformers' LlamaForCausalLM under peft's get_peft_model (needs peft too;
without it the benchmark is skipped). tok/s is batch·seq over seconds per
op; peak-B on CUDA as for BERT. The check: the first warm-up runs one
step without dropout before its step with dropout, and that step's loss is
compared with the reference's loss (lora.py
over llama.py, for either --llama) of the same weights and adapter in
float64, on the device, before the timed model is made: rel-err of the two
scalars.

BenchmarkResNet is ResNet-50 inference on 224×224 images, one op a batch:
torchvision's resnet50 with the seeded synthetic weights (seed 20261201) of
testdata/reference/resnet.py (imported on first use: it needs torchvision;
without it the benchmarks are skipped), model.eval() under
torch.inference_mode, on seeded random pixels. Batches 1 and 8 in f32
and int8 (below) on CPUs; dtypes f32, tf32, f16 and bf16 over batches 1,
4, 8, …, 512 on GPUs (int8 there is skipped); batch 1 in f32 with --short.
As a PyTorch user runs a conv net:

  * on GPUs in the channels_last memory format (NHWC, what cuDNN's tensor
    core convolutions want; the CPU keeps torch's default, contiguous
    NCHW; --resnet-memory-format chooses either on any device: the config
    line "resnet-memory-format:"), with
    torch.backends.cudnn.benchmark on (cuDNN times its algorithms for each
    new shape, in the warm-up; "cudnn-benchmark:");
  * f16 and bf16 are the whole model and its input cast (model.half(),
    .to(torch.bfloat16)), as zbench runs the whole model in that dtype;
    dtype=f32 runs with TF32 off for cuDNN's convolutions and cuBLAS's
    matmuls alike (torch.backends.cudnn.allow_tf32 defaults to True: it is
    set for every benchmark), dtype=tf32 with both on;
  * GFLOP/s counts two per multiply-add of every Conv2d and Linear
    (2·N·Ho·Wo·Co·Ci/G·Kh·Kw, and 2·N·2048·1000 for fc), counted once by
    forward hooks and held to models/resnet's Config.FLOPs (8.178368512e9
    per image); GB/s counts the model's float state_dict in the dtype (the
    four BatchNorm vectors that eager PyTorch reads, where zbench holds
    the BatchNorms folded into one bias per convolution: 0.3% more) and
    the float32 input; img/s is batch over seconds per op; peak-B on CUDA
    as for BERT;
  * rel-err is the model (the code that is timed, in its dtype and memory
    format) on the golden case resnet50_224 of
    testdata/golden/resnet.safetensors against torchvision's float64
    logits, held to bench_test's resnetTolerance (RESNET_TOLERANCE).

dtype=int8 is INT8 post-training quantization (symmetric int8, the
narrow range [-127, 127], zero points 0 on zbench's side), run by torch's
quantized engine on CPUs, the first of fbgemm, x86, onednn (Debian's torch
1.13 is built without fbgemm) and qnnpack that torch has (the config line
"int8-engine:"), and by torch._int_mm on CUDA:

  * BenchmarkMatMul dtype=int8 (1024 and 4096 on CPUs, 4096 and 8192 on
    GPUs, 256 on either with --short) is bench_test's benchQMatMul: int8 a
    [n, n] times the transpose of int8 b [n, n] (nn.Linear's weight
    layout) with exact int32 sums and a float32 rescale epilogue (a per
    tensor, b per output channel: its rows, scale max|b[r]|/127), out
    float32, of a and b uniform in [-1, 1). GFLOP/s counts 2n³ integer
    operations; GB/s the int8 operands and the float32 output. On CPUs
    the op is torch.ops.quantized.linear_dynamic (what a dynamic
    quantized Linear runs; torch 1.13 has no static int8 linear with
    float output) over b quantized per channel (quantize_per_channel)
    and prepacked for the engine (linear_prepack) outside the timer: each
    call quantizes float32 a per tensor (a pass for its min and max, one
    to round it to uint8 with a zero point), runs the int8 GEMM with
    int32 sums and rescales them into float32 (the zero point's
    correction and the scales a·b per column), into a newly allocated
    output (the op has no out= form). a's quantization, O(n²) against the
    GEMM's O(n³), is the peer's extra work: zbench's op takes a already
    in int8. a gets 8 bits where the CPU has VNNI, else torch's 7-bit
    reduce_range, which keeps the uint8·int8 pair sums of VPMADDUBSW
    from saturating int16 ("int8-reduce-range:"). On CUDA a (zbench's
    static scale 1/127) and b (per row) are quantized outside the timer
    and the op is torch._int_mm(qa, qbᵀ) (cuBLASLt, int32 out; torch >=
    2.1, without which the case is skipped) into a preallocated int32
    buffer, then torch.mul by the per-column scale sa·sb into the float32
    output: the epilogue is a second kernel. rel-err: 256 sampled entries
    against the float64 product of the unquantized inputs, held to
    TOLERANCE's 1e-2 (bench_test's int8MatMulErr);
  * BenchmarkBERT dtype=int8 (CPUs only: dynamic quantization has no
    CUDA kernels; the f32 cases' batches and lengths) is the f32 model
    after torch.ao.quantization.quantize_dynamic(model, {nn.Linear},
    dtype=torch.qint8) on the engine above, eager (--compile too): every
    Linear, the six of each encoder layer and the pooler's, holds int8
    weights with one scale per tensor and quantizes its input per tensor
    in each call (7-bit: the dynamic Linear always asks for
    reduce_range), float32 out; the embeddings, layer norms and the
    attention core stay float32. zbench's int8 BERT differs: static W8A8,
    weights per output channel, input scales calibrated ahead, the pooler
    in float. Timed and checked as the f32 cases: rel-err against the
    float64 model of the unquantized weights, held to MODEL_TOLERANCE's
    5e-2;
  * BenchmarkResNet dtype=int8 (CPUs only: the quantized convolutions
    have no CUDA kernels, and the GPU's int8 points are skipped; batches
    1 and 8, not run with --short) is FX graph mode static post-training
    quantization of the f32 model (torch.ao.quantization.quantize_fx):
    prepare_fx with get_default_qconfig_mapping(engine) for the engine
    above and torch's default backend_config, which fuses conv-bn-relu
    (BatchNorm folded into the convolution, as zbench folds it) in eval
    mode; calibration as bench_test's (resnetCalibration), 8 batches of
    one N(0, 1) 224×224 image each from torch generators seeded 9000 to
    9007 (the distribution and seeds of zbench's, not its values: Go draws
    them from its own PCG), apart from the timed and the golden inputs,
    but with torch's default observers of the engine's qconfig where
    zbench takes the 99.99 percentile of a histogram: HistogramObserver
    (its L2-error range search) for activations, per-tensor uint8 with a
    zero point (7-bit, reduce_range, under fbgemm's and x86's qconfig
    whatever int8-reduce-range says: that line is the matmul's; 8-bit
    under onednn's and qnnpack's), and weights symmetric int8 per output
    channel with PerChannelMinMaxObserver (per tensor under qnnpack's);
    then convert_fx, the model made and calibrated once for both
    batches. Every convolution and the fc run in int8, and so do the
    residual additions (quantized.add_relu), max and average pooling, the
    image quantized on entry and the logits dequantized to float32 on
    exit; zbench's W8A8 (symmetric int8 activations too) adds the
    shortcut in float. Eager (--compile too), in the memory format
    above. GFLOP/s counts the f32 model's FLOPs; GB/s the int8 weights,
    one float32 scale per output channel and the float32 biases
    (models/resnet's WeightBytes of its int8 model; torch keeps its
    scales in float64 beside int64 zero points) and the float32 input.
    rel-err: the int8 model's logits on the golden case resnet50_224
    against torchvision's float64 logits, as for f32, held to bench_test's
    resnetInt8Tolerance of that case, 3e-2 (RESNET_TOLERANCE).

dtype=e4m3 and dtype=e5m2 are FP8 (OCP E4M3, torch.float8_e4m3fn: no
infinities, largest finite value 448; OCP E5M2, torch.float8_e5m2:
largest finite value 57344) through torch._scaled_mm, cuBLASLt's scaled
FP8 GEMM on CUDA (the config line "fp8-engine:"):

  * BenchmarkMatMul dtype=e4m3 and dtype=e5m2 (1024 on CPUs, 4096 and
    8192 on GPUs, none with --short) are bench_test's benchFP8MatMul: a
    [n, n] and b [n, n] uniform in [-1, 1) (the int8 case's float32
    values), b cast to E4M3 and a to E4M3 (e4m3: the forward's product) or
    to E5M2 (e5m2: the backward's, a gradient in E5M2 times a weight or an
    activation in E4M3), outside the timer, each with its per-tensor
    current scale s = fp8_max/amax in float32 (448 for E4M3, 57344 for
    E5M2): x·s rounded to float32, clamped to ±fp8_max (CastFP8's
    saturation; torch's casts do not saturate: past 464 float8_e4m3fn
    gives NaN, from 61440 float8_e5m2 gives inf) and rounded to nearest
    even by .to(torch.float8_e4m3fn) or .to(torch.float8_e5m2). The op is
    torch._scaled_mm(qa, qbᵀ, scale_a=1/sa, scale_b=1/sb,
    out_dtype=torch.float32): qa times the transpose of qb (a weight's
    layout, qb.t() the column-major view cuBLASLt wants, no copy), float32
    sums (use_fast_accum off), the scales' inverses (float32 tensors [1])
    applied to the sum, into a preallocated float32 output (out=; where
    the torch has no out= form, and under --alloc and --compile, a new
    one). torch 2.4+ takes the scales as required arguments and returns
    the product; 2.1 to 2.3 take them as optional keywords and return
    (product, amax): the peer uses whichever this torch takes. GFLOP/s
    counts 2n³; GB/s the FP8 operands and the float32 output (2n² + 4n²
    bytes, as benchFP8MatMul). rel-err: 256 sampled entries against the
    float64 product of the float32 values before the cast (the int8
    case's check), held to kernels.Tolerance(E4M3) and (E5M2), 1e-1
    (E4M3's three mantissa bits cost about 3% per product, E5M2's two
    about twice that). Skipped ("--- SKIP:" and "fp8-engine: none (why)")
    where torch has no float8_e4m3fn, no float8_e5m2 or no _scaled_mm
    (torch < 2.1: Debian's 1.13 on CPUs), where an NVIDIA GPU is below
    compute capability 8.9 (Ada, Hopper and newer have FP8 tensor cores),
    and where _scaled_mm fails on a 16×16 product tried first, e4m3×e4m3
    for both cases, then e5m2×e4m3 for e5m2 (no kernel for the device:
    CPUs run it where torch has a CPU _scaled_mm, as zbench runs FP8
    emulated on CPUs; a torch without that mix skips e5m2 alone, the
    config line then "fp8-engine: torch._scaled_mm (e5m2: none (why))").

On GPUs (--device cuda), as on the Go side:

  * BenchmarkMatMul adds the tensor-core cases: dtype=tf32 at 4096 (float32
    tensors with TF32 matmuls allowed, for that case only: every other case,
    f32 included, runs with TF32 off) and f16, bf16, int8, e4m3 and e5m2
    at 4096 and 8192;
  * BenchmarkKernels names end in /cache=hot or /cache=cold: cold writes
    zeros over an L2-sized buffer and synchronises before every timed call,
    outside the timer, and times each call (op and synchronize) on its own.
"""

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
REFERENCE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                             "testdata", "reference")
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


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


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
        lines.append(f"omp-wait-policy: {omp_wait_policy(self.libs)}")
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


def matmul_cases(short, gpu):
    """bench_test's matmulCases: GPUs add the tensor-core sizes, tf32 at
    4096 and f16, bf16, int8, e4m3 and e5m2 at 4096 and 8192 (bf16 at 4096
    with -short); CPUs add int8 at 1024 and 4096 and e4m3 and e5m2 at 1024;
    -short has int8 at 256 on every device and no FP8."""
    if short:
        cs = [("f32", 256, "resident"), ("f32", 1024, "resident"), ("f32", 256, "roundtrip"), ("int8", 256, "resident")]
        if gpu:
            cs.append(("bf16", 4096, "resident"))
        return cs
    cs = [("f32", n, "resident") for n in (256, 512, 1024, 2048, 4096)]
    cs += [("f32", 1024, "roundtrip"), ("f32", 4096, "roundtrip"), ("f16", 1024, "resident"), ("bf16", 1024, "resident")]
    if not gpu:
        cs += [("int8", 1024, "resident"), ("int8", 4096, "resident"), ("e4m3", 1024, "resident"),
               ("e5m2", 1024, "resident")]
    if gpu:
        cs.append(("tf32", 4096, "resident"))
        for n in (4096, 8192):
            cs += [("f16", n, "resident"), ("bf16", n, "resident"), ("int8", n, "resident"), ("e4m3", n, "resident"),
                   ("e5m2", n, "resident")]
    return cs


NUMPY_DTYPES = {"f32": np.float32, "f16": np.float16}


def matmul_setup(ctx, dt, n, transfer):
    dtype, dev = DTYPES[dt], ctx.device
    a, b = uniform(1, (n, n), dtype, dev), uniform(2, (n, n), dtype, dev)
    up = dt == "f16" and "matmul" in ctx.upcast
    mm = ctx.wrap(lambda x, y: x @ y)
    if ctx.alloc:
        c_box = [None]

        def compute():
            if up:
                c_box[0] = mm(a_cur[0].float(), b_cur[0].float()).to(dtype)
            else:
                c_box[0] = mm(a_cur[0], b_cur[0])

        a_cur, b_cur = [a], [b]
        result = lambda: c_box[0]
    else:
        c = torch.empty(n, n, dtype=dtype, device=dev)
        if ctx.compile:
            # torch.compile does not take out= arguments; it allocates.
            def compute():
                c.copy_(mm(a, b))
        elif up:
            a32, b32, c32 = (torch.empty(n, n, device=dev) for _ in range(3))

            def compute():
                a32.copy_(a)
                b32.copy_(b)
                torch.matmul(a32, b32, out=c32)
                c.copy_(c32)
        else:
            def compute():
                torch.matmul(a, b, out=c)

        result = lambda: c

    op = compute
    if transfer == "roundtrip":
        if dt not in NUMPY_DTYPES:
            raise NotImplementedError(f"roundtrip needs a numpy dtype; {dt} has none")
        host_a = a.cpu().numpy().copy()
        host_b = b.cpu().numpy().copy()
        host_c = np.empty((n, n), dtype=NUMPY_DTYPES[dt])
        if ctx.alloc:
            # Every iteration copies A and B into new tensors (to the device)
            # and C back into a new numpy array.
            def op():
                if ctx.cuda:
                    a_cur[0] = torch.from_numpy(host_a).to(dev)
                    b_cur[0] = torch.from_numpy(host_b).to(dev)
                else:
                    a_cur[0] = torch.from_numpy(host_a).clone()
                    b_cur[0] = torch.from_numpy(host_b).clone()
                compute()
                out = c_box[0].cpu().numpy()
                return out.copy() if not ctx.cuda else out
        else:
            # Uploads into the operand tensors and downloads into a host
            # buffer, as the Go benchmark's Upload/Download do.
            ta, tb, tc = torch.from_numpy(host_a), torch.from_numpy(host_b), torch.from_numpy(host_c)

            def op():
                a.copy_(ta)
                b.copy_(tb)
                compute()
                tc.copy_(c)

    def check():
        # 256 random entries recomputed in float64 from the same
        # (dtype-rounded) operands.
        rng = np.random.default_rng(3)
        i = torch.from_numpy(rng.integers(0, n, 256))
        j = torch.from_numpy(rng.integers(0, n, 256))
        ad = a.detach().cpu()[i, :].double()  # the sampled rows of A
        bd = b.detach().cpu()[:, j].double().t()  # and columns of B
        want = (ad * bd).sum(dim=1)
        got = result().detach().to("cpu", torch.float64)[i, j]
        return rel_err(got, want)

    size = torch.finfo(dtype).bits // 8
    return Work(op, check, flops=2.0 * n * n * n, nbytes=3.0 * n * n * size)


def cpu_has_vnni():
    """Whether the CPU has x86's VNNI (VPDPBUSD: uint8·int8 products summed
    straight into int32), /proc/cpuinfo's avx512_vnni or avx_vnni."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return "avx512_vnni" in flags or "avx_vnni" in flags
    except OSError:
        pass
    return False


def int8_engine():
    """The quantized engine of the CPU int8 cases: the first of
    INT8_ENGINES this torch has, or None."""
    have = torch.backends.quantized.supported_engines
    return next((e for e in INT8_ENGINES if e in have), None)


def use_int8_engine():
    """Selects int8_engine() for the quantized ops (their weights are
    packed for it); NotImplementedError (the SKIP line) without one."""
    engine = int8_engine()
    if engine is None:
        raise NotImplementedError(f"torch {torch.__version__} has no quantized engine "
                                  f"(supported: {', '.join(torch.backends.quantized.supported_engines)})")
    torch.backends.quantized.engine = engine
    return engine


def int8_reduce_range(engine):
    """reduce_range of the int8 matmul's linear_dynamic: 7-bit activations,
    which torch's dynamic quantized Linear always asks for, so that on x86
    without VNNI the uint8·int8 pairs that VPMADDUBSW sums into int16 cannot
    saturate; off (8 bits, as zbench's int8) where the CPU has VNNI, and for
    qnnpack, which ignores it."""
    return engine != "qnnpack" and not cpu_has_vnni()


def int8_config_lines(ctx):
    """The config lines of the int8 cases: int8-engine (the quantized
    engine on CPUs, torch._int_mm on CUDA) and, on CPUs,
    int8-reduce-range."""
    if ctx.cuda:
        if hasattr(torch, "_int_mm"):
            return ["int8-engine: torch._int_mm"]
        return [f"int8-engine: none (torch {torch.__version__} has no torch._int_mm)"]
    engine = int8_engine()
    if engine is None:
        return ["int8-engine: none (no quantized engine)"]
    return [f"int8-engine: {engine}", f"int8-reduce-range: {str(int8_reduce_range(engine)).lower()}"]


def qmatmul_setup(ctx, n):
    """BenchmarkMatMul dtype=int8: the W8A8 product of bench_test's
    benchQMatMul, out = (qa·qbᵀ)·(sa·sb) in float32, of a [n, n] and b
    [n, n] uniform in [-1, 1), b quantized per output channel (its rows,
    scale max|b[r]|/127). On CPUs torch.ops.quantized.linear_dynamic with
    the per-channel weights prepacked by linear_prepack (what a dynamic
    quantized Linear runs); on CUDA torch._int_mm and the rescale."""
    dev = ctx.device
    a, b = uniform(1, (n, n), torch.float32, dev), uniform(2, (n, n), torch.float32, dev)
    sb = b.abs().amax(1) / QMAX
    sb = torch.where(sb == 0, torch.ones_like(sb), sb)  # a row of zeros: scale 1
    box = [None]
    if ctx.cuda:
        if not hasattr(torch, "_int_mm"):
            raise NotImplementedError(f"torch {torch.__version__} has no torch._int_mm (int8 GEMM, torch >= 2.1)")
        # a per tensor with zbench's static scale 1/127 (|a| < 1), b per
        # row; both round half to even and clamp to the narrow range.
        sa = torch.full((1,), 1.0 / QMAX, dtype=torch.float32, device=dev)
        qa = torch.round(a / sa).clamp_(-QMAX, QMAX).to(torch.int8)
        qb = torch.round(b / sb[:, None]).clamp_(-QMAX, QMAX).to(torch.int8)
        bt = qb.t()  # [k, n], column-major: cuBLASLt's int8 layout, no copy
        scale = sa * sb  # [n]: the epilogue's AScale·BScale per column
        if ctx.alloc or ctx.compile:
            f = ctx.wrap(lambda x, y, s: torch._int_mm(x, y) * s)
            if ctx.alloc:
                op = lambda: box.__setitem__(0, f(qa, bt, scale))
            else:
                out = torch.empty(n, n, dtype=torch.float32, device=dev)
                op = lambda: box.__setitem__(0, out.copy_(f(qa, bt, scale)))
        else:
            acc = torch.empty(n, n, dtype=torch.int32, device=dev)
            out = torch.empty(n, n, dtype=torch.float32, device=dev)

            def op():
                torch._int_mm(qa, bt, out=acc)
                box[0] = torch.mul(acc, scale, out=out)

            try:
                op()
            except (TypeError, RuntimeError):  # no _int_mm.out: the int32 sums are allocated
                def op():
                    box[0] = torch.mul(torch._int_mm(qa, bt), scale, out=out)

                op()
    else:
        engine = use_int8_engine()
        qb = torch.quantize_per_channel(b, sb.double(), torch.zeros(n, dtype=torch.long), 0, torch.qint8)
        packed = torch.ops.quantized.linear_prepack(qb, None)
        rr = int8_reduce_range(engine)
        dyn = torch.ops.quantized.linear_dynamic
        # No out= form: the float32 output is allocated in every call.
        op = lambda: box.__setitem__(0, dyn(a, packed, rr))

    # The unquantized inputs' product, int8 a and b read, the float32
    # output written (benchQMatMul's bytes).
    return Work(op, lambda: sampled_abt_err(box[0], a, b, n), flops=2.0 * n * n * n, nbytes=6.0 * n * n)


def sampled_abt_err(out, a, b, n):
    """rel-err of out = a·bᵀ (a and b [n, n], b in a weight's layout) over
    256 random entries against the float64 products of a and b as given
    (bench_test's sampledMatMulErr of a and transpose(b)): for the int8 and
    FP8 cases, the float32 values before quantization, so that the error
    is the accuracy the speed costs. out[i, j] = a[i, :]·b[j, :]."""
    rng = np.random.default_rng(3)
    i = torch.from_numpy(rng.integers(0, n, 256))
    j = torch.from_numpy(rng.integers(0, n, 256))
    ad = a.detach().cpu()[i, :].double()
    bd = b.detach().cpu()[j, :].double()
    want = (ad * bd).sum(dim=1)
    got = out.detach()[i.to(out.device), j.to(out.device)]
    return rel_err(got, want)


def fp8_dtype(dt):
    """The torch dtype of FP8 dtype dt (FP8_FORMATS): torch.float8_e4m3fn
    or torch.float8_e5m2."""
    return getattr(torch, FP8_FORMATS[dt][0])


def fp8_scale(x, dt):
    """The per-tensor current scale of x's cast to FP8 dtype dt, as
    bench_test's benchFP8MatMul takes it: s = fp8_max/amax(|x|) in float32
    (448/amax for e4m3, 57344/amax for e5m2), a float32 tensor [1] on x's
    device (1 where x is all zeros, as CastFP8Rows takes it for a row of
    zeros)."""
    amax = x.detach().abs().amax().float().reshape(1)
    return torch.where(amax == 0, torch.ones_like(amax), torch.full_like(amax, FP8_FORMATS[dt][1]) / amax)


def fp8_saturated(x, s, dt):
    """x·s rounded to float32 and clamped to FP8 dtype dt's finite range
    (±448 for e4m3, ±57344 for e5m2): the values CastFP8 rounds to E4M3 or
    E5M2 (satfinite: beyond the largest finite value saturates to it; NaN
    stays NaN). torch's casts do not saturate (float8_e4m3fn, having no
    infinity, gives NaN past 464; float8_e5m2 gives inf from 61440), hence
    the clamp first."""
    m = FP8_FORMATS[dt][1]
    return (x.float() * s).clamp_(-m, m)


def cast_fp8(x, s, dt):
    """CastFP8 of x with scale s into FP8 dtype dt (torch.float8_e4m3fn or
    torch.float8_e5m2): round to nearest even of fp8_saturated(x, s, dt)."""
    return fp8_saturated(x, s, dt).to(fp8_dtype(dt))


def fp8_unsupported(ctx, dt):
    """Why this torch or ctx's device cannot run BenchmarkMatMul's FP8 dtype
    dt (a in dt, b in E4M3) through torch._scaled_mm, found without running
    it: torch has no float8_e4m3fn, no float8_e5m2 (for e5m2) or no
    _scaled_mm (all from 2.1), or the NVIDIA GPU is below compute
    capability 8.9. None when nothing says so (fp8_gemm then tries the
    op)."""
    for d in dict.fromkeys(("e4m3", dt)):
        name = FP8_FORMATS[d][0]
        if not hasattr(torch, name):
            return f"torch {torch.__version__} has no torch.{name}: FP8 {d.upper()} needs torch >= 2.1"
    if not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no torch._scaled_mm: the scaled FP8 GEMM needs torch >= 2.1"
    if ctx.cuda and getattr(torch.version, "hip", None) is None:
        cc = tuple(torch.cuda.get_device_capability(ctx.device))
        if cc < FP8_MIN_CAPABILITY:
            return (f"{torch.cuda.get_device_name(ctx.device)} is compute capability {cc[0]}.{cc[1]}: "
                    f"FP8 tensor cores need {FP8_MIN_CAPABILITY[0]}.{FP8_MIN_CAPABILITY[1]}")
    return None


def _scaled_mm_modern(a, b, sa, sb):
    # torch >= 2.4: the scales are required (positional), the product is
    # returned.
    return torch._scaled_mm(a, b, sa, sb, out_dtype=torch.float32)


def _scaled_mm_legacy(a, b, sa, sb):
    # torch 2.1-2.3: the scales are optional keywords, (product, amax) is
    # returned.
    r = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.float32)
    return r[0] if isinstance(r, (tuple, list)) else r


def fp8_gemm(ctx, dt):
    """(call, why) for FP8 dtype dt: call(qa, bt, scale_a, scale_b) runs
    torch._scaled_mm into a new float32 product on ctx's device in the form
    this torch takes (the modern one, else the 2.1-2.3 one), tried on a
    16×16 product of ones, qa in dt and bt in E4M3; or (None, why not)
    (fp8_unsupported, or the try's error: no kernel for the device, an FP8
    flavour or mix it lacks). e5m2 is tried only where e4m3 runs (else
    skipped for e4m3's reason: its b is E4M3 too). Found once per ctx and
    dt."""
    if dt not in ctx._fp8:
        why = fp8_unsupported(ctx, dt)
        call = None
        if why is None and dt != "e4m3":
            why = fp8_gemm(ctx, "e4m3")[1]
        if why is None:
            x = torch.ones(16, 16, device=ctx.device).to(fp8_dtype(dt))
            y = torch.ones(16, 16, device=ctx.device).to(fp8_dtype("e4m3"))
            one = torch.ones(1, device=ctx.device)
            errs = []
            for f in (_scaled_mm_modern, _scaled_mm_legacy):
                try:
                    got = f(x, y.t(), one, one)
                    ctx.sync()
                except (TypeError, RuntimeError, NotImplementedError) as e:
                    msg = (str(e).strip().split("\n")[0] or type(e).__name__)[:200]
                    if msg not in errs:
                        errs.append(msg)
                    continue
                if not isinstance(got, torch.Tensor):
                    errs.append(f"it returns a {type(got).__name__}")
                    continue
                if got.dtype == torch.float32 and tuple(got.shape) == (16, 16) and bool((got == 16).all()):
                    call = f
                    break
                errs.append(f"a {tuple(got.shape)} {got.dtype} product of ones that is not all 16")
            if call is None:
                mix = "" if dt == "e4m3" else f" for {FP8_FORMATS[dt][0]} a and float8_e4m3fn b"
                why = f"torch {torch.__version__}'s _scaled_mm fails on {ctx.device}{mix}: " + "; ".join(errs)
        ctx._fp8[dt] = (call, why)
    return ctx._fp8[dt]


def fp8_config_lines(ctx):
    """The config line of the FP8 cases: fp8-engine, torch._scaled_mm or
    none (why not: both cases are skipped); torch._scaled_mm (e5m2: none
    (why not)) where e4m3 runs but this torch or device lacks the
    e5m2×e4m3 mix (the e5m2 case alone is skipped)."""
    call, why = fp8_gemm(ctx, "e4m3")
    if call is None:
        return [f"fp8-engine: none ({why})"]
    call, why = fp8_gemm(ctx, "e5m2")
    if call is None:
        return [f"fp8-engine: torch._scaled_mm (e5m2: none ({why}))"]
    return ["fp8-engine: torch._scaled_mm"]


def fp8matmul_setup(ctx, n, dt):
    """BenchmarkMatMul dtype=e4m3 and dtype=e5m2 (dt): the scaled FP8 product
    of bench_test's benchFP8MatMul, out = (qa·qbᵀ)·(1/sa)·(1/sb) in
    float32, of a [n, n] and b [n, n] uniform in [-1, 1) (the int8 case's),
    a cast to dt (E4M3 or E5M2) and b to E4M3, each with its per-tensor
    current scale (fp8_scale, cast_fp8) outside the timer; the op is
    torch._scaled_mm(qa, qbᵀ, 1/sa, 1/sb) with float32 out and
    accumulation (use_fast_accum off), qbᵀ the column-major view cuBLASLt
    wants."""
    call, why = fp8_gemm(ctx, dt)
    if call is None:
        raise NotImplementedError(why)
    dev = ctx.device
    a, b = uniform(1, (n, n), torch.float32, dev), uniform(2, (n, n), torch.float32, dev)
    sa, sb = fp8_scale(a, dt), fp8_scale(b, "e4m3")
    qa, qb = cast_fp8(a, sa, dt), cast_fp8(b, sb, "e4m3")
    inv_a, inv_b = 1 / sa, 1 / sb  # float32 [1]: the scales' inverses
    bt = qb.t()  # [k, n], column-major: no copy
    box = [None]
    if ctx.alloc or ctx.compile:
        f = ctx.wrap(call)
        if ctx.alloc:
            op = lambda: box.__setitem__(0, f(qa, bt, inv_a, inv_b))
        else:
            out = torch.empty(n, n, dtype=torch.float32, device=dev)
            op = lambda: box.__setitem__(0, out.copy_(f(qa, bt, inv_a, inv_b)))
    else:
        out = torch.empty(n, n, dtype=torch.float32, device=dev)
        if call is _scaled_mm_modern:
            def op():
                torch._scaled_mm(qa, bt, inv_a, inv_b, out_dtype=torch.float32, out=out)
                box[0] = out
        else:
            amax = torch.empty((), dtype=torch.float32, device=dev)  # the 2.1-2.3 form's second output

            def op():
                torch._scaled_mm(qa, bt, scale_a=inv_a, scale_b=inv_b, out_dtype=torch.float32, out=(out, amax))
                box[0] = out

        try:
            op()
        except (TypeError, RuntimeError):  # no _scaled_mm.out: the output is allocated
            op = lambda: box.__setitem__(0, call(qa, bt, inv_a, inv_b))
            op()

    # Against the float32 values before the cast; FP8 a and b read, the
    # float32 output written (benchFP8MatMul's bytes).
    return Work(op, lambda: sampled_abt_err(box[0], a, b, n), flops=2.0 * n * n * n, nbytes=6.0 * n * n)


# ---------------------------------------------------------------- kernels


def kernel_shapes(short):
    return [(1, 128)] if short else [(8, 128), (8, 384)]


def kernel_dtypes(short):
    return ["f32"] if short else ["f32", "f16", "bf16"]


KERNEL_OPS = ["relu", "gelu", "layernorm", "softmax", "attention"]


def elementwise_setup(ctx, op_name, dt, batch, seq):
    """relu and gelu (exact, erf) on [batch·seq, 3072]; softmax over the last
    dimension of [batch, 12, seq, seq]."""
    dtype, dev = DTYPES[dt], ctx.device
    if op_name == "softmax":
        shape, seed, flops_per = (batch, HEADS, seq, seq), 14, 5
    else:
        shape, seed = (batch * seq, FFN), 10
        flops_per = 1 if op_name == "relu" else 8
    x = uniform(seed, shape, dtype, dev)
    n = x.numel()
    up = dt == "f16" and op_name in ctx.upcast
    f = {
        "relu": torch.relu,
        "gelu": F.gelu,
        "softmax": lambda t: torch.softmax(t, -1),
    }[op_name]
    f_out = {
        # torch.relu is clamp_min(x, 0); relu.out is a generated wrapper
        # that allocates and copies, clamp_min.out writes in place.
        "relu": lambda t, o: torch.clamp_min(t, 0, out=o),
        "gelu": lambda t, o: torch.ops.aten.gelu.out(t, out=o),
        "softmax": lambda t, o: torch.ops.aten._softmax.out(t, -1, False, out=o),
    }[op_name]
    box = [None]
    if ctx.alloc or ctx.compile:
        fc = ctx.wrap(f)
        if up:
            op = lambda: box.__setitem__(0, fc(x.float()).to(dtype))
        else:
            op = lambda: box.__setitem__(0, fc(x))
        result = lambda: box[0]
    else:
        out = torch.empty_like(x)
        if up:
            x32, o32 = torch.empty(shape, device=dev), torch.empty(shape, device=dev)
            op = upcast_op([x], out, lambda: f_out(x32, o32), [x32], o32)
        else:
            op = lambda: f_out(x, out)
        result = lambda: out

    def check():
        return rel_err(result(), f(x.detach().to("cpu", torch.float64)))

    size = torch.finfo(dtype).bits // 8
    return Work(op, check, flops=flops_per * n, nbytes=2.0 * n * size)


def layernorm_setup(ctx, dt, batch, seq):
    """LayerNorm over the last dimension of [batch·seq, 768], eps 1e-12."""
    dtype, dev = DTYPES[dt], ctx.device
    rows, d = batch * seq, HIDDEN
    x, g, b = uniform(11, (rows, d), dtype, dev), uniform(12, (d,), dtype, dev), uniform(13, (d,), dtype, dev)
    up = dt == "f16" and "layernorm" in ctx.upcast
    # torch has no out= kernel for layer norm (native_layer_norm.out is a
    # generated wrapper that allocates and copies, slower than this): the
    # op allocates its output in every mode. It is at most 9.4 MB, below
    # glibc's mmap threshold, so the allocation is cheap.
    ln = ctx.wrap(lambda t, gg, bb: F.layer_norm(t, (d,), gg, bb, LN_EPS))
    box = [None]
    if up and (ctx.alloc or ctx.compile):
        op = lambda: box.__setitem__(0, ln(x.float(), g.float(), b.float()).to(dtype))
    elif up:
        x32, g32, b32 = torch.empty(rows, d, device=dev), torch.empty(d, device=dev), torch.empty(d, device=dev)
        out = torch.empty_like(x)

        def op():
            x32.copy_(x)
            g32.copy_(g)
            b32.copy_(b)
            out.copy_(ln(x32, g32, b32))
            box[0] = out
    else:
        op = lambda: box.__setitem__(0, ln(x, g, b))
    result = lambda: box[0]

    def check():
        xd, gd, bd = (t.detach().to("cpu", torch.float64) for t in (x, g, b))
        return rel_err(result(), F.layer_norm(xd, (d,), gd, bd, LN_EPS))

    size = torch.finfo(dtype).bits // 8
    n = rows * d
    return Work(op, check, flops=8.0 * n, nbytes=(2.0 * n + 2 * d) * size)


def attention_setup(ctx, dt, batch, seq, heads=HEADS, hdim=HEAD_D, causal=False, row_step=None):
    """softmax(q·kᵀ/√hdim)·v with q, k, v [batch, heads, seq, hdim], causal
    or not. The check recomputes every row_step-th query row of every head
    in float64 (bench_test's attentionBench), or with row_step None every
    row."""
    dtype, dev = DTYPES[dt], ctx.device
    shape = (batch, heads, seq, hdim)
    q, k, v = (uniform(s, shape, dtype, dev) for s in (15, 16, 17))
    up = dt == "f16" and "attention" in ctx.upcast
    scale = 1 / math.sqrt(hdim)
    box = [None]
    if ctx.has_sdpa or ctx.alloc or ctx.compile:
        # scaled_dot_product_attention has no out= form: it allocates (the
        # output only, [batch, heads, seq, hdim]).
        fc = ctx.wrap(lambda a, b, c: attention_ref_ops(ctx, a, b, c, causal))
        if up:
            op = lambda: box.__setitem__(0, fc(q.float(), k.float(), v.float()).to(dtype))
        else:
            op = lambda: box.__setitem__(0, fc(q, k, v))
        result = lambda: box[0]
    else:
        # Eager matmul-softmax-matmul on preallocated buffers: the scale is
        # folded into the first GEMM (baddbmm with beta=0 ignores its input);
        # causal masks the scores above the diagonal in place.
        bh = batch * heads
        cdt = torch.float32 if up else dtype
        q3, k3, v3 = (torch.empty(bh, seq, hdim, dtype=cdt, device=dev) for _ in range(3))
        s3, p3 = torch.empty(bh, seq, seq, dtype=cdt, device=dev), torch.empty(bh, seq, seq, dtype=cdt, device=dev)
        o3 = torch.empty(bh, seq, hdim, dtype=cdt, device=dev)
        out = torch.empty(shape, dtype=dtype, device=dev)
        mask = torch.ones(seq, seq, dtype=torch.bool, device=dev).triu(1) if causal else None
        if up:
            srcs = [q.view(bh, seq, hdim), k.view(bh, seq, hdim), v.view(bh, seq, hdim)]
        else:
            q3, k3, v3 = (t.view(bh, seq, hdim) for t in (q, k, v))
            o3 = out.view(bh, seq, hdim)

        def eager():
            torch.baddbmm(s3, q3, k3.transpose(1, 2), beta=0, alpha=scale, out=s3)
            if mask is not None:
                s3.masked_fill_(mask, float("-inf"))
            torch.ops.aten._softmax.out(s3, -1, False, out=p3)
            torch.bmm(p3, v3, out=o3)

        if up:
            op = upcast_op(srcs, out.view(bh, seq, hdim), eager, [q3, k3, v3], o3)
        else:
            op = eager
        result = lambda: out

    def check():
        if row_step is None:
            qd, kd, vd = (t.detach().to("cpu", torch.float64) for t in (q, k, v))
            s = (qd @ kd.transpose(-2, -1)) * scale
            if causal:
                s = s.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), float("-inf"))
            return rel_err(result(), torch.softmax(s, -1) @ vd)
        # The sampled rows, in float64 on the device (the full k and v in
        # float64 are 256 MiB each at the GPU sizes).
        rows = torch.arange(0, seq, row_step, device=q.device)
        qd = q.detach()[:, :, rows, :].double()
        kd, vd = k.detach().double(), v.detach().double()
        s = (qd @ kd.transpose(-2, -1)) * scale  # [batch, heads, rows, seq]
        if causal:  # row i sees keys 0…i
            keys = torch.arange(seq, device=q.device)
            s = s.masked_fill(keys[None, :] > rows[:, None], float("-inf"))
        want = torch.softmax(s, -1) @ vd
        got = result().detach()[:, :, rows, :]
        return rel_err(got, want)

    size = torch.finfo(dtype).bits // 8
    n = batch * heads * seq * hdim
    flops = 4.0 * batch * heads * seq * seq * hdim
    if causal:  # only the lower triangle of the scores is computed
        flops /= 2
    return Work(op, check, flops=flops, nbytes=4.0 * n * size)


def attention_shapes(short, gpu):
    """bench_test's attentionShapes: (batch, heads, seq, hdim, causal)."""
    if not gpu:
        if short:
            return [(1, 4, 128, 64, False)]
        return [(1, 12, 512, 64, False), (1, 12, 512, 64, True)]
    if short:
        return [(16, 16, 1024, 128, False)]
    return [(16384 // seq, 2048 // hdim, seq, hdim, causal)
            for hdim in (64, 128) for seq in (1024, 4096) for causal in (False, True)]


def attention_dtypes(short, gpu):
    """BenchmarkAttention's dtypes: f32 on CPUs, f16 and bf16 on GPUs
    (the first only with -short)."""
    dts = ["f16", "bf16"] if gpu else ["f32"]
    return dts[:1] if short else dts


# ---------------------------------------------------------------- BERT

BERT_SEED = bert_ref.BASE_SEED
BERT_BASE = bert_ref.BASE_CONFIG
BERT_TRAIN = dict(bert_ref.BASE_CONFIG, num_hidden_layers=6)  # BenchmarkBERTTrain's 6 layers
BERT_MASK_ID = 103  # [MASK] of bert-base-uncased's vocabulary
BERT_TRAIN_SEQ = 128
BERT_TRAIN_LR, BERT_TRAIN_WD = 1e-4, 0.01

_bert_weights = {}


def bert_weights(kind):
    """The float32 CPU state dict of the synthetic weights of "base"
    (BertModel) or "train" (the 6-layer BertForMaskedLM), made once."""
    if kind not in _bert_weights:
        if kind == "base":
            m = bert_ref.BertModel(bert_ref.BertConfig.from_dict(BERT_BASE))
        else:
            m = bert_ref.BertForMaskedLM(bert_ref.BertConfig.from_dict(BERT_TRAIN))
        _bert_weights[kind] = bert_ref.synthetic_(m, BERT_SEED).state_dict()
    return _bert_weights[kind]


def bert_cases(short, gpu):
    """BenchmarkBERT's (dtype, batch, seq): f32 and int8 on CPUs (int8 is
    dynamic quantization, which runs on CPUs only); every float dtype on
    GPUs."""
    if not gpu:
        points = [(1, 128)] if short else [(1, 128), (8, 128), (1, 384)]
        return [(dt, b, s) for dt in ("f32", "int8") for b, s in points]
    if short:
        return [("f32", 1, 128), ("f16", 8, 128)]
    return [(dt, b, s) for dt in ("f32", "f16", "bf16", "mixed") for b in (1, 8, 32) for s in (128, 384)]


def bert_train_cases(short, gpu):
    """BenchmarkBERTTrain's (dtype, batch) at seq 128."""
    if not gpu:
        return [("f32", 1)] if short else [("f32", 8)]
    if short:
        return [("f32", 8)]
    return [(dt, b) for dt in ("f32", "bf16") for b in (8, 32)]


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


def bert_setup(ctx, dt, batch, seq):
    """BERT-base inference of [batch, seq] random ids; dtype=int8 is the
    float32 model under quantize_dynamic (nn.Linear to qint8)."""
    need_f16(ctx, dt)
    if dt == "int8" and ctx.cuda:
        raise NotImplementedError("dynamic quantization (quantize_dynamic) runs on CPUs only")
    cfg = bert_ref.BertConfig.from_dict(BERT_BASE)
    dev = ctx.device
    wdtype = torch.float32 if dt in ("mixed", "int8") else DTYPES[dt]
    model = bert_ref.BertModel(cfg, sdpa=ctx.has_sdpa, attn_dtype=torch.float16 if dt == "mixed" else None)
    model.load_state_dict(bert_weights("base"))
    model.to(device=dev, dtype=wdtype).eval()
    g = torch.Generator().manual_seed(21)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g).to(dev)
    mask = torch.ones_like(ids)
    types = torch.zeros_like(ids)
    if dt == "int8":
        # Eager mode quantization, eager under --compile too.
        use_int8_engine()
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        fwd = model
    else:
        fwd = ctx.wrap(lambda a, m, t: model(a, m, t))
    box = [None]

    def op():
        with torch.no_grad():
            box[0] = fwd(ids, mask, types)

    def check():
        rows = sorted({0, batch - 1})
        ref = bert_ref.BertModel(cfg)
        if dt == "int8":  # the unquantized weights
            ref.load_state_dict(bert_weights("base"))
        else:
            ref.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
        ref.to(device=dev, dtype=torch.float64).eval()
        with torch.no_grad():
            h, p = ref(ids[rows], mask[rows], types[rows])
        want = torch.cat([h.flatten(), p.flatten()])
        del ref, h, p
        free_device_memory(ctx)
        h, p = box[0]
        return rel_err(torch.cat([h[rows].flatten(), p[rows].flatten()]), want)

    return Work(op, check, rates=[(batch, "seq/s")], peak=True)


def bert_train_setup(ctx, dt, batch, seq=BERT_TRAIN_SEQ):
    """One AdamW step of the 6-layer BertForMaskedLM on a fixed [batch, seq]
    batch."""
    need_f16(ctx, dt)
    if dt == "bf16" and not ctx.cuda:
        raise NotImplementedError("bf16 training (autocast) runs on CUDA only")
    cfg = bert_ref.BertConfig.from_dict(BERT_TRAIN)
    dev = ctx.device
    model = bert_ref.BertForMaskedLM(cfg, sdpa=ctx.has_sdpa)
    model.load_state_dict(bert_weights("train"))
    model.to(dev).train()  # the modules have no dropout
    ids, types, labels = bert_ref.mlm_batch(torch.Generator().manual_seed(22), cfg, batch, seq, BERT_MASK_ID)
    ids, types, labels = ids.to(dev), types.to(dev), labels.to(dev)
    mask = torch.ones_like(ids)

    # The float64 logits of the first row under the initial weights, kept
    # on the CPU (outside peak-B).
    ref = bert_ref.BertForMaskedLM(cfg)
    ref.load_state_dict(model.state_dict())
    ref.to(device=dev, dtype=torch.float64)
    with torch.no_grad():
        want = ref(ids[:1], mask[:1], types[:1])[1][0].cpu()
    del ref
    free_device_memory(ctx)

    params = list(model.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": BERT_TRAIN_WD},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=BERT_TRAIN_LR)
    fwd = ctx.wrap(lambda a, m, t, y: model(a, m, t, y))
    first = {"logits": None, "pending": True}

    def op():
        opt.zero_grad(set_to_none=True)
        if dt == "bf16":
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss, logits = fwd(ids, mask, types, labels)
        else:
            loss, logits = fwd(ids, mask, types, labels)
        if first["pending"]:  # the warm-up step's, for the check
            first["logits"], first["pending"] = logits[0].detach().to("cpu", torch.float64), False
        del logits
        loss.backward()
        opt.step()

    def check():
        return rel_err(first["logits"], want)

    return Work(op, check, rates=[(batch * seq, "tok/s")], peak=True)


# ---------------------------------------------------------------- Llama

LLAMA_GOLDEN = os.path.join(os.path.dirname(REFERENCE_DIR), "golden", "llama.safetensors")
# model name: (HF config dict, synthetic seed, the golden case Verify uses)
LLAMA_MODELS = {
    "tinyllama": (llama_ref.TINYLLAMA_CONFIG, llama_ref.TINYLLAMA_SEED, "tinyllama"),
    "tiny": (llama_ref.TINY_CONFIG, llama_ref.TINY_SEED, "tiny"),
    # BenchmarkLlamaLoRA's CPU model: TinyLlama's first two layers (the
    # same synthetic weights), its embeddings, norm and head.
    "tinyllama-2l": (dict(llama_ref.TINYLLAMA_CONFIG, num_hidden_layers=2), llama_ref.TINYLLAMA_SEED, None),
}
_llama_weights = {}


def llama_weights(name):
    """The model's seeded synthetic state_dict (float32, CPU), made once."""
    if name not in _llama_weights:
        cfg_dict, seed, _ = LLAMA_MODELS[name]
        m = llama_ref.LlamaForCausalLM(llama_ref.LlamaConfig.from_dict(cfg_dict))
        _llama_weights.clear()  # one model's weights at a time
        _llama_weights[name] = llama_ref.synthetic_(m, seed).state_dict()
    return _llama_weights[name]


def llama_cases(short, gpu):
    """(model, dtypes, prefill (batch, seq)s, decode (batch, ctx)s, generate
    (prompt, new)s) as bench_test's Llama benchmarks choose them."""
    if short:
        return "tiny", ["f32"], [(1, 128)], [(1, 128)], [(32, 16)]
    if gpu:
        return ("tinyllama", ["f16", "bf16"], [(1, 512), (8, 512), (32, 512)],
                [(b, c) for b in (1, 8, 32) for c in (128, 512, 2048)], [(128, 100)])
    return "tinyllama", ["f32", "bf16"], [(1, 128)], [(1, 128)], [(32, 16)]


def llama_work(cfg, kind, batch, n, dt_size):
    """FLOPs and least bytes of a prefill of n tokens or a decode step at
    context n: models/llama's PrefillWork and DecodeWork."""
    H, I, V, L = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.num_hidden_layers
    qd, kvd = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    macs = 2 * H * qd + 2 * H * kvd + 3 * H * I
    weights = dt_size * (L * (macs + 2 * H) + H + V * H)
    hd = 2 * 2 * cfg.head_dim * cfg.num_attention_heads
    if kind == "prefill":
        flops = L * (batch * n * 2 * macs + batch * hd * n * (n + 1) / 2) + batch * 2 * H * V
        cache = 2 * L * batch * n * kvd * dt_size
        return flops, weights + batch * n * H * dt_size + cache
    k = n + 1
    flops = L * batch * (2 * macs + hd * k) + batch * 2 * H * V
    return flops, weights + batch * H * dt_size + 2 * L * batch * k * kvd * dt_size


class RefLlama:
    """llama.py's module: the reference implementation of the peer."""

    def __init__(self, model):
        self.model = model

    def logits(self, ids, mask):
        return self.model(ids, mask)

    def prefill(self, ids, mask):
        """Runs a prompt into a new KV cache, the last position's logits
        only; returns the cache."""
        cache = llama_ref.new_cache(self.model)
        self.model(ids, mask, cache, logits_to_keep=1)
        return cache

    def decode(self, cache, nxt, mask):
        """One step against the cache, which stays as it was: torch.cat
        makes the step's own copy, as Hugging Face's dynamic cache does."""
        return self.model(nxt, mask, [[k, v] for k, v in cache])

    def step(self, cache, ids, mask):
        """One step of a generation: the last position's logits [B, V],
        the cache extended."""
        return self.model(ids, mask, cache, logits_to_keep=1)[:, -1]


class HFLlama:
    """transformers' LlamaForCausalLM (the --llama hf peer)."""

    def __init__(self, model, transformers):
        self.model = model
        self.cache_type = transformers.DynamicCache
        params = inspect.signature(model.forward).parameters
        self.keep = ({"logits_to_keep": 1} if "logits_to_keep" in params
                     else {"num_logits_to_keep": 1} if "num_logits_to_keep" in params else {})

    def logits(self, ids, mask):
        # Positions from the mask, as generate computes them (forward
        # alone would number padded positions).
        pos = (mask.cumsum(-1) - 1).masked_fill_(mask == 0, 1)
        return self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).logits

    def prefill(self, ids, mask):
        cache = self.cache_type()
        self.model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True, **self.keep)
        return cache

    def decode(self, cache, nxt, mask):
        past = cache.get_seq_length()
        out = self.model(input_ids=nxt, attention_mask=mask, past_key_values=cache, use_cache=True).logits
        cache.crop(past)
        return out


def llama_model(ctx, name, dt):
    """The peer's implementation (RefLlama or HFLlama) with the model's
    synthetic weights in dt, and its config."""
    need_f16(ctx, dt)
    cfg_dict, _, _ = LLAMA_MODELS[name]
    cfg = llama_ref.LlamaConfig.from_dict(cfg_dict)
    if ctx.llama == "hf":
        import transformers  # present: main checked
        model = llama_hf_check.hf_model(transformers, cfg_dict, llama_weights(name), "sdpa", DTYPES[dt], ctx.device)
        return HFLlama(model, transformers), cfg
    model = llama_ref.LlamaForCausalLM(cfg)
    model.load_state_dict(llama_weights(name))
    return RefLlama(model.to(device=ctx.device, dtype=DTYPES[dt]).eval()), cfg


def llama_check(ctx, impl, name):
    """rel-err of the model's logits on its golden case against the
    reference's float64 logits, as bench_test's Verify computes it."""
    _, cases = bert_ref.parse_safetensors(open(LLAMA_GOLDEN, "rb").read())
    case = LLAMA_MODELS[name][2]
    ids = cases[case + "/input_ids"].long().to(ctx.device)
    mask = cases[case + "/attention_mask"].long().to(ctx.device)
    with torch.no_grad():
        got = impl.logits(ids, mask).double().cpu()
    return rel_err(got.flatten(), cases[case + "/logits"].double().flatten())


def llama_ids(seed, batch, n, vocab, device):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (batch, n), generator=g).to(device)


def llama_prefill_setup(ctx, name, dt, batch, seq):
    """A prefill of batch prompts of seq tokens into an empty KV cache,
    with the logits of the last positions only (logits_to_keep=1, as HF's
    generate asks for them)."""
    impl, cfg = llama_model(ctx, name, dt)
    ids = llama_ids(batch * 100000 + seq, batch, seq, cfg.vocab_size, ctx.device)
    mask = torch.ones_like(ids)
    prefill = ctx.wrap(impl.prefill)

    def op():
        with torch.no_grad():
            prefill(ids, mask)

    flops, nbytes = llama_work(cfg, "prefill", batch, seq, torch.tensor([], dtype=DTYPES[dt]).element_size())
    return Work(op, lambda: llama_check(ctx, impl, name), flops, nbytes, rates=[(batch * seq, "tok/s")], peak=True)


def llama_decode_setup(ctx, name, dt, batch, ctx_len):
    """One KV-cached decode step of batch sequences at context ctx_len,
    every op at the same context (see RefLlama.decode, HFLlama.decode)."""
    impl, cfg = llama_model(ctx, name, dt)
    ids = llama_ids(batch * 100000 + ctx_len, batch, ctx_len, cfg.vocab_size, ctx.device)
    with torch.no_grad():
        cache = impl.prefill(ids, torch.ones_like(ids))
    nxt = torch.arange(3, 3 + batch, device=ctx.device)[:, None]
    mask = torch.ones(batch, ctx_len + 1, dtype=torch.int64, device=ctx.device)
    decode = ctx.wrap(impl.decode)

    def op():
        with torch.no_grad():
            decode(cache, nxt, mask)

    size = torch.tensor([], dtype=DTYPES[dt]).element_size()
    flops, nbytes = llama_work(cfg, "decode", batch, ctx_len, size)
    return Work(op, lambda: llama_check(ctx, impl, name), flops, nbytes, rates=[(batch, "tok/s")], peak=True)


class FirstTokenTimer:
    """A generate streamer that notes when the first new token arrives
    (put is called with the prompt first, then each new token)."""

    def __init__(self):
        self.puts, self.first = 0, None

    def put(self, value):
        self.puts += 1
        if self.puts == 2:
            self.first = time.perf_counter()

    def end(self):
        pass


def llama_generate_setup(ctx, name, dt, prompt, new):
    """Greedy generation at batch 1: prefill, then new−1 cached decode steps.
    reference: each token chosen by argmax and read back (.item()), as a
    user's loop does; hf: model.generate. ttft-ms and the decode tok/s after
    the first token are averaged over every call, the warm-up included (as
    bench_test does)."""
    impl, cfg = llama_model(ctx, name, dt)
    ids = llama_ids(prompt, 1, prompt, cfg.vocab_size, ctx.device)
    mask = torch.ones(1, prompt, dtype=torch.int64, device=ctx.device)
    stats = {"calls": 0, "ttft": 0.0, "decode": 0.0, "steps": 0}

    if isinstance(impl, HFLlama):
        extra_args = {}
        if ctx.compile:
            impl.model.forward = torch.compile(impl.model.forward, mode="reduce-overhead", fullgraph=True)
            extra_args["cache_implementation"] = "static"

        def run():
            timer = FirstTokenTimer()
            t0 = time.perf_counter()
            impl.model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=new,
                                min_new_tokens=new, pad_token_id=0, streamer=timer, **extra_args)
            ctx.sync()
            return t0, timer.first, time.perf_counter()
    else:
        if ctx.compile:
            raise NotImplementedError("the reference's generate loop grows its shapes every step; "
                                      "use --llama hf for compiled generation")

        def run():
            t0 = time.perf_counter()
            cache = llama_ref.new_cache(impl.model)
            m = mask
            tok = int(impl.step(cache, ids, m)[0].argmax())
            t1 = time.perf_counter()
            for _ in range(new - 1):
                m = torch.ones(1, m.shape[1] + 1, dtype=torch.int64, device=ctx.device)
                tok = int(impl.step(cache, torch.tensor([[tok]], device=ctx.device), m)[0].argmax())
            return t0, t1, time.perf_counter()

    def op():
        with torch.no_grad():
            t0, t1, t2 = run()
        stats["calls"] += 1
        stats["ttft"] += t1 - t0
        stats["decode"] += t2 - t1
        stats["steps"] += new - 1

    def extra():
        return [(1e3 * stats["ttft"] / stats["calls"], "ttft-ms"), (stats["steps"] / stats["decode"], "tok/s")]

    size = torch.tensor([], dtype=DTYPES[dt]).element_size()
    flops, nbytes = llama_work(cfg, "prefill", 1, prompt, size)
    for i in range(new - 1):
        f, b = llama_work(cfg, "decode", 1, prompt + i, size)
        flops, nbytes = flops + f, nbytes + b
    return Work(op, lambda: llama_check(ctx, impl, name), flops, nbytes, peak=True, extra=extra)


# ---------------------------------------------------------------- LoRA

# BenchmarkLlamaLoRA's adapter and optimizer (PEFT's LoraConfig(r=8,
# lora_alpha=32, lora_dropout=0.1, target_modules=["q_proj", "v_proj"]);
# AdamW over the adapter, the gradients clipped to norm 1).
LORA_R, LORA_ALPHA, LORA_DROPOUT, LORA_TARGETS = 8, 32, 0.1, ["q_proj", "v_proj"]
LORA_LR, LORA_MAX_GRAD_NORM = 2e-4, 1.0
LORA_SEED = 23  # the initial adapter and the batch
# BenchmarkLlamaLoRA's model names: the LLAMA_MODELS entry of each.
LORA_MODELS = {"tiny": "tiny", "tinyllama-2l": "tinyllama-2l", "tinyllama-1.1b": "tinyllama"}


def lora_cases(short, gpu):
    """BenchmarkLlamaLoRA's (model, dtype, batch, seq)."""
    if short:
        return [("tiny", "f32", 1, 32)]
    if gpu:
        return [("tinyllama-1.1b", "bf16", b, 512) for b in (4, 8)]
    return [("tinyllama-2l", "f32", 1, 128)]


class RefLoRA:
    """llama.py's model with lora.py's LoraLinear (PEFT's semantics)."""

    def __init__(self, cfg_dict, weights, init, dropout, wdtype, device):
        model = llama_ref.LlamaForCausalLM(llama_ref.LlamaConfig.from_dict(cfg_dict))
        model.load_state_dict(weights)
        params = lora_ref.inject(model, LORA_R, LORA_ALPHA, LORA_TARGETS, dropout)
        lora_ref.load_adapter(params, init)
        model.to(device=device, dtype=wdtype)
        lora_ref.set_lora_dtype(model, torch.float32 if wdtype != torch.float64 else wdtype)
        self.model = model

    def loss(self, ids, labels):
        return lora_ref.causal_lm_loss(self.model(ids), labels)


class HFLoRA:
    """transformers' LlamaForCausalLM under peft's get_peft_model (the
    --llama hf peer): adapters in float32 over the base weights' dtype, as
    peft's autocast_adapter_dtype keeps them."""

    def __init__(self, cfg_dict, weights, init, dropout, wdtype, device):
        import peft  # present: lora_setup checked
        import transformers  # present: main checked
        base = llama_hf_check.hf_model(transformers, cfg_dict, weights, "sdpa", wdtype, device)
        cfg = peft.LoraConfig(r=LORA_R, lora_alpha=LORA_ALPHA, lora_dropout=dropout, target_modules=LORA_TARGETS,
                              task_type="CAUSAL_LM")
        model = peft.get_peft_model(base, cfg)
        adapter_dtype = torch.float32 if wdtype != torch.float64 else wdtype
        loaded = set()
        with torch.no_grad():
            for name, p in model.named_parameters():
                if not p.requires_grad:
                    continue
                saved = name.replace(".default.", ".")  # peft's saved name, as lora.py's
                if saved not in init:
                    raise ValueError(f"peft adapter parameter {name} ({saved}) is not in lora.py's adapter")
                p.data = init[saved].to(device=device, dtype=adapter_dtype)
                loaded.add(saved)
        if loaded != set(init):
            raise ValueError(f"peft's adapter lacks {sorted(set(init) - loaded)}")
        self.model = model

    def loss(self, ids, labels):
        return self.model(input_ids=ids, labels=labels, use_cache=False).loss


def lora_setup(ctx, name, dt, batch, seq):
    """One LoRA training step per op (forward, loss, backward, gradient
    clipping, AdamW step, zero_grad(set_to_none=True)) on a fixed batch of
    random ids (no padding, labels = ids), the base frozen."""
    if dt == "bf16" and not ctx.cuda:
        raise NotImplementedError("bf16 training (autocast) runs on CUDA only")
    key = LORA_MODELS[name]
    cfg_dict = LLAMA_MODELS[key][0]
    weights = llama_weights(key)
    impl_type = RefLoRA
    if ctx.llama == "hf":
        try:
            import peft  # noqa: F401
        except ImportError:
            raise NotImplementedError("--llama hf: BenchmarkLlamaLoRA needs peft (not installed)")
        impl_type = HFLoRA
    g = torch.Generator().manual_seed(LORA_SEED)
    ids = torch.randint(3, cfg_dict["vocab_size"], (batch, seq), generator=g).to(ctx.device)
    labels = ids.clone()
    # lora.py's initial adapter: B nonzero, so that the adapter takes part
    # in the loss the check compares.
    shapes = lora_ref.adapter_shapes(llama_ref.LlamaConfig.from_dict(cfg_dict), LORA_R, LORA_TARGETS)
    init = lora_ref.init_adapter(shapes, g)

    # The float64 loss of the batch under the initial weights, no dropout,
    # by the reference (lora.py over llama.py, whichever --llama runs), on
    # the device (outside peak-B).
    ref = RefLoRA(cfg_dict, weights, init, 0.0, torch.float64, ctx.device)
    ref.model.eval()
    with torch.no_grad():
        want = ref.loss(ids, labels).detach().cpu()
    del ref
    free_device_memory(ctx)

    impl = impl_type(cfg_dict, weights, init, LORA_DROPOUT, DTYPES[dt], ctx.device)
    impl.model.train()
    params = [p for p in impl.model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=LORA_LR)
    fwd = ctx.wrap(impl.loss)
    first = {"loss": None}

    def step():
        if dt == "bf16":
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss = fwd(ids, labels)
        else:
            loss = fwd(ids, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, LORA_MAX_GRAD_NORM)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    def op():
        if first["loss"] is None:
            # The first warm-up (outside the timer) also runs the checked
            # step: without dropout, to be comparable with the float64
            # loss; then the timed kind of step (a compiled forward meets
            # train mode there, not in the timer).
            impl.model.eval()
            first["loss"] = step().detach().to("cpu", torch.float64)
            impl.model.train()
        step()

    return Work(op, lambda: rel_err(first["loss"], want), rates=[(batch * seq, "tok/s")], peak=True)


# ---------------------------------------------------------------- ResNet

RESNET_GOLDEN = os.path.join(os.path.dirname(REFERENCE_DIR), "golden", "resnet.safetensors")
RESNET_MODEL, RESNET_CASE, RESNET_SIZE = "resnet50", "resnet50_224", 224
# models/resnet's Config.FLOPs(1, 224, 224) of resnet50: the hooks' count
# must agree.
RESNET_FLOPS_PER_IMAGE = 8.178368512e9
# bench_test's resnetTolerance: 1e-4 in f32 (torchvision's own float32
# model is 3.8e-7 off the float64 reference on resnet50_224), else
# bench_test's benchTolerance, whose deepModels leave resnet50 at the
# kernels' tolerances (tf32 takes f16's).
# int8 is bench_test's resnetInt8Tolerance of resnet50_224 (zbench's W8A8
# model measures 1.5e-2 to 1.6e-2 there).
RESNET_TOLERANCE = {"f32": 1e-4, "tf32": 2e-3, "f16": 2e-3, "bf16": 1.6e-2, "int8": 3e-2}
# bench_test's calibration of its int8 ResNets (resnetCalibBatches,
# resnetCalibSeed): this many batches of N(0, 1) images of the benchmark's
# size, one image each (benchResNetInt8 calibrates on single images), the
# i-th from a generator seeded RESNET_CALIB_SEED + i, apart from the
# benchmark's inputs (uniform, seeded with the batch size) and the golden's.
RESNET_CALIB_BATCHES, RESNET_CALIB_SEED = 8, 9000

_resnet = {}


def resnet_cases(short, gpu):
    """BenchmarkResNet's (dtype, batch), in bench_test's order
    (resnetBenchPrecisions, resnetBatches, then benchResNetInt8's int8 at
    the same batches; int8 is skipped on GPUs). --short runs f32 at batch
    1 alone (bench_test's -short adds int8 at batch 1)."""
    if short:
        return [("f32", 1)]
    if not gpu:
        return [(dt, b) for dt in ("f32", "int8") for b in (1, 8)]
    return [(dt, b) for dt in ("f32", "tf32", "f16", "bf16", "int8") for b in (1, 4, 8, 16, 32, 64, 128, 256, 512)]


def resnet_memory_format(ctx):
    """The torch memory format of --resnet-memory-format (Ctx)."""
    return torch.channels_last if ctx.resnet_format == "channels_last" else torch.contiguous_format


def conv_flops(model, x):
    """The FLOPs of model(x): two per multiply-add of every Conv2d
    (2·N·Ho·Wo·Co·Ci/G·Kh·Kw) and Linear (2·N·in·out), from forward hooks;
    pooling, BatchNorm, additions and ReLU are not counted, as in
    models/resnet."""
    total = [0]

    def hook(mod, inputs, out):
        if isinstance(mod, torch.nn.Conv2d):
            total[0] += 2 * out.numel() * mod.weight[0].numel()  # weight [Co, Ci/G, Kh, Kw]
        else:
            total[0] += 2 * out.numel() * mod.in_features

    hooks = [m.register_forward_hook(hook) for m in model.modules()
             if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
    return float(total[0])


def resnet_base():
    """(the float32 CPU model with the synthetic weights, FLOPs per
    224×224 image, the golden case's pixel_values and logits), made once.
    The reference is imported here: torchvision is needed for ResNet
    alone."""
    if not _resnet:
        try:
            import resnet as resnet_ref
        except ImportError as e:
            raise NotImplementedError(f"testdata/reference/resnet.py needs torchvision: {e}")
        model = resnet_ref.resnet(RESNET_MODEL)
        flops = conv_flops(model, torch.zeros(1, 3, RESNET_SIZE, RESNET_SIZE))
        if flops != RESNET_FLOPS_PER_IMAGE:
            raise RuntimeError(f"torchvision {RESNET_MODEL} counts {flops:.10g} FLOPs per {RESNET_SIZE}² image, "
                               f"models/resnet {RESNET_FLOPS_PER_IMAGE:.10g}: the architectures differ")
        with open(RESNET_GOLDEN, "rb") as f:
            _, cases = bert_ref.parse_safetensors(f.read())
        pixels, logits = cases[RESNET_CASE + "/pixel_values"], cases[RESNET_CASE + "/logits"]
        _resnet.update(model=model, flops=flops, pixels=pixels, logits=logits)
    return _resnet


def resnet_setup(ctx, dt, batch):
    """ResNet-50 inference of [batch, 3, 224, 224] seeded random pixels
    (uniform in [-1, 1)), model and input in dt and in the memory format
    of --resnet-memory-format."""
    need_f16(ctx, dt)
    base = resnet_base()
    dtype, dev, fmt = DTYPES[dt], ctx.device, resnet_memory_format(ctx)
    model = copy.deepcopy(base["model"]).to(device=dev, dtype=dtype, memory_format=fmt).eval()
    size = RESNET_SIZE
    x = uniform(batch, (batch, 3, size, size), dtype, dev).contiguous(memory_format=fmt)
    fwd = ctx.wrap(lambda t: model(t))
    grad_off = getattr(torch, "inference_mode", torch.no_grad)

    def op():
        with grad_off():
            fwd(x)

    def check():
        px = base["pixels"].to(device=dev, dtype=dtype).contiguous(memory_format=fmt)
        with grad_off():
            got = fwd(px)
        return rel_err(got, base["logits"])

    weights = sum(t.numel() * t.element_size() for t in model.state_dict().values() if t.is_floating_point())
    return Work(op, check, flops=base["flops"] * batch, nbytes=weights + batch * 3 * size * size * 4,
                rates=[(batch, "img/s")], peak=True)


def resnet_int8_model(ctx):
    """The FX graph mode static int8 model of resnet_base()'s float32 one,
    in the memory format of --resnet-memory-format, and its weight bytes,
    made once: prepare_fx with get_default_qconfig_mapping of the int8
    engine (fusing conv-bn-relu), calibrated on RESNET_CALIB_BATCHES
    N(0, 1) images, convert_fx."""
    if "int8" not in _resnet:
        try:
            from torch.ao.quantization import get_default_qconfig_mapping
            from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
        except ImportError as e:
            raise NotImplementedError(f"torch {torch.__version__} has no FX graph mode quantization "
                                      f"with QConfigMapping (torch >= 1.13): {e}")
        engine = use_int8_engine()
        base = resnet_base()
        fmt = resnet_memory_format(ctx)
        model = copy.deepcopy(base["model"]).to(memory_format=fmt).eval()
        shape = (1, 3, RESNET_SIZE, RESNET_SIZE)
        example = torch.zeros(shape).contiguous(memory_format=fmt)
        prepared = prepare_fx(model, get_default_qconfig_mapping(engine), (example,))
        with torch.no_grad():
            for i in range(RESNET_CALIB_BATCHES):
                g = torch.Generator().manual_seed(RESNET_CALIB_SEED + i)
                prepared(torch.randn(shape, generator=g).contiguous(memory_format=fmt))
        qmodel = convert_fx(prepared).eval()
        # What zbench's WeightBytes counts of its int8 model: the int8
        # weights, a float32 scale per output channel (per tensor: one)
        # and the float32 biases.
        nbytes = 0
        for m in qmodel.modules():
            if not callable(getattr(m, "weight", None)):
                continue
            w = m.weight()
            if not isinstance(w, torch.Tensor) or not w.is_quantized:
                continue
            per_channel = w.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric)
            scales = w.q_per_channel_scales().numel() if per_channel else 1
            bias = m.bias() if callable(getattr(m, "bias", None)) else None
            nbytes += w.numel() * w.element_size() + 4 * scales + (4 * bias.numel() if bias is not None else 0)
        _resnet["int8"] = (qmodel, nbytes)
    return _resnet["int8"]


def resnet_int8_setup(ctx, batch):
    """BenchmarkResNet dtype=int8: ResNet-50 inference of [batch, 3, 224,
    224] seeded random pixels (uniform in [-1, 1), float32 in and out)
    through the FX graph mode static int8 model (resnet_int8_model), eager
    (--compile too). CPUs only."""
    if ctx.cuda:
        raise NotImplementedError("FX graph mode static quantization (prepare_fx, convert_fx) runs on CPUs only: "
                                  "its quantized convolutions have no CUDA kernels")
    base = resnet_base()
    model, weights = resnet_int8_model(ctx)
    fmt = resnet_memory_format(ctx)
    size = RESNET_SIZE
    x = uniform(batch, (batch, 3, size, size), torch.float32, ctx.device).contiguous(memory_format=fmt)
    grad_off = getattr(torch, "inference_mode", torch.no_grad)

    def op():
        with grad_off():
            model(x)

    def check():
        # The int8 model's logits on the golden case against torchvision's
        # float64 ones, as the f32 point's (its float32 model is 3.8e-7
        # from them: also the error against the float32 reference).
        px = base["pixels"].to(torch.float32).contiguous(memory_format=fmt)
        with grad_off():
            got = model(px)
        return rel_err(got, base["logits"])

    return Work(op, check, flops=base["flops"] * batch, nbytes=weights + batch * 3 * size * size * 4,
                rates=[(batch, "img/s")], peak=True)


def kernel_setup(ctx, op_name, dt, batch, seq):
    if op_name == "layernorm":
        return layernorm_setup(ctx, dt, batch, seq)
    if op_name == "attention":
        return attention_setup(ctx, dt, batch, seq)
    return elementwise_setup(ctx, op_name, dt, batch, seq)


# ---------------------------------------------------------------- selection


def split_regexp(s):
    """Splits a -bench pattern at the slashes outside brackets and
    parentheses, as the testing package does."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c in "[(":
            depth += 1
        elif c in "])" and depth > 0:
            depth -= 1
        elif c == "/" and depth == 0:
            parts.append(s[start:i])
            start = i + 1
        i += 1
    parts.append(s[start:])
    return parts


def make_matcher(pattern):
    """Go's -bench matching: each slash-separated element of the pattern is
    an unanchored regexp matched against the same level of the name."""
    regs = [re.compile(p) for p in split_regexp(pattern)]

    def match(name):
        elems = name.split("/")
        return all(r.search(e) for r, e in zip(regs, elems))

    return match


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
    return out


class Bench:
    """One named benchmark: its setup (returning a Work), its dtype and
    tolerance (default: the dtype's TOLERANCE), whether it runs with TF32
    matmuls and with cold caches."""

    def __init__(self, name, dt, setup, tf32=False, cold=False, tol=None):
        self.name, self.dt, self.setup, self.tf32, self.cold = name, dt, setup, tf32, cold
        self.tol = TOLERANCE[dt] if tol is None else tol


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
    blas = find_blas()
    blas.set_threads(threads)
    env = Env(blas, min_threads, args.device)
    refusals = env.refusals(args.allow_slow_blas)
    if refusals and not args.check:
        return refuse(refusals)

    print("goos: " + {"win32": "windows"}.get(sys.platform, sys.platform))
    print("goarch: " + goarch())
    print("pkg: " + PKG)
    print("cpu: " + cpu_model())
    print(f"impl: torch-{torch.__version__}")
    for line in env.config_lines():
        print(line)
    if ctx.cuda:
        print("gpu: " + torch.cuda.get_device_name())
        print("cuda: " + str(torch.version.cuda))
        print(f"gpu-l2-bytes: {ctx.l2_bytes}")
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
            print(f"{var.lower().replace('_', '-')}: {os.environ[var]}")
    print("attention: " + ("sdpa" if ctx.has_sdpa else "eager"))
    print("resnet-memory-format: " + ctx.resnet_format)
    for line in int8_config_lines(ctx) + fp8_config_lines(ctx):
        print(line)
    if ctx.cuda:
        print("cudnn-benchmark: " + str(torch.backends.cudnn.benchmark).lower())
    if args.llama == "hf":
        print(f"llama-impl: transformers-{transformers.__version__}")
        try:
            import peft
            print(f"lora-impl: peft-{peft.__version__}")
        except ImportError:
            print("lora-impl: none (peft is not installed: BenchmarkLlamaLoRA is skipped)")
    else:
        print("llama-impl: reference")
    print("outputs: " + ("allocated" if args.alloc or args.compile else "preallocated"))
    if args.compile:
        print("compile: torch.compile")
    if ctx.upcast:
        ops = ",".join(o for o in ["matmul"] + KERNEL_OPS if o in ctx.upcast)
        print("f16-upcast: " + ops)
        log(f"torch {torch.__version__} has no float16 kernels on {args.device} for {ops}: "
            "their dtype=f16 benchmarks compute in float32, casting inputs and output inside the timer")
    print("peer-usable: " + env.usable())
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
        print(u)
    sys.stdout.flush()

    suffix = f"-{threads}" if threads != 1 else ""
    failed = False
    for bench in benchmarks(ctx, args.short):
        name, tol = bench.name, bench.tol
        if not match(name):
            continue
        # TF32 for dtype=tf32 alone: the f32 cases measure IEEE float32.
        ctx.set_tf32(bench.tf32)
        ctx.reset_compiled()
        flush = ctx.flush if bench.cold else None
        try:
            work = bench.setup()
        except (NotImplementedError, RuntimeError) as e:
            log(f"--- SKIP: {name}: {e}")
            continue
        err = None
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
            print("\t".join(fields), flush=True)
        del work
        ctx.set_tf32(False)
        free_device_memory(ctx)
    if failed:
        print("FAIL")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
