#!/usr/bin/env bash
# Sets up the ONNX Runtime peer (baselines/peers/onnxpeer) in
# .cache/onnxruntime (never committed):
#
#   node_modules/onnxruntime-node   ONNX Runtime for Node, its CPU library
#                                   (libonnxruntime.so) included
#   models/                         the ONNX models the peer runs, exported
#                                   from the PyTorch reference modules with
#                                   zbench's seeded synthetic weights, and
#                                   their inputs and reference outputs
#                                   (baselines/peers/onnxpeer/export.py)
#
# The packages are those of baselines/peers/onnxpeer/package-lock.json,
# pinned by version and checked against their sha512 by `npm ci`, which
# runs with --ignore-scripts: onnxruntime-node's postinstall downloads GPU
# binaries, which the CPU peer does not use. models/ is rebuilt by export.py
# whenever the reference scripts, export.py or torch change. Quick and
# silent when everything is current.
#
# Node.js and npm are installed with apt-get (through sudo unless root) if
# missing; the export needs Debian's python3-torch and python3-torchvision
# (scripts/install-python-ref.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEER="$ROOT/baselines/peers/onnxpeer"
DIR="${ZBENCH_ONNXRUNTIME:-$ROOT/.cache/onnxruntime}"
PY=/usr/bin/python3

# say, die, apt_install, need_node
. "$ROOT/scripts/install-lib.sh"

case "${1:-}" in
"") ;;
*) die "usage: $0 (no arguments; ZBENCH_ONNXRUNTIME moves the install from .cache/onnxruntime)" ;;
esac

need_node

# node_modules/ is current when its stamp matches the lock file and node.
mkdir -p "$DIR"
stamp="$(
	sha256sum "$PEER/package.json" "$PEER/package-lock.json" | cut -d' ' -f1
	node --version
)"
if [[ ! -f "$DIR/node_modules/.zbench-stamp" || "$(cat "$DIR/node_modules/.zbench-stamp")" != "$stamp" ]]; then
	say "npm ci --ignore-scripts (onnxruntime-node of baselines/peers/onnxpeer/package-lock.json)"
	cp "$PEER/package.json" "$PEER/package-lock.json" "$DIR/"
	(cd "$DIR" && npm ci --ignore-scripts --no-audit --no-fund --silent >"$DIR/npm.log" 2>&1) ||
		die "npm ci failed: $(tail -n 5 "$DIR/npm.log")"
	if ! (cd "$DIR" && node -e 'require("onnxruntime-node")' >"$DIR/npm.log" 2>&1); then
		die "onnxruntime-node does not load on this machine: $(tail -n 5 "$DIR/npm.log")"
	fi
	echo "$stamp" >"$DIR/node_modules/.zbench-stamp"
	say "installed onnxruntime-node $(node -p 'require(process.argv[1]).version' "$DIR/node_modules/onnxruntime-node/package.json") into ${DIR#"$ROOT/"}"
fi

# The models; export.py is quick and silent when they are current.
"$PY" "$PEER/export.py" --out "$DIR/models"
