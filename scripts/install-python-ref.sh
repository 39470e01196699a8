#!/usr/bin/env bash
# Makes sure the PyTorch reference behind the golden files can run: Debian's
# /usr/bin/python3 with torch and numpy (testdata/reference/kernels.py).
# Idempotent: does nothing when they are already importable; otherwise
# installs python3-torch, python3-numpy and python3-torchvision with apt-get,
# through sudo unless run as root.
#
# The reference must run on /usr/bin/python3, not a `python3` found on PATH
# (a pyenv or venv interpreter would not see Debian's torch).
set -euo pipefail

PY=/usr/bin/python3
PACKAGES=(python3-torch python3-numpy python3-torchvision)

die() {
	echo "install-python-ref: $*" >&2
	exit 1
}

have_ref() {
	"$PY" -c 'import torch, numpy' >/dev/null 2>&1
}

report() {
	"$PY" -c 'import torch, numpy; print("install-python-ref: torch", torch.__version__, "numpy", numpy.__version__, "at '"$PY"'")'
}

if [[ -x "$PY" ]] && have_ref; then
	report
	exit 0
fi

command -v apt-get >/dev/null 2>&1 ||
	die "torch and numpy are not importable by $PY and apt-get is missing: install ${PACKAGES[*]} (Debian/Ubuntu) by hand"

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
	command -v sudo >/dev/null 2>&1 ||
		die "not root and sudo is missing: run as root, or install ${PACKAGES[*]} yourself"
	SUDO=(sudo)
fi

echo "install-python-ref: torch or numpy missing for $PY; installing ${PACKAGES[*]}" >&2
"${SUDO[@]}" apt-get update ||
	die "apt-get update failed (no network or no Debian mirror?)"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${PACKAGES[@]}" ||
	die "apt-get install ${PACKAGES[*]} failed (these packages exist in Debian bookworm and later)"

[[ -x "$PY" ]] || die "$PY still missing after installing ${PACKAGES[*]}"
have_ref || die "$PY still cannot import torch and numpy after installing ${PACKAGES[*]}: $("$PY" -c 'import torch, numpy' 2>&1 | tail -n 1)"
report
