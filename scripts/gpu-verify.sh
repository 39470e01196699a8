#!/usr/bin/env bash
# gpu-verify.sh OUT
#
# The verify step of scripts/gpu-session.sh (which unpacks the binaries of
# make gpu-bin into bin/gpu and calls this): a lent GPU's one call. Within
# BUDGET seconds (default 480) it runs, in this order,
#   1. the CUDA tests and the golden tests on the device (ZBENCH_REQUIRE_GPU=1;
#      the CPU's goldens are make test's), the attention conformance cases
#      again on the Hopper wgmma kernel (ZBENCH_CUDA_FLASH=wgmma), and
#   2. compute-sanitizer memcheck over the conformance suite (attention on
#      the wgmma kernel), side by side,
#   3. one point of every workload (POINTS below, most wanted first):
#      zbench's benchmark, then the PyTorch peer's on the same point, each
#      -count COUNT (3) at BENCHTIME (0.2s); the peer is one process for
#      every point (torch_bench.py --stdin), restarted after a point it did
#      not finish in time,
#   4. Nsight Compute over the three points furthest behind the peer (or
#      PROFILE's).
# Each step has an estimate of its seconds; a step whose estimate no longer
# fits in what is left is skipped, and a step that runs is cut at its cap
# (150 s for each test step, a point's estimate for each side of it, 60 s
# for a profile) or at the deadline, whichever comes first. Results are
# appended to OUT as they come (zbench.txt, zbench-wgmma.txt, torch-eager.txt,
# the tests' logs in tests.txt, Nsight Compute's in ncu.txt: with
# gpu-session.sh's two, eight files, the most a lent call brings back), so a
# call cut short still returns everything measured before; OUT/summary.txt
# says what passed, failed or was skipped or cut, how many results each
# point gave (0 where the device has no such benchmark), and ends with the
# steps skipped or cut for time, by name.
#
# DEV (default cuda) names the device of the points and PY (python3) the
# Python with PyTorch: DEV=cpu with a small BUDGET rehearses the call's
# ordering and cut-offs on a machine without a GPU. ONLY (an extended
# regexp, default every point) keeps the points whose name it matches, for
# a call that measures what changed since a committed one; PROFILE (names
# separated by spaces) gives the points to profile instead of the three
# furthest behind in this call, and PROFILE_BUDGET (150) the seconds the
# points leave for the profiles (0 when ncu is absent).
set -euo pipefail
out=${1:?usage: gpu-verify.sh OUT}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/bin/gpu}
dev=${DEV:-cuda}
budget=${BUDGET:-480}
count=${COUNT:-3}
benchtime=${BENCHTIME:-0.2s}
py=${PY:-python3}
only=${ONLY:-.}
profile=${PROFILE:-}
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -n1 || true)
reserve=${PROFILE_BUDGET:-150}
[ -n "$ncu" ] || reserve=0
mkdir -p "$out"
out=$(cd "$out" && pwd)
summary=$out/summary.txt
start=$(date +%s)
deadline=$((start + budget))

left() { echo $((deadline - $(date +%s))); }

note() { echo "$*" | tee -a "$summary"; }

# fits NAME EST [RESERVE]: whether EST seconds are left for step NAME with
# RESERVE (0) more kept back; records a skip where they are not.
fits() {
  local l
  l=$(($(left) - ${3:-0}))
  if ((l < $2)); then
    note "skipped for time: $1 (estimated ${2}s, ${l}s left)"
    return 1
  fi
}

# drop_cut_line LOG drops LOG's last line where it is a benchmark line that a
# cut left without its figures: it would not parse.
drop_cut_line() { sed -i '$ { /^Benchmark/ { /ns\/op/! d } }' "$1"; }

