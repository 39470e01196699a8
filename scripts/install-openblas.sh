#!/usr/bin/env bash
# Installs Debian's libopenblas-dev (the library and its link-time symlink)
# for the openblas build tag, if it is missing. Idempotent.
set -euo pipefail
if dpkg-query -W -f='${Status}' libopenblas-dev 2>/dev/null | grep -q "install ok installed"; then
  exit 0
fi
command -v apt-get >/dev/null || { echo "install-openblas: apt-get not found: install OpenBLAS (libopenblas.so) by hand" >&2; exit 1; }
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-openblas: not root and no sudo: run apt-get install libopenblas-dev as root" >&2; exit 1; }
  sudo=sudo
fi
echo "install-openblas: installing libopenblas-dev" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libopenblas-dev
