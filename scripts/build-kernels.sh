#!/usr/bin/env bash
# build-kernels.sh [--check | --verify]
#
# Builds and checks the kernel images the CUDA backend embeds. Every
# kernels/cuda/*.cu gives three images in kernels/cuda/ptx/:
#   NAME.compute_75.ptx   portable PTX: Turing (T4) and anything without a better image
#   NAME.compute_80.ptx   PTX for Ampere, Ada and newer (bf16/tf32 mma, cp.async)
#   NAME.sm_90a.cubin     Hopper (H100, H200): wgmma and TMA
# and the sources of extra_targets one image more each:
#   fp8.compute_89.ptx    Ada (L4, L40S, RTX 40): cvt to e4m3/e5m2 and mma.sync
#                         with FP8 operands, which need sm_89; the CUDA backend
#                         loads it on 8.9 in place of fp8.compute_80.ptx
# PTX files start with a generated-code header. kernels/cuda/ptx/_MANIFEST
# records what the images were built from and what they are: the nvcc version,
# the flags and targets, the sha256 of every kernels/cuda/*.cu and *.cuh and of
# every image (the leading underscore keeps it out of the go:embed'ed images).
#
# nvcc's output is not deterministic. Now and then (about one build in
# fifteen of matmul.cu for compute_75) the same source gives PTX with an extra,
# redundant shared-memory load and a .pragma "used_bytes_mask", which shifts
# every virtual register number after it (.reg .f32 %f<9832> instead of
# %f<9830>). So a rebuilt image is compared with the committed one modulo
# register numbering (PTX after scripts/normalize-ptx.py, cubins by their
# kernels' resource usage and disassembly from cuobjdump), and one that still
# differs is compiled again, up to ZBENCH_KERNEL_TRIES times in all (default 4).
# Only --check, which compiles nothing, is part of make test.
#
#   (no option)  make kernels: compiles every source into a temporary folder,
#                leaves in kernels/cuda/ptx/ each image a build reproduces
#                (so an unchanged source keeps its committed image), replaces
#                the others with the output two builds agree on (nvcc's usual
#                one, not the rare variant), removes images no source makes,
#                and writes the manifest. On an unchanged tree it changes
#                nothing but the manifest.
#   --check      make cuda-check: compiles nothing. Fails, naming the file, if a
#                source or header is not the one recorded (edited, added or
#                removed without make kernels), an image is missing, extra or
#                not the recorded one (stale or edited by hand), or the flags,
#                targets or installed nvcc differ from the recorded ones.
#   --verify     make kernels-verify: rebuilds into a temporary folder and
#                fails unless a build reproduces every committed image, and no
#                image is missing or extra. Changes nothing.
#
# ZBENCH_CUDA_PREFIX names an installed toolkit (the Makefile's); without it,
# scripts/install-cuda.sh provides one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export LC_ALL=C

mode=build
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  --verify) mode=verify ;;
  *) echo "usage: build-kernels.sh [--check | --verify]" >&2; exit 2 ;;
esac

prefix=${ZBENCH_CUDA_PREFIX:-$(scripts/install-cuda.sh)}
nvcc=$prefix/usr/bin/nvcc
cuobjdump=$prefix/usr/bin/cuobjdump
flags=(-std=c++17 -O3 -Ikernels/cuda -Xptxas=-warn-spills --Werror all-warnings)
# IMAGE-SUFFIX NVCC-ARGUMENTS
targets=(
  "compute_75.ptx -ptx -arch=compute_75"
  "compute_80.ptx -ptx -arch=compute_80"
  "sm_90a.cubin -cubin -gencode=arch=compute_90a,code=sm_90a"
)
# SOURCE-NAME -> one more IMAGE-SUFFIX NVCC-ARGUMENTS for that source alone.
declare -A extra_targets=(
  [fp8]="compute_89.ptx -ptx -arch=compute_89"
)
dir=kernels/cuda/ptx
manifest=$dir/_MANIFEST