# run NAME EST CAP DIR LOG TAG CMD...: CMD in DIR, cut after CAP seconds or
# at the deadline, whichever comes first, its output appended to LOG with
# TAG before each line; notes PASS, FAIL or CUT.
run() {
  local name=$1 est=$2 cap=$3 dir=$4 log=$5 tag=$6 t0 rc=0 limit
  shift 6
  fits "$name" "$((est > 0 ? est : 1))" || return 0
  limit=$(left)
  ((cap < limit)) && limit=$cap
  t0=$(date +%s)
  (cd "$dir" && exec timeout --kill-after=5 "$limit" "$@") 2>&1 | sed -u "s|^|$tag|" >>"$log" || rc=$?
  case $rc in
  0) note "$name: PASS ($(($(date +%s) - t0))s)" ;;
  124 | 137)
    drop_cut_line "$log"
    note "$name: CUT after $(($(date +%s) - t0))s (see ${log#"$out"/})"
    ;;
  *) note "$name: FAIL, exit $rc ($(($(date +%s) - t0))s, see ${log#"$out"/})" ;;
  esac
}

# pattern NAME: the go test -bench pattern that selects exactly the
# benchmark NAME (each level anchored).
pattern() { echo "^Benchmark$1\$" | sed 's|/|$/^|g'; }

# The points: estimated seconds (set-up included, both sides, from the
# first lent call's times with room to spare; each side is cut after that
# long), the benchmark without its Benchmark prefix (dev=@
# for the device), whether the PyTorch peer has it and, for a variant of
# an earlier point, the environment that makes it one (its results go to
# zbench-VALUE.txt, VALUE being the variable's). First one point of
# each workload, then the second points (the rest of the issue's targets),
# then the rows with no peer.
POINTS=$(
  cat <<'EOF'
25 MatMul/dev=@/dtype=bf16/m=8192/n=8192/k=8192/transfer=resident torch
60 LlamaDecode/dev=@/dtype=bf16/model=tinyllama/batch=1/ctx=512 torch
60 LlamaPrefill/dev=@/dtype=bf16/model=tinyllama/batch=1/seq=512 torch
70 LlamaGenerate/dev=@/dtype=bf16/model=tinyllama/prompt=128/new=100 torch
90 LlamaLoRA/dev=@/dtype=bf16/model=tinyllama-1.1b/batch=8/seq=512 torch
25 ResNet/dev=@/model=resnet50/dtype=bf16/batch=256 torch
25 BERTTrain/dev=@/dtype=bf16/batch=32/seq=128 torch
25 BERT/dev=@/dtype=f16/batch=1/seq=128 torch
25 Attention/dev=@/dtype=f16/batch=4/heads=16/seq=4096/hdim=128/causal=true torch
15 Attention/dev=@/dtype=f16/batch=4/heads=16/seq=4096/hdim=128/causal=true - ZBENCH_CUDA_FLASH=wgmma
20 MatMul/dev=@/dtype=int8/m=8192/n=8192/k=8192/transfer=resident torch
25 MatMul/dev=@/dtype=e4m3/m=8192/n=8192/k=8192/transfer=resident torch
15 MatMul/dev=@/dtype=tf32/m=4096/n=4096/k=4096/transfer=resident torch
15 BERT/dev=@/dtype=f32/batch=1/seq=128 torch
20 BERT/dev=@/dtype=f16/batch=32/seq=384 torch
15 BERT/dev=@/dtype=f16/batch=32/seq=384 - ZBENCH_CUDA_FLASH=wgmma
20 MatMul/dev=@/dtype=f16/m=8192/n=8192/k=8192/transfer=resident torch
10 MatMul/dev=@/dtype=f32/m=1024/n=1024/k=1024/transfer=resident torch
20 ResNet/dev=@/model=resnet50/dtype=bf16/batch=1 torch
20 BERTTrain/dev=@/dtype=f32/batch=32/seq=128 torch
10 BERT/dev=@/dtype=int8/batch=1/seq=128 -
15 MatMul/dev=@/dtype=bf16/m=1/n=5632/k=2048/transfer=resident/cache=cold -
60 LlamaDecode/dev=@/dtype=w8a16/model=tinyllama/batch=1/ctx=512 -
60 Serve/dev=@/model=tinyllama/scenario=offline -
EOF
)

