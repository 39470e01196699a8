#!/usr/bin/env bash
# Installs the libraries the CPU backend loads at run time as its engines,
# where they are missing: Debian's OpenBLAS runtime (libopenblas0-pthread:
# libopenblas.so.0, unless the openmp flavour is there) for "openblas",
# oneDNN (libdnnl2: libdnnl.so.2) for "onednn", and gcc, which cgo needs
# to build the loaders (without a C compiler Go builds the backend without
# cgo, and so in pure Go). Idempotent.
set -euo pipefail
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
need=()
installed libopenblas0-pthread || installed libopenblas0-openmp || need+=(libopenblas0-pthread)
installed libdnnl2 || need+=(libdnnl2)
command -v gcc >/dev/null || need+=(gcc)
[ ${#need[@]} -eq 0 ] && exit 0
command -v apt-get >/dev/null || { echo "install-cpu-engines: apt-get not found: install ${need[*]} by hand" >&2; exit 1; }
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-cpu-engines: not root and no sudo: run apt-get install ${need[*]} as root" >&2; exit 1; }
  sudo=sudo
fi
echo "install-cpu-engines: installing ${need[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
