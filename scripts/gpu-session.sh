#!/usr/bin/env bash
# gpu-session.sh STEP OUT
#
# The routine on a GPU host that has no Go: run from the repository root
# with the binaries of `make gpu-bin` in bin/gpu. Results go to OUT.
# On an H200 the CUDA tests, the golden tests, llama_hf_check and memcheck
# over the conformance suite took under 90 s each; a whole bench
# step takes far longer than ten minutes (narrow it below):
#   check   conformance suite and CUDA tests (ZBENCH_REQUIRE_GPU=1), the
#           golden tests and the BERT training curves in f32, bf16 and FP8
#           (OUT/bert-train-curve/*.jsonl, for zbench report), then
#           compute-sanitizer memcheck and racecheck over the conformance suite,
#           and testdata/reference/llama.py against transformers'
#           LlamaForCausalLM (llama_hf_check.py)
#   bench   BenchmarkMatMul, BenchmarkKernels, BenchmarkAttention,
#           BenchmarkMemPool, BenchmarkBERT, BenchmarkBERTTrain, the Llama
#           benchmarks (LoRA fine-tuning included), BenchmarkResNet and
#           BenchmarkServe on
#           dev=cuda (COUNT times, BENCHTIME each; BENCH=regexp for a part,
#           matched per name level as go test -bench does: setup dominates,
#           MatMul, Attention and BERT in f32/tf32/f16/bf16 took 200 s
#           for 29 of their 49 benchmarks at COUNT=6 BENCHTIME=0.1s on an
#           H200), then the PyTorch peer,
#           eager and, where torch has it, torch.compile, on the same host;
#           the Llama rows with transformers' LlamaForCausalLM and generate,
#           and LoRA with PEFT (--llama hf), where they are installed
#   verify  the lent GPU's one call, within BUDGET seconds (default 480):
#           the CUDA tests and the golden tests, memcheck over the
#           conformance suite, then one point of every workload (the list
#           below, most wanted first), zbench and then the PyTorch peer on
#           that point, -count COUNT (3) at BENCHTIME (0.2s) each; then, with
#           time left, Nsight Compute on the three points furthest behind
#           the peer. Every result is appended to OUT as it comes, a step
#           whose estimate no longer fits is skipped, and OUT/summary.txt
#           lists what passed, failed and was skipped.
# Baseline files: OUT/zbench.txt, OUT/torch-eager.txt, OUT/torch-compile.txt,
# for baselines/<gpu-id>/ (OUT/gpu-id holds the folder name).
set -euo pipefail
step=${1:?usage: gpu-session.sh check|bench|verify OUT}
out=${2:?usage: gpu-session.sh check|bench|verify OUT}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin/gpu
mkdir -p "$out"
# make gpu-bin leaves the binaries xz-compressed: unpack those newer than
# their unpacked copy (with Python's lzma where the host has no xz).
for xz in "$bin"/*.test.xz; do
  [ -e "$xz" ] || continue
  exe=${xz%.xz}
  if [ ! -x "$exe" ] || [ "$xz" -nt "$exe" ]; then
    if command -v xz >/dev/null; then
      xz -dc "$xz" >"$exe"
    else
      python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$xz" >"$exe"
    fi
    chmod +x "$exe"
  fi
done
[ -x "$bin/cuda.test" ] && [ -x "$bin/bench.test" ] || { echo "gpu-session: run make gpu-bin first (bin/gpu)" >&2; exit 1; }
name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1 || true)
echo "gpu-$(echo "$name" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')" >"$out/gpu-id"
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true

case $step in
check)
  (cd "$root/kernels/cuda" && ZBENCH_REQUIRE_GPU=1 "$bin/cuda.test" -test.v -test.count=1) >"$out/cuda-test.txt" 2>&1 &&
    echo "cuda tests: PASS" || echo "cuda tests: FAIL (see cuda-test.txt)"
  (cd "$root/bench_test" && "$bin/bench.test" -test.run 'Golden|TrainCurve' -test.v -bert.curve-log "$out/bert-train-curve") \
    >"$out/golden-test.txt" 2>&1 &&
    echo "golden tests: PASS" || echo "golden tests: FAIL (see golden-test.txt)"
  if [ -x "$bin/zbench.test" ]; then
    (cd "$root/cmd/zbench" && "$bin/zbench.test" -test.v) >"$out/zbench-test.txt" 2>&1 &&
      echo "zbench command tests: PASS" || echo "zbench command tests: FAIL (see zbench-test.txt)"
  fi
  (cd "$root" && timeout 300 python3 testdata/reference/llama_hf_check.py --device cuda) >"$out/llama-hf-check.txt" 2>&1 &&
    echo "llama.py against transformers: PASS" || echo "llama.py against transformers: FAIL (see llama-hf-check.txt)"
  san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n1 || true)
  if [ -z "$san" ]; then
    echo "compute-sanitizer not found" | tee "$out/sanitizer.txt"
  else
    for tool in memcheck racecheck; do
      (cd "$root/kernels/cuda" && ZBENCH_REQUIRE_GPU=1 "$san" --tool "$tool" --error-exitcode 3 \
        "$bin/cuda.test" -test.run 'Conformance|GPU' -test.count=1) >"$out/sanitizer-$tool.txt" 2>&1 &&
        echo "compute-sanitizer $tool: no errors" || echo "compute-sanitizer $tool: errors (see sanitizer-$tool.txt)"
    done
  fi
  ;;
bench)
  count=${COUNT:-6}
  benchtime=${BENCHTIME:-1s}
  bench=${BENCH:-(MatMul|Kernels|Attention|MemPool|BERT|Llama|ResNet|Serve)/dev=cuda}
  (cd "$root/bench_test" && "$bin/bench.test" -test.run '^$' -test.bench "$bench" -test.count "$count" \
    -test.benchtime "$benchtime" -test.timeout 2h) >"$out/zbench.txt"
  llama=reference
  python3 -c 'import transformers' 2>/dev/null && llama=hf
  python3 "$root/baselines/peers/torch_bench.py" --device cuda --llama "$llama" --count "$count" --benchtime "$benchtime" --bench "$bench" >"$out/torch-eager.txt"
  if python3 -c 'import torch, sys; sys.exit(0 if hasattr(torch, "compile") else 1)'; then
    python3 "$root/baselines/peers/torch_bench.py" --device cuda --llama "$llama" --compile --count "$count" --benchtime "$benchtime" --bench "$bench" >"$out/torch-compile.txt"
  fi
  ;;
verify)
  exec "$root/scripts/gpu-verify.sh" "$out"
  ;;
*) echo "gpu-session: unknown step $step (check, bench or verify)" >&2; exit 2 ;;
esac