cd "$root"
note "gpu-verify: DEV=$dev BUDGET=${budget}s COUNT=$count BENCHTIME=$benchtime, $(date -u +%FT%TZ)"

# 1 and 2, side by side (the host has cores to spare, and nothing is timed).
run "cuda tests" 90 150 kernels/cuda "$out/tests.txt" "[cuda] " env ZBENCH_REQUIRE_GPU=1 "$bin/cuda.test" -test.count=1 &
run "cuda attention tests, wgmma" 30 60 kernels/cuda "$out/tests.txt" "[cuda-wgmma] " env ZBENCH_REQUIRE_GPU=1 ZBENCH_CUDA_FLASH=wgmma \
  "$bin/cuda.test" -test.run 'Conformance/Attention|LaunchSignatures' -test.count=1 &
run "golden tests" 90 150 bench_test "$out/tests.txt" "[golden] " env ZBENCH_REQUIRE_GPU=1 "$bin/bench.test" -test.run "Golden/dev=$dev" -test.count=1 &
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n1 || true)
if [ -z "$san" ]; then
  note "memcheck: compute-sanitizer not found"
else
  run "memcheck" 90 150 kernels/cuda "$out/tests.txt" "[memcheck] " env ZBENCH_REQUIRE_GPU=1 ZBENCH_CUDA_FLASH=wgmma \
    "$san" --tool memcheck --error-exitcode 3 "$bin/cuda.test" -test.run 'Conformance|GPU' -test.count=1 &
fi
wait

# 3. The points, zbench then the peer on each.
llama=reference
"$py" -c 'import transformers' 2>/dev/null && llama=hf

# The peer is one torch_bench.py --stdin process for every point (one
# start-up: importing torch and making the CUDA context took seconds a
# point), started at its first point and again after a point it did not
# finish: a point's pattern goes to its stdin, its results to
# torch-eager.txt, and it says on stderr when the point is done.
peer_dir=$(mktemp -d)
peer_pid=
peer_start() {
  rm -f "$peer_dir/in" "$peer_dir/err"
  mkfifo "$peer_dir/in" "$peer_dir/err"
  "$py" baselines/peers/torch_bench.py --device "$dev" --llama "$llama" --count "$count" --benchtime "$benchtime" \
    --tune off --stdin <"$peer_dir/in" >>"$out/torch-eager.txt" 2>"$peer_dir/err" &
  peer_pid=$!
  exec {peer_in}>"$peer_dir/in" {peer_err}<"$peer_dir/err"
}
peer_stop() {
  [ -n "$peer_pid" ] || return 0
  exec {peer_in}>&- {peer_err}<&-
  kill "$peer_pid" 2>/dev/null || true
  wait "$peer_pid" 2>/dev/null || true
  peer_pid=
}
trap 'peer_stop; rm -rf "$peer_dir"' EXIT

