#!/usr/bin/env bash
# Makes sure the PyTorch reference behind the golden files and the PyTorch
# peer run as a PyTorch user's would: Debian's /usr/bin/python3 with torch
# and numpy (testdata/reference/*.py, baselines/peers/torch_bench.py), and
# torch calling OpenBLAS.
#
# Debian's python3-torch depends on "libblas3 | libblas.so.3", so on a fresh
# machine it brings the reference BLAS, whose float32 matmuls run ten or
# more times slower than OpenBLAS's (a 1024³ matmul: about 4 GFLOP/s on two
# cores against about 80): the peer would make zbench look faster than
# PyTorch is, and it refuses to run so. This script therefore also installs
# libopenblas0-pthread, whose libblas.so.3 takes over the libblas.so.3
# alternative (priority 100 against libblas3's 10) unless someone chose the
# reference BLAS by hand; then, run as root (directly or through sudo), it
# selects OpenBLAS, and otherwise says how to.
#
# It also installs libopenblas0-openmp, OpenBLAS built on OpenMP (libgomp,
# torch's own thread pool) beside the pthread build: the peer times both
# and runs each workload on the faster (its libblas.so.3 is put first with
# LD_LIBRARY_PATH; the alternative, at priority 95, stays on the pthread
# build). Without it the peer tries the pthread build alone and says so.
#
# Every action is one line on stderr, and the last line names the BLAS torch
# really loads. Idempotent, and quick when everything is there (dpkg-query,
# update-alternatives --query and one Python start). Packages are installed
# with apt-get, through sudo unless run as root.
#
# With --golden (make golden only: make test never needs them), it also
# installs Debian's python3-pil and python3-skimage, which
# testdata/reference/imagenet.py needs (PIL, and skimage's photographs), and
# python3-jinja2, which testdata/reference/chat.py renders chat templates
# with (transformers' engine).
#
# The reference must run on /usr/bin/python3, not a `python3` found on PATH
# (a pyenv or venv interpreter would not see Debian's torch).
set -euo pipefail

PY=/usr/bin/python3
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REF_PACKAGES=(python3-torch python3-numpy python3-torchvision)
OPENBLAS_PACKAGE=libopenblas0-pthread
OPENBLAS_OPENMP_PACKAGE=libopenblas0-openmp

say() {
	echo "install-python-ref: $*" >&2
}

die() {
	say "$*"
	exit 1
}

have_ref() {
	[[ -x "$PY" ]] && "$PY" -c 'import torch, numpy' >/dev/null 2>&1
}

installed() {
	[[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]
}

# An OpenBLAS that runs on every core: the pthread or the OpenMP build.
have_openblas() {
	installed libopenblas0-pthread || installed libopenblas0-openmp
}

is_root() {
	[[ "$(id -u)" -eq 0 ]]
}

# apt_install PACKAGE... installs with apt-get (sudo unless root); it fails
# with a message on stderr, and a status, instead of exiting.
apt_install() {
	local sudo=()
	if ! command -v apt-get >/dev/null 2>&1; then
		say "apt-get is missing: install $* (Debian/Ubuntu packages) by hand"
		return 1
	fi
	if ! is_root; then
		if ! command -v sudo >/dev/null 2>&1; then
			say "not root and sudo is missing: run as root, or install $* yourself"
			return 1
		fi
		sudo=(sudo)
	fi
	say "running apt-get update"
	if ! "${sudo[@]}" apt-get update -qq; then
		say "apt-get update failed (no network or no Debian mirror?)"
		return 1
	fi
	local start=$SECONDS
	say "running apt-get install $*"
	if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"; then
		say "apt-get install $* failed (these packages exist in Debian bookworm and later)"
		return 1
	fi
	say "installed $* in $((SECONDS - start)) s"
}

golden=
case "${1:-}" in
"") ;;
--golden) golden=1 ;;
*) die "usage: $0 [--golden]" ;;
esac

# 1. torch and numpy (and OpenBLAS with them, in one apt-get run, when both
# are missing).
need=()
ref_ok=
if have_ref; then ref_ok=1; else need+=("${REF_PACKAGES[@]}"); fi
have_dpkg=
if command -v dpkg-query >/dev/null 2>&1; then
	have_dpkg=1
	have_openblas || need+=("$OPENBLAS_PACKAGE")
	installed "$OPENBLAS_OPENMP_PACKAGE" || need+=("$OPENBLAS_OPENMP_PACKAGE")
