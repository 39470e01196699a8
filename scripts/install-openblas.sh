#!/usr/bin/env bash
# Installs Debian's OpenBLAS runtime (libopenblas0-pthread: libopenblas.so.0),
# which the CPU backend loads at run time as its "openblas" engine, if no
# OpenBLAS runtime (pthread or openmp flavour) is installed, and gcc, which
# cgo needs to build the loader (without a C compiler Go builds the backend
# without cgo, and so without OpenBLAS). Idempotent.
set -euo pipefail
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
need=()
installed libopenblas0-pthread || installed libopenblas0-openmp || need+=(libopenblas0-pthread)
command -v gcc >/dev/null || need+=(gcc)
[ ${#need[@]} -eq 0 ] && exit 0
command -v apt-get >/dev/null || { echo "install-openblas: apt-get not found: install ${need[*]} by hand" >&2; exit 1; }
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-openblas: not root and no sudo: run apt-get install ${need[*]} as root" >&2; exit 1; }
  sudo=sudo
fi
echo "install-openblas: installing ${need[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
