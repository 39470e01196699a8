#!/usr/bin/env bash
# Installs Debian's OpenBLAS runtime (libopenblas0-pthread: libopenblas.so.0),
# which the CPU backend loads at run time as its "openblas" engine, if no
# OpenBLAS runtime (pthread or openmp flavour) is installed. Nothing links
# against it: without it the backend runs pure Go. Idempotent.
set -euo pipefail
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
if installed libopenblas0-pthread || installed libopenblas0-openmp; then
  exit 0
fi
command -v apt-get >/dev/null || { echo "install-openblas: apt-get not found: install OpenBLAS (libopenblas.so.0) by hand" >&2; exit 1; }
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-openblas: not root and no sudo: run apt-get install libopenblas0-pthread as root" >&2; exit 1; }
  sudo=sudo
fi
echo "install-openblas: installing libopenblas0-pthread" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libopenblas0-pthread