fi
if [[ -z "$ref_ok" ]]; then
	say "torch or numpy missing for $PY; installing ${need[*]}"
	apt_install "${need[@]}" || die "cannot install ${need[*]}"
	have_ref || die "$PY still cannot import torch and numpy after installing ${need[*]}: $("$PY" -c 'import torch, numpy' 2>&1 | tail -n 1)"
elif ((${#need[@]})); then
	say "${need[*]} missing: the PyTorch peer needs OpenBLAS's pthread and OpenMP builds; installing them"
	# torch works without them (the goldens need no speed): say so and go
	# on, the peer refusing to run on the reference BLAS with the reason and
	# the fix, or timing the one OpenBLAS build it has.
	apt_install "${need[@]}" || say "${need[*]} not installed: without OpenBLAS the PyTorch peer (baselines/peers/torch_bench.py) refuses to run; without its OpenMP build the peer times the pthread build alone"
fi

# 1b. With WITH_REFERENCE_BLAS=1 (make peer-test), the reference BLAS and
# LAPACK too: the peer's guard test forces them through LD_LIBRARY_PATH, and
# a fresh machine that got OpenBLAS with torch lacks them. Installing them
# leaves the alternative on OpenBLAS (its priority is the higher).
if [[ -n "${WITH_REFERENCE_BLAS:-}" && -n "$have_dpkg" ]]; then
	missing=()
	for p in libblas3 liblapack3; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if ((${#missing[@]})); then
		say "installing ${missing[*]}: the reference BLAS that the peer's guard test forces"
		apt_install "${missing[@]}" || die "cannot install ${missing[*]}"
	fi
fi

# 1c. With --golden, PIL and skimage's photographs for imagenet.py, Jinja2
# for chat.py.
if [[ -n "$golden" ]]; then
	missing=()
	"$PY" -c 'import PIL' >/dev/null 2>&1 || missing+=(python3-pil)
	"$PY" -c 'import jinja2' >/dev/null 2>&1 || missing+=(python3-jinja2)
	for photo in chelsea.png coffee.png camera.png; do
		if [[ ! -f /usr/lib/python3/dist-packages/skimage/data/$photo ]]; then
			missing+=(python3-skimage)
			break
		fi
	done
	if ((${#missing[@]})); then
		say "installing ${missing[*]}: testdata/reference/imagenet.py's PIL and photographs, chat.py's Jinja2"
		apt_install "${missing[@]}" || die "cannot install ${missing[*]}"
	fi
fi

# 2. The libblas.so.3 alternative: OpenBLAS, unless the reference BLAS was
# chosen by hand (an optimised BLAS chosen by hand, MKL or BLIS, is kept).
if [[ -n "$have_dpkg" ]] && command -v update-alternatives >/dev/null 2>&1; then
	multiarch="$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("MULTIARCH") or "")')"
	alt="libblas.so.3-$multiarch"
	current="$(update-alternatives --query "$alt" 2>/dev/null | sed -n 's/^Value: //p')"
	if [[ "$current" == */blas/libblas.so.3 ]]; then
		openblas="$(update-alternatives --list "$alt" 2>/dev/null | grep -m 1 -E '/openblas-(pthread|openmp)/' || true)"
		if [[ -z "$openblas" ]]; then
			say "the $alt alternative is the reference BLAS ($current) and no OpenBLAS is installed: the PyTorch peer will refuse to run"
		elif is_root; then
			if update-alternatives --quiet --set "$alt" "$openblas"; then
				say "the $alt alternative was set by hand to the reference BLAS ($current); set it to OpenBLAS ($openblas)"
			else
				say "the $alt alternative is set by hand to the reference BLAS ($current); setting it to OpenBLAS ($openblas) failed: the PyTorch peer will refuse to run"
			fi
		else
			say "the $alt alternative is set by hand to the reference BLAS ($current) although OpenBLAS is installed: torch calls the reference BLAS and the PyTorch peer will refuse to run; to fix it: sudo update-alternatives --set $alt $openblas"
		fi
	fi
fi

# 3. What torch really loads (the peer's own detection).
cd "$ROOT"
"$PY" - "$PY" <<'EOF' >&2 || die "cannot tell which BLAS torch loads (see the error above)"
import sys
sys.path.insert(0, "baselines/peers")
import numpy
import torch
import torch_bench
blas = torch_bench.find_blas()
line = (f"install-python-ref: torch {torch.__version__}, numpy {numpy.__version__} at {sys.argv[1]}; "
        f"torch's BLAS: {blas.name} {blas.describe()}")
if blas.slow:
    line += " (the PyTorch peer refuses to run on it)"
print(line)
EOF