say() { echo "build-kernels: $*" >&2; }
die() { say "$*"; exit 1; }

shopt -s nullglob
srcs=(kernels/cuda/*.cu)
headers=(kernels/cuda/*.cuh)
[ ${#srcs[@]} -gt 0 ] || die "no kernels/cuda/*.cu"

# nvcc's version line: "Cuda compilation tools, release 12.4, V12.4.131".
version=$("$nvcc" --version | sed -n '/^Cuda compilation tools, /p') || true
[ -n "$version" ] || die "$nvcc --version printed no 'Cuda compilation tools' line"

# header_lines: the manifest's lines that do not depend on the tree.
header_lines() {
  echo "nvcc $version"
  echo "flags ${flags[*]}"
  local t
  for t in "${targets[@]}"; do echo "target $t"; done
  for t in $(printf '%s\n' "${!extra_targets[@]}" | sort); do echo "target $t.cu ${extra_targets[$t]}"; done
}

# targets_of SRC: the targets a source is built for, one a line.
targets_of() {
  local name
  name=$(basename "$1" .cu)
  printf '%s\n' "${targets[@]}"
  [ -z "${extra_targets[$name]:-}" ] || echo "${extra_targets[$name]}"
}

# images_of SRC: the image paths a source gives.
images_of() {
  local name t
  name=$(basename "$1" .cu)
  while IFS= read -r t; do echo "$dir/$name.${t%% *}"; done < <(targets_of "$1")
}

# committed_images: the files in kernels/cuda/ptx/ other than the manifest.
committed_images() {
  local f
  for f in "$dir"/*; do
    [ "$f" = "$manifest" ] || echo "$f"
  done
}

# compile SRC TARGET OUT: one image of source SRC into folder OUT.
compile() {
  local src=$1 suffix=${2%% *} args=${2#* } out=$3 name
  name=$(basename "$src" .cu)
  # shellcheck disable=SC2086 # args are words
  "$nvcc" "${flags[@]}" $args "$src" -o "$out/$name.$suffix.tmp"
  if [ "${suffix##*.}" = ptx ]; then
    { echo "// Code generated by make kernels from kernels/cuda/$name.cu for ${suffix%.ptx}. DO NOT EDIT."
      cat "$out/$name.$suffix.tmp"; } >"$out/$name.$suffix"
    rm -f "$out/$name.$suffix.tmp"
  else
    mv "$out/$name.$suffix.tmp" "$out/$name.$suffix"
  fi
}

# normal IMAGE: the image modulo register numbering, on stdout.
normal() {
  case "$1" in
    *.ptx) python3 scripts/normalize-ptx.py "$1" ;;
    *.cubin) normal_cubin "$1" ;;
    *) cat "$1" ;;
  esac
}

# normal_cubin CUBIN: its kernels' resource usage and machine code, without
# the ELF layout around them.
normal_cubin() {
  "$cuobjdump" -res-usage "$1"
  "$cuobjdump" -sass "$1"
}

# same A B: 0 if images A and B are equal modulo register numbering; prints
# "identical" or "equivalent". Normalised images are kept in $tmp/norm.
same() {
  if cmp -s "$1" "$2"; then echo identical; return 0; fi
  local n
  for n in "$1" "$2"; do
    [ -f "$tmp/norm/${n//\//%}" ] || normal "$n" >"$tmp/norm/${n//\//%}"
  done
  if cmp -s "$tmp/norm/${1//\//%}" "$tmp/norm/${2//\//%}"; then echo equivalent; return 0; fi
  return 1
}

write_manifest() {
  local text
  text=$(
    echo "# Generated by scripts/build-kernels.sh (make kernels): what the images in"
    echo "# kernels/cuda/ptx were built from, and their sha256. make cuda-check"
    echo "# checks the tree against it (scripts/build-kernels.sh --check). DO NOT EDIT."
    header_lines
    sha256sum "${srcs[@]}" "${headers[@]}" | sort -k2 | sed 's/^\([0-9a-f]*\)  /source \1 /'
    committed_images | xargs -r sha256sum | sort -k2 | sed 's/^\([0-9a-f]*\)  /image \1 /'
  )
  printf '%s\n' "$text" >"$manifest"
}

check() {
  [ -f "$manifest" ] || die "$manifest is missing: run make kernels and commit"
  local problems=() kind hash path rest n=0 f t
  local -A rec_src=() rec_img=() cur_src=() cur_img=() want_img=() seen=()
  local rec_header=() cur_header=()
  while IFS= read -r line; do
    n=$((n + 1))
    case "$line" in
      "#"* | "") ;;
      "source "* | "image "*)
        read -r kind hash path rest <<<"$line"
        if [ -z "$path" ] || [ -n "$rest" ]; then
          problems+=("$manifest:$n: malformed line: $line")
        elif [ "$kind" = source ]; then
          rec_src[$path]=$hash
        else
          rec_img[$path]=$hash
        fi
        ;;
      *) rec_header+=("$line") ;;
    esac
  done <"$manifest"

  mapfile -t cur_header < <(header_lines)
  if [ "${rec_header[0]:-}" != "${cur_header[0]}" ]; then
    problems+=("$manifest records ${rec_header[0]:-no nvcc version}, but the installed one is ${cur_header[0]} ($nvcc): install that one or rebuild")
  fi
  if [ "$(printf '%s\n' "${rec_header[@]:1}")" != "$(printf '%s\n' "${cur_header[@]:1}")" ]; then
    problems+=("$manifest records flags and targets other than scripts/build-kernels.sh's:")
    while IFS= read -r line; do
      case "$line" in
        "<"*) problems+=("  recorded:                 ${line#< }") ;;
        ">"*) problems+=("  scripts/build-kernels.sh: ${line#> }") ;;
      esac
    done < <(diff <(printf '%s\n' "${rec_header[@]:1}") <(printf '%s\n' "${cur_header[@]:1}") || true)
  fi

  while read -r hash f; do cur_src[$f]=$hash; done < <(sha256sum "${srcs[@]}" "${headers[@]}")
  for f in $(printf '%s\n' "${!cur_src[@]}" "${!rec_src[@]}" | sort -u); do
    if [ -z "${rec_src[$f]:-}" ]; then
      problems+=("$f is not in $manifest: a source added since the images were built")
    elif [ -z "${cur_src[$f]:-}" ]; then
      problems+=("$f is in $manifest but missing: a source removed since the images were built")
    elif [ "${cur_src[$f]}" != "${rec_src[$f]}" ]; then
      problems+=("$f changed since the images were built (sha256 ${cur_src[$f]}, recorded ${rec_src[$f]})")
    fi
  done

  while read -r hash f; do cur_img[$f]=$hash; done < <(committed_images | xargs -r sha256sum)
  for f in "${srcs[@]}"; do
    for t in $(images_of "$f"); do want_img[$t]=$f; done
  done
  for f in $(printf '%s\n' "${!cur_img[@]}" "${!rec_img[@]}" "${!want_img[@]}" | sort -u); do
    if [ -n "${cur_img[$f]:-}" ] && [ -n "${rec_img[$f]:-}" ]; then
      [ "${cur_img[$f]}" = "${rec_img[$f]}" ] ||
        problems+=("$f is not the image make kernels built (sha256 ${cur_img[$f]}, recorded ${rec_img[$f]}): stale or edited by hand")
    elif [ -n "${cur_img[$f]:-}" ]; then
      problems+=("$f is not in $manifest: an image make kernels did not build")
    elif [ -n "${rec_img[$f]:-}" ]; then
      problems+=("$f is missing (recorded in $manifest)")
    else
      problems+=("$f is missing: no image of ${want_img[$f]} for this target")
    fi
  done

  if [ ${#problems[@]} -gt 0 ]; then
    for f in "${problems[@]}"; do say "$f"; done
    die "kernels/cuda/ptx is not what make kernels built from kernels/cuda: run make kernels and commit"
  fi
  say "kernels/cuda/ptx is what make kernels built from kernels/cuda (${#srcs[@]} sources, ${#headers[@]} headers, ${#cur_img[@]} images, ${version##*, })"
}

# rebuild: compiles every image into temporary folders $tmp/1, $tmp/2, ... and
# compares it with kernels/cuda/ptx. An image the build does not reproduce is
# compiled again, up to $tries times in all (see the top). make kernels stops
# early once two builds agree, and takes that one: nvcc's usual output, not
# the rare variant. Sets differ to the images not reproduced (or missing),
# new[IMAGE] to the build make kernels takes for each, extra to the images in
# kernels/cuda/ptx that no source makes, and counts identical, equivalent
# (equal modulo register numbering) and retried builds.
tries=${ZBENCH_KERNEL_TRIES:-4}
declare -A new=()
rebuild() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir "$tmp/norm"
  differ=() extra=() identical=0 equivalent=0 retried=0
  local src t img how pick i j src_targets
  for src in "${srcs[@]}"; do
    mapfile -t src_targets < <(targets_of "$src")
    for t in "${src_targets[@]}"; do
      img=$(basename "$src" .cu).${t%% *}
      how= pick=
      for ((i = 1; i <= tries; i++)); do
        mkdir -p "$tmp/$i"
        [ "$i" = 1 ] || retried=$((retried + 1))
        compile "$src" "$t" "$tmp/$i"
        if [ -f "$dir/$img" ] && how=$(same "$tmp/$i/$img" "$dir/$img"); then break; fi
        how=
        if [ $mode = build ]; then
          for ((j = 1; j < i; j++)); do
            if same "$tmp/$j/$img" "$tmp/$i/$img" >/dev/null; then pick=$tmp/$i/$img; break; fi
          done
          [ -z "$pick" ] || break
        fi
        if [ -f "$dir/$img" ] && [ "$i" -lt "$tries" ]; then
          say "$dir/$img: build $i of $tries is not the committed image; compiling again"
        fi
      done
      case $how in
        identical) identical=$((identical + 1)) ;;
        equivalent) equivalent=$((equivalent + 1)) ;;
        *) differ+=("$img") new[$img]=${pick:-$tmp/1/$img} ;;
      esac
    done
  done
  while read -r img; do
    [ -f "$tmp/1/${img##*/}" ] || extra+=("${img##*/}")
  done < <(committed_images)
}