# peer_point NAME EST: the peer's run of point NAME, cut after EST seconds
# or at the deadline; notes PASS, SKIP, FAIL or CUT.
peer_point() {
  local name=$1 est=$2 pat t0 end status=PASS line
  fits "torch $name" 1 || return 0
  [ -n "$peer_pid" ] || peer_start
  pat=$(pattern "$name")
  t0=$(date +%s)
  end=$((t0 + est))
  ((end < deadline)) || end=$deadline
  # In a subshell: a peer that has ended would kill the script with SIGPIPE.
  if ! (echo "$pat" >&"$peer_in") 2>/dev/null; then
    peer_stop
    note "torch $name: FAIL, the peer had ended (see torch-eager.txt)"
    return 0
  fi
  while :; do
    if ((end <= $(date +%s))) || ! IFS= read -r -t $((end - $(date +%s))) line <&"$peer_err"; then
      # Out of time, or the peer ended: stop it; the next point starts another.
      peer_stop
      drop_cut_line "$out/torch-eager.txt"
      note "torch $name: CUT after $(($(date +%s) - t0))s, or the peer ended (see torch-eager.txt)"
      return 0
    fi
    case $line in
    "torch_bench: done: $pat") break ;;
    "--- FAIL"*) status=FAIL ;;
    "--- SKIP"*) [ "$status" = FAIL ] || status=SKIP ;;
    *"matched no benchmark"*) status="no such benchmark" ;;
    esac
    echo "$line" >>"$out/torch-eager.txt"
  done
  note "torch $name: $status ($(($(date +%s) - t0))s)"
}
while read -r est point peer envs; do
  [ -n "$point" ] || continue
  name=${point//@/$dev}
  [[ $name =~ $only ]] || continue
  log=$out/zbench.txt
  if [ -n "$envs" ]; then # a variant of an earlier point: its own file
    log=$out/zbench-${envs##*=}.txt
    name="$name ($envs)"
  fi
  fits "$name" "$est" "$reserve" || continue
  if [[ $name == Serve/* && ! -s .cache/tokenizer-ref/llama2/tokenizer.json ]]; then
    note "skipped: $name needs .cache/tokenizer-ref/llama2/tokenizer.json (make tokenizer-ref), which the call did not carry"
    continue
  fi
  bench=${point//@/$dev}
  before=$(grep -c "^Benchmark$bench-" "$log" 2>/dev/null || true)
  run "zbench $name" 0 "$est" bench_test "$log" "" env $envs "$bin/bench.test" -test.run '^$' \
    -test.bench "$(pattern "$bench")" -test.count "$count" -test.benchtime "$benchtime"
  after=$(grep -c "^Benchmark$bench-" "$log" 2>/dev/null || true)
  note "zbench $name: $((${after:-0} - ${before:-0})) of $count results"
  [ "$peer" != torch ] || peer_point "$bench" "$est"
done <<<"$POINTS"
peer_stop

# 4. Nsight Compute over PROFILE or the three points furthest behind the
# peer.
behind=
if [ -n "$profile" ]; then
  behind=$(tr ' ' '\n' <<<"$profile" | sed '/^$/d; s/$/ given/')
  note "profiles of: $profile"
elif [ -s "$out/zbench.txt" ] && [ -s "$out/torch-eager.txt" ]; then
  behind=$("$py" scripts/gpu-behind.py "$out/zbench.txt" "$out/torch-eager.txt" 3 2>&1 || true)
  note "furthest behind the peer: $behind"
fi
if [ -z "$ncu" ]; then
  note "profiles: ncu not found"
elif [ -n "$behind" ]; then
  i=0
  while read -r name ratio; do
    i=$((i + 1))
    why="$ratio of the peer's speed"
    [ "$ratio" != given ] || why="given in PROFILE"
    # The timed calls' kernels alone (zbench.ProfileEnv: Measure marks
    # its timed loop), the first 20 of them.
    run "ncu $name ($why)" 45 60 bench_test "$out/ncu.txt" "[ncu $i] " env ZBENCH_PROFILE_TIMED=1 "$ncu" \
      --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
      --section Occupancy --profile-from-start off --launch-count 20 \
      "$bin/bench.test" -test.run '^$' -test.bench "$(pattern "$name")" -test.benchtime 3x
  done < <(grep -v '^#' <<<"$behind" || true)
fi

left_out=$(sed -nE 's/^skipped for time: (.*) \(estimated .*/\1/p; s/^(.*): CUT after.*/\1 (cut)/p' "$summary" | paste -sd';' - | sed 's/;/; /g')
note "skipped or cut for time: ${left_out:-none}"
note "gpu-verify: done in $(($(date +%s) - start))s of ${budget}s"
