#!/usr/bin/env bash
# install-cuda.sh [PREFIX]   (default: .cache/cuda in the repository)
#
# Installs what `make kernels`, `make cuda-check` and `make gpu-bin` need, without
# changing the machine's apt state and without a GPU:
#   - nvcc 12.4 with cicc, ptxas, fatbinary and libdevice (Debian trixie's
#     non-free nvidia-cuda-toolkit; bookworm's CUDA 11.8 knows no sm_90a/wgmma);
#   - the CUDA headers (only ./usr/include of trixie's nvidia-cuda-dev) and the
#     libcu++ headers cuda_fp16.h needs;
#   - a link-only libcuda.so (SONAME libcuda.so.1) whose cu* functions all return
#     CUDA_ERROR_STUB_LIBRARY, built from the export list of trixie's libcuda1.
#     It is for linking here; a GPU host loads its own driver's libcuda.so.1.
# Idempotent: an existing install that passes the self-test is kept (set
# ZBENCH_CUDA_FORCE=1 to reinstall). Prints the prefix on stdout; messages go to
# stderr. Packages are fetched with apt-get from the machine's own Debian mirror
# (override with DEBIAN_MIRROR) and checked against trixie's signed index.
set -euo pipefail

die() { echo "install-cuda: $*" >&2; exit 1; }
say() { echo "install-cuda: $*" >&2; }

root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-$root/.cache/cuda}
mkdir -p "$(dirname "$prefix")"
prefix=$(readlink -f "$prefix")
stamp=$prefix/.installed

# selftest PREFIX: nvcc makes compute_75 PTX and an sm_90a cubin with wgmma, and a
# C program links against the headers and the stub.
selftest() {
  local p=$1 d
  d=$(mktemp -d)
  cat >"$d/k.cu" <<'EOF'
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void k(float* o) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
  o[threadIdx.x] = __bfloat162float(__float2bfloat16(1.5f)) + __half2float(__float2half(0.5f));
}
EOF
  printf '#include <cuda.h>\nint main(void) { return cuInit(0) == CUDA_SUCCESS; }\n' >"$d/m.c"
  if ( cd "$d" &&
       "$p/usr/bin/nvcc" --version | grep -q 'release 12\.' &&
       "$p/usr/bin/nvcc" -ptx -arch=compute_75 k.cu -o k.ptx &&
       grep -q '^\.target sm_75' k.ptx &&
       "$p/usr/bin/nvcc" -cubin -gencode=arch=compute_90a,code=sm_90a k.cu -o k.cubin &&
       gcc -I"$p/usr/include" m.c -L"$p/usr/lib/x86_64-linux-gnu/stubs" -lcuda -o m ) >"$d/log" 2>&1; then
    rm -rf "$d"; return 0
  fi
  cat "$d/log" >&2; rm -rf "$d"; return 1
}

if [ -f "$stamp" ] && [ "${ZBENCH_CUDA_FORCE:-0}" != 1 ]; then
  selftest "$prefix" || die "$prefix is installed but fails its self-test; rerun with ZBENCH_CUDA_FORCE=1"
  echo "$prefix"; exit 0
fi
if [ -d "$prefix" ] && [ ! -f "$stamp" ] && [ -n "$(ls -A "$prefix")" ]; then
  die "$prefix is not empty and was not made by this script; remove it or name another prefix"
fi

[ "$(uname -m)" = x86_64 ] || die "only x86_64 hosts are supported (this is $(uname -m))"
for t in apt-get dpkg-deb tar nm gcc; do
  command -v "$t" >/dev/null || die "the tool '$t' is missing (install it with apt-get)"
done

mirror=${DEBIAN_MIRROR:-$( { grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}'
  grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '{for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; break }}'
} | grep -v -- -security | grep -E '/debian/?$' | head -n1 || true)}
[ -n "$mirror" ] || die "no Debian mirror in /etc/apt sources; set DEBIAN_MIRROR"

stage=$prefix.partial.$$
work=$stage/.work
trap 'rm -rf "$stage"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/conf.d" "$work/parts" "$work/debs"