case $mode in
  check) check ;;
  verify)
    rebuild
    for f in "${differ[@]}"; do
      if [ -f "$dir/$f" ]; then
        say "$dir/$f differs from what the sources produce, beyond register numbering:"
        diff <(normal "$dir/$f") <(normal "$tmp/1/$f") | head -20 >&2 || true
      else
        say "$dir/$f is missing"
      fi
    done
    for f in "${extra[@]}"; do say "$dir/$f is made by no source"; done
    if [ $((${#differ[@]} + ${#extra[@]})) -gt 0 ]; then
      die "kernels/cuda/ptx is not what kernels/cuda/*.cu produce: run make kernels and commit"
    fi
    say "kernels/cuda/ptx is what kernels/cuda/*.cu produce: $identical images identical, $equivalent equal modulo register numbering, $retried rebuilt again (${#srcs[@]} sources, ${#targets[@]} targets, ${version##*, })"
    ;;
  build)
    mkdir -p "$dir"
    rebuild
    for f in "${differ[@]}"; do cp "${new[$f]}" "$dir/$f"; say "updated $dir/$f"; done
    for f in "${extra[@]}"; do rm -f "$dir/$f"; say "removed $dir/$f"; done
    write_manifest
    say "built ${#srcs[@]} sources for ${#targets[@]} targets: ${#differ[@]} images updated, ${#extra[@]} removed, $((identical + equivalent)) kept; wrote $manifest"
    ;;
esac
