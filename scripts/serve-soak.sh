#!/bin/bash
# serve-soak.sh [OUT] [RATE] [SECONDS]: a soak of zbench serve on the GGUF
# file of TinyLlama's shape (Q8_0, or the one G names): the server-scenario load of
# serve-compare.sh at RATE requests a second (default 0.3) for SECONDS
# (default 600) worth of requests, with the server's /metrics read after a
# warm-up, every minute of the load, right after it and again 10 seconds
# later, so that resident memory, the Go heap (in use, and live at the last
# collection), goroutines and KV blocks in use can be followed. Results in
# OUT (default .cache/serve-soak): metrics-before.txt, metrics-minute-N.txt,
# metrics-after.txt, metrics-after-10s.txt, memory.tsv (those readings in
# a table), the load's results (load.txt), its log and the server's.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.cache/serve-soak}
RATE=${2:-0.3}
SECONDS_LOAD=${3:-600}
G=${G:-.cache/gguf/tinyllama-Q8_0.gguf}
[ -f "$G" ] || { echo "serve-soak: $G is missing: run make gguf-models" >&2; exit 1; }
mkdir -p "$OUT"
ZB="$OUT/zbench"
go build -o "$ZB" ./cmd/zbench
URL=http://127.0.0.1:18095
REQUESTS=$(awk -v r="$RATE" -v s="$SECONDS_LOAD" 'BEGIN { printf "%d", r * s + 0.5 }')
LOAD=(--prompt-words 16:48 --output-tokens 32:64)

"$ZB" serve --model "$G" --addr 127.0.0.1:18095 >"$OUT/server.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do curl -sf "$URL/health" >/dev/null && break; sleep 1; done
curl -sf "$URL/health" >/dev/null || { echo "serve-soak: the server did not start (see $OUT/server.log)" >&2; exit 1; }
# Warm-up: the pools and buffers the load needs are allocated before the
# first reading.
"$ZB" load --url "$URL" --scenario offline --requests 8 "${LOAD[@]}" --seed 99 -o /dev/null 2>>"$OUT/load.log" || true
curl -sf "$URL/metrics" >"$OUT/metrics-before.txt"
echo "serve-soak: $REQUESTS requests at $RATE a second" >&2
status=0
"$ZB" load --url "$URL" --scenario server --rate "$RATE" --requests "$REQUESTS" "${LOAD[@]}" --seed 1 \
	-o "$OUT/load.txt" 2>>"$OUT/load.log" &
load=$!
minute=0
while kill -0 "$load" 2>/dev/null; do
	for _ in $(seq 1 60); do kill -0 "$load" 2>/dev/null && sleep 1; done
	kill -0 "$load" 2>/dev/null || break
	minute=$((minute + 1))
	curl -sf "$URL/metrics" >"$OUT/metrics-minute-$minute.txt" || true
done
wait "$load" || status=$?
curl -sf "$URL/metrics" >"$OUT/metrics-after.txt"
sleep 10
curl -sf "$URL/metrics" >"$OUT/metrics-after-10s.txt"
{
	printf 'reading\trss_bytes\theap_inuse_bytes\theap_live_bytes\tgoroutines\tkv_blocks_used\trunning\trequests_ended\n'
	for f in "$OUT/metrics-before.txt" $(ls "$OUT"/metrics-minute-*.txt 2>/dev/null | sort -V) "$OUT/metrics-after.txt" "$OUT/metrics-after-10s.txt"; do
		awk -v name="$(basename "$f" .txt)" '
			/^process_resident_memory_bytes / { rss = $2 }
			/^go_memstats_heap_inuse_bytes / { inuse = $2 }
			/^go_gc_heap_live_bytes / { live = $2 }
			/^go_goroutines / { g = $2 }
			/^zbench_kv_blocks_used\{/ { kv = $2 }
			/^zbench_running_sequences\{/ { run = $2 }
			/^zbench_requests_total\{/ { ended += $2 }
			END { printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", name, rss, inuse, live, g, kv, run, ended }' "$f"
	done
} >"$OUT/memory.tsv"
cat "$OUT/memory.tsv" >&2
exit $status
