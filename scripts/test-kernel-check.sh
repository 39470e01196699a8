#!/usr/bin/env bash
# test-kernel-check.sh: tests scripts/build-kernels.sh --check (make cuda-check)
# on copies of the kernel sources, images and manifest in a temporary folder,
# never on the working tree: it passes on the unchanged copy 20 times in a row,
# and each planted change (a source or header edited, added or removed, an
# image edited, deleted or added, another nvcc, other flags) fails it with a
# message that names the file and says to run make kernels. Takes seconds: the
# check compiles nothing. ZBENCH_CUDA_PREFIX as for build-kernels.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export ZBENCH_CUDA_PREFIX=${ZBENCH_CUDA_PREFIX:-$(scripts/install-cuda.sh)}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
copy=$tmp/tree
failed=0 cases=0

# fresh: a new copy of what the check reads.
fresh() {
  rm -rf "$copy"
  mkdir -p "$copy/scripts" "$copy/kernels/cuda/ptx"
  cp scripts/build-kernels.sh scripts/normalize-ptx.py "$copy/scripts/"
  cp kernels/cuda/*.cu kernels/cuda/*.cuh "$copy/kernels/cuda/"
  cp kernels/cuda/ptx/* "$copy/kernels/cuda/ptx/"
}

check() { (cd "$copy" && scripts/build-kernels.sh --check); }

fail() { echo "test-kernel-check: FAIL: $*" >&2; failed=$((failed + 1)); }

# fails CASE WANT...: the check fails on the copy as changed, and its message
# holds every WANT and the remedy.
fails() {
  local name=$1 out w
  shift
  cases=$((cases + 1))
  if out=$(check 2>&1); then
    fail "$name: the check passed"
    return
  fi
  for w in "$@" "run make kernels and commit"; do
    grep -qF -- "$w" <<<"$out" || fail "$name: the message does not say '$w':"$'\n'"$out"
  done
}

# edit FILE SED-SCRIPT: edits FILE in the copy and makes sure it changed.
edit() {
  cp "$copy/$1" "$tmp/before"
  sed -i "$2" "$copy/$1"
  ! cmp -s "$tmp/before" "$copy/$1" || { echo "test-kernel-check: '$2' does not change $1" >&2; exit 1; }
}

fresh
[ -f "$copy/kernels/cuda/ptx/_MANIFEST" ] || { echo "test-kernel-check: no kernels/cuda/ptx/_MANIFEST: run make kernels" >&2; exit 1; }
cases=$((cases + 1))
for i in $(seq 20); do
  out=$(check 2>&1) || { fail "unchanged copy, check $i of 20 failed:"$'\n'"$out"; break; }
done
cmp -s kernels/cuda/ptx/_MANIFEST "$copy/kernels/cuda/ptx/_MANIFEST" || fail "the check changed the manifest"

fresh; edit kernels/cuda/softmax.cu '1s|^|// planted\n|'
fails "edited .cu" "kernels/cuda/softmax.cu changed"

fresh; edit kernels/cuda/common.cuh '$s|$| // planted|'
fails "edited .cuh" "kernels/cuda/common.cuh changed"

fresh; printf 'extern "C" __global__ void planted(float* x) { x[0] = 1; }\n' >"$copy/kernels/cuda/planted.cu"
fails "new .cu without images" "kernels/cuda/planted.cu is not in" \
  "kernels/cuda/ptx/planted.compute_75.ptx is missing" "kernels/cuda/ptx/planted.sm_90a.cubin is missing"

fresh; printf '#pragma once\n' >"$copy/kernels/cuda/planted.cuh"
fails "new .cuh" "kernels/cuda/planted.cuh is not in"

fresh; rm "$copy/kernels/cuda/layout.cu"
fails "removed .cu" "kernels/cuda/layout.cu is in kernels/cuda/ptx/_MANIFEST but missing"

fresh; edit kernels/cuda/ptx/norm.compute_80.ptx '0,/fma.rn.f32/s/fma.rn.f32/fma.rz.f32/'
fails "hand-edited PTX" "kernels/cuda/ptx/norm.compute_80.ptx is not the image"

fresh; printf '\x01' | dd of="$copy/kernels/cuda/ptx/check.sm_90a.cubin" bs=1 seek=200 conv=notrunc status=none
fails "hand-edited cubin" "kernels/cuda/ptx/check.sm_90a.cubin is not the image"

fresh; cp "$copy/kernels/cuda/ptx/softmax.compute_75.ptx" "$copy/kernels/cuda/ptx/softmax.compute_80.ptx"
fails "stale PTX (another build's image)" "kernels/cuda/ptx/softmax.compute_80.ptx is not the image"

fresh; rm "$copy/kernels/cuda/ptx/optim.sm_90a.cubin"
fails "deleted cubin" "kernels/cuda/ptx/optim.sm_90a.cubin is missing"

fresh; rm "$copy/kernels/cuda/ptx/embedding.compute_75.ptx"
fails "deleted PTX" "kernels/cuda/ptx/embedding.compute_75.ptx is missing"

fresh; cp "$copy/kernels/cuda/ptx/check.compute_75.ptx" "$copy/kernels/cuda/ptx/gone.compute_75.ptx"
fails "extra image" "kernels/cuda/ptx/gone.compute_75.ptx is not in kernels/cuda/ptx/_MANIFEST"

fresh; edit kernels/cuda/ptx/_MANIFEST 's/^nvcc .*/nvcc Cuda compilation tools, release 12.3, V12.3.107/'
fails "other nvcc recorded" "kernels/cuda/ptx/_MANIFEST records nvcc Cuda compilation tools, release 12.3, V12.3.107"

fresh; edit kernels/cuda/ptx/_MANIFEST 's/^flags \(.*\) -O3 /flags \1 -O2 /'
fails "other flags recorded" "kernels/cuda/ptx/_MANIFEST records flags and targets other than scripts/build-kernels.sh's" "-O2"

fresh; edit kernels/cuda/ptx/_MANIFEST '/^target sm_90a/d'
fails "other targets recorded" "kernels/cuda/ptx/_MANIFEST records flags and targets other than scripts/build-kernels.sh's"

fresh; edit scripts/build-kernels.sh 's/^flags=(-std=c++17 -O3 /flags=(-std=c++17 -O2 /'
fails "other flags in the script" "kernels/cuda/ptx/_MANIFEST records flags and targets other than scripts/build-kernels.sh's" "-O2"

fresh; edit kernels/cuda/ptx/_MANIFEST '/ kernels\/cuda\/ptx\/matmul.compute_80.ptx$/d'
fails "image left out of the manifest" "kernels/cuda/ptx/matmul.compute_80.ptx is not in kernels/cuda/ptx/_MANIFEST"

fresh; edit kernels/cuda/ptx/_MANIFEST 's/^\(source [0-9a-f]*\) kernels\/cuda\/norm.cu$/\1/'
fails "malformed manifest line" "kernels/cuda/ptx/_MANIFEST:" "malformed line" "kernels/cuda/norm.cu is not in"

fresh; rm "$copy/kernels/cuda/ptx/_MANIFEST"
fails "no manifest" "kernels/cuda/ptx/_MANIFEST is missing"

if [ $failed -gt 0 ]; then
  echo "test-kernel-check: $failed of the assertions failed" >&2
  exit 1
fi
echo "test-kernel-check: the kernel-image check passed 20 times on an unchanged copy and failed, naming the file, on each of $((cases - 1)) planted changes" >&2