# A private apt: the host's apt.conf.d (proxy settings) without its update hooks,
# trixie's main and non-free index in private list and cache folders.
cp -L /etc/apt/apt.conf.d/* "$work/conf.d/" 2>/dev/null || true
cat >"$work/conf.d/zz-zbench" <<'EOF'
#clear APT::Update::Pre-Invoke;
#clear APT::Update::Post-Invoke;
#clear APT::Update::Post-Invoke-Success;
#clear Acquire::IndexTargets::deb::DEP-11;
#clear Acquire::IndexTargets::deb::DEP-11-icons-small;
#clear Acquire::IndexTargets::deb::DEP-11-icons;
#clear Acquire::IndexTargets::deb::DEP-11-icons-hidpi;
#clear Acquire::IndexTargets::deb::Contents-deb;
EOF
echo "Dir::Etc::Parts \"$work/conf.d\";" >"$work/apt.conf"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main non-free" >"$work/sources.list"
opts=(-q "-oDir::Etc::SourceList=$work/sources.list" "-oDir::Etc::SourceParts=$work/parts"
  "-oDir::State::Lists=$work/lists" "-oDir::Cache=$work/cache" -oDir::Cache::pkgcache= -oDir::Cache::srcpkgcache=
  -oAcquire::Languages=none)
[ "$(id -u)" = 0 ] && opts+=(-oAPT::Sandbox::User=root)
apt_() { APT_CONFIG=$work/apt.conf apt-get "${opts[@]}" "$@"; }

say "reading trixie's package index from $mirror"
apt_ update >"$work/log" 2>&1 || { cat "$work/log" >&2; die "apt-get update of trixie from $mirror failed"; }
say "downloading nvidia-cuda-toolkit, libcu++-dev, libcuda1 and nvidia-cuda-dev (about 1 GB)"
(cd "$work/debs" && apt_ download nvidia-cuda-toolkit libcu++-dev libcuda1 nvidia-cuda-dev) >"$work/log" 2>&1 ||
  { cat "$work/log" >&2; die "apt-get download failed"; }

for d in "$work"/debs/nvidia-cuda-toolkit_*.deb "$work"/debs/libcu++-dev_*.deb; do
  dpkg-deb -x "$d" "$stage" || die "cannot unpack $d"
done
# usr/include is the first folder of nvidia-cuda-dev's 2.5 GB data tarball:
# --occurrence=1 stops tar right after it (the producer then dies of SIGPIPE).
set +o pipefail
dpkg-deb --fsys-tarfile "$work"/debs/nvidia-cuda-dev_*.deb 2>/dev/null | tar -C "$stage" -x --occurrence=1 ./usr/include/
rc=${PIPESTATUS[1]}
set -o pipefail
[ "$rc" = 0 ] || die "cannot extract usr/include from nvidia-cuda-dev"
for h in cuda.h cuda_runtime.h cuda_fp16.h cuda_bf16.h mma.h nv/target; do
  [ -e "$stage/usr/include/$h" ] || die "header $h is missing after extraction"
done

say "building the link-only libcuda.so"
mkdir -p "$work/libcuda" "$stage/usr/lib/x86_64-linux-gnu/stubs"
dpkg-deb -x "$work"/debs/libcuda1_*.deb "$work/libcuda"
lib=$(find "$work/libcuda" -name 'libcuda.so.[0-9]*.*' -type f | head -n1)
[ -n "$lib" ] || die "libcuda1 holds no libcuda.so.<version>"
nm -D --defined-only "$lib" | awk '$2 == "T" && $3 ~ /^cu/ { printf "int %s(void) { return 34; }\n", $3 }' >"$work/stub.c"
[ "$(wc -l <"$work/stub.c")" -gt 400 ] || die "too few cu* functions exported by $lib"
gcc -shared -fPIC -O1 -Wl,-soname,libcuda.so.1 -o "$stage/usr/lib/x86_64-linux-gnu/stubs/libcuda.so" "$work/stub.c"

# Debian's nvcc.profile links to /etc and its /usr/bin/nvcc names /usr/lib: write
# a profile relative to nvcc's folder and a wrapper that puts Debian's g++
# selector first on PATH.
tk=$stage/usr/lib/nvidia-cuda-toolkit/bin
[ -x "$tk/nvcc" ] && [ -x "$tk/cicc" ] && [ -x "$stage/usr/bin/ptxas" ] || die "nvcc, cicc or ptxas missing from nvidia-cuda-toolkit"
rm -f "$tk/nvcc.profile"
cat >"$tk/nvcc.profile" <<'EOF'
TOP                = $(_HERE_)/../../..
NVVMIR_LIBRARY_DIR = $(TOP)/lib/nvidia-cuda-toolkit/libdevice
PATH              += $(_HERE_):$(TOP)/bin:
INCLUDES          += "-I$(TOP)/include" $(_SPACE_)
LIBRARIES         =+ $(_SPACE_) "-L$(TOP)/lib/x86_64-linux-gnu/stubs" "-L$(TOP)/lib/x86_64-linux-gnu"
EOF
cat >"$stage/usr/bin/nvcc" <<'EOF'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
PATH="$here/../lib/nvidia-cuda-toolkit/bin:$here:$PATH" exec "$here/../lib/nvidia-cuda-toolkit/bin/nvcc" "$@"
EOF
chmod 755 "$stage/usr/bin/nvcc"

rm -rf "$work"
[ -d "$prefix" ] && rm -rf "$prefix"
mv "$stage" "$prefix"
trap - EXIT
selftest "$prefix" || die "the new install in $prefix fails its self-test"
"$prefix/usr/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\), \(V[0-9.]*\).*/nvcc \1 \2/p' >"$stamp"
say "installed $(cat "$stamp") into $prefix ($(du -sh "$prefix" | cut -f1))"
echo "$prefix"
