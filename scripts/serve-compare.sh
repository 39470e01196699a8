#!/bin/bash
# serve-compare.sh [OUT]: one run of zbench load against zbench serve (at its
# defaults, then with 32-token prefill chunks) and against llama.cpp's server
# (baselines/peers/llamacpp/serve.mjs), one server at a time on this machine,
# on the same GGUF file of TinyLlama's shape (Q8_0, or the one G names, such
# as .cache/gguf/tinyllama-F16.gguf): eight single-stream requests, then a
# server-scenario sweep of the rates SWEEP (default 0.25,0.5,1,1.5,2,2.5,3)
# whose every rate runs at least MIN_DURATION (default 2m; zbench load's
# --min-duration), then eight single-stream requests again. SERVERS (default
# "zbench zbench-chunk32 llamacpp") names the servers to run, in that order.
# Results in OUT (default .cache/serve-cmp), one file per server and run.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.cache/serve-cmp}
G=${G:-.cache/gguf/tinyllama-Q8_0.gguf}
MIN_DURATION=${MIN_DURATION:-2m}
SWEEP=${SWEEP:-0.25,0.5,1,1.5,2,2.5,3}
SERVERS=${SERVERS:-zbench zbench-chunk32 llamacpp}
[ -f "$G" ] || { echo "serve-compare: $G is missing: run make gguf-models" >&2; exit 1; }
mkdir -p "$OUT"
ZB="$OUT/zbench"
go build -o "$ZB" ./cmd/zbench
LOAD=(--prompt-words 16:48 --output-tokens 32:64 --seed 1)
run_load() { # name url
	"$ZB" load --url "$2" --scenario singlestream --requests 8 "${LOAD[@]}" -o "$OUT/$1-singlestream.txt" 2>>"$OUT/$1.log" || true
	"$ZB" load --url "$2" --sweep "$SWEEP" --refine 1 --requests 24 --min-duration "$MIN_DURATION" "${LOAD[@]}" -o "$OUT/$1-sweep.txt" 2>>"$OUT/$1.log" || true
	"$ZB" load --url "$2" --scenario singlestream --requests 8 "${LOAD[@]}" -o "$OUT/$1-singlestream-after.txt" 2>>"$OUT/$1.log" || true
}
wait_up() { for _ in $(seq 1 120); do curl -sf "$1/v1/models" >/dev/null && return 0; sleep 1; done; return 1; }
serve() { # name port command...
	local name=$1 port=$2
	shift 2
	"$@" >"$OUT/$name-server.log" 2>&1 &
	local pid=$!
	wait_up "http://127.0.0.1:$port" && run_load "$name" "http://127.0.0.1:$port"
	kill -TERM "$pid"
	wait "$pid" || true
}
for s in $SERVERS; do
	case $s in
	zbench) serve zbench 18090 "$ZB" serve --model "$G" --addr 127.0.0.1:18090 ;;
	zbench-chunk32) serve zbench-chunk32 18091 "$ZB" serve --model "$G" --addr 127.0.0.1:18091 --chunk-tokens 32 ;;
	llamacpp) serve llamacpp 18092 node baselines/peers/llamacpp/serve.mjs --addr 127.0.0.1:18092 "$G" ;;
	*) echo "serve-compare: unknown server $s in SERVERS" >&2; exit 1 ;;
	esac
done
