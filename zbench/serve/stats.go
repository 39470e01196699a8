package serve

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Stats are an engine's counters, gauges and latency histograms, written
// in Prometheus' text format by WritePrometheus.
type Stats struct {
	queued, prefilled, generated, preempted, steps, stepSeqs atomic.Int64
	mu                                                       sync.Mutex
	finishedBy                                               map[string]int64
	waiting, running, blocksUsed, lastBatch                  int
	blocks                                                   int
	ttft, tpot                                               histogram
}

func newStats(blocks int) *Stats {
	return &Stats{blocks: blocks, finishedBy: map[string]int64{},
		ttft: newHistogram(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
		tpot: newHistogram(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2)}
}

// step counts a decode step of n sequences.
func (s *Stats) step(n int) {
	s.steps.Add(1)
	s.stepSeqs.Add(int64(n))
	s.mu.Lock()
	s.lastBatch = n
	s.mu.Unlock()
}

// setLoad records the scheduler's queue, batch and blocks in use.
func (s *Stats) setLoad(waiting, running, blocksUsed int) {
	s.mu.Lock()
	s.waiting, s.running, s.blocksUsed = waiting, running, blocksUsed
	s.mu.Unlock()
}

// finished counts a request's end and its latencies.
func (s *Stats) finished(reason string, q *seq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishedBy[reason]++
	if q.out > 0 {
		s.ttft.observe(q.first.Sub(q.arrived).Seconds())
	}
	if q.out > 1 {
		s.tpot.observe(time.Since(q.first).Seconds() / float64(q.out-1))
	}
}

// Snapshot is a copy of the gauges and counters.
type Snapshot struct {
	Waiting, Running, BlocksUsed, Blocks, LastBatch int
	Finished                                        map[string]int64
	Generated, Prefilled, Preempted                 int64
}

// Snapshot copies the gauges and counters.
func (s *Stats) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := make(map[string]int64, len(s.finishedBy))
	for k, v := range s.finishedBy {
		f[k] = v
	}
	return Snapshot{Waiting: s.waiting, Running: s.running, BlocksUsed: s.blocksUsed, Blocks: s.blocks, LastBatch: s.lastBatch,
		Finished: f, Generated: s.generated.Load(), Prefilled: s.prefilled.Load(), Preempted: s.preempted.Load()}
}

// WritePrometheus writes the metrics in Prometheus' text exposition
// format.
func (s *Stats) WritePrometheus(w io.Writer, model string) error {
	snap := s.Snapshot()
	s.mu.Lock()
	ttft, tpot := s.ttft.clone(), s.tpot.clone()
	s.mu.Unlock()
	var b []byte
	metric := func(name, kind, help string) { b = appendHeader(b, name, kind, help) }
	metric("zbench_requests_total", "counter", "Requests ended, by finish reason (length, stop, abort).")
	for _, r := range []string{"length", "stop", "abort"} {
		b = fmt.Appendf(b, "zbench_requests_total{model=%q,finish=%q} %d\n", model, r, snap.Finished[r])
	}
	for _, m := range []struct {
		name, kind, help string
		v                int64
	}{
		{"zbench_generated_tokens_total", "counter", "Tokens generated.", snap.Generated},
		{"zbench_prompt_tokens_total", "counter", "Prompt tokens prefilled (again after a preemption).", snap.Prefilled},
		{"zbench_preemptions_total", "counter", "Running sequences preempted for lack of KV blocks.", snap.Preempted},
		{"zbench_decode_steps_total", "counter", "Decode steps run.", s.steps.Load()},
		{"zbench_decode_step_sequences_total", "counter", "Sequences over all decode steps (mean batch: this over steps).", s.stepSeqs.Load()},
		{"zbench_queue_depth", "gauge", "Requests waiting to start or resume.", int64(snap.Waiting)},
		{"zbench_running_sequences", "gauge", "Sequences in the running batch.", int64(snap.Running)},
		{"zbench_batch_size", "gauge", "Sequences of the last decode step.", int64(snap.LastBatch)},
		{"zbench_kv_blocks_used", "gauge", "KV-cache blocks held by sequences.", int64(snap.BlocksUsed)},
		{"zbench_kv_blocks_total", "gauge", "KV-cache blocks in the pool.", int64(snap.Blocks)},
	} {
		metric(m.name, m.kind, m.help)
		b = fmt.Appendf(b, "%s{model=%q} %d\n", m.name, model, m.v)
	}
	b = appendProcess(b)
	metric("zbench_time_to_first_token_seconds", "histogram", "Time from arrival to the first token.")
	b = ttft.appendTo(b, "zbench_time_to_first_token_seconds", model)
	metric("zbench_time_per_output_token_seconds", "histogram", "Time per output token after the first, per request.")
	b = tpot.appendTo(b, "zbench_time_per_output_token_seconds", model)
	_, err := w.Write(b)
	return err
}

// appendProcess appends the process's resident memory, the Go heap in use
// and live at the last collection, and the goroutines, under the names of
// Prometheus' Go client, so that a soak shows whether they grow; resident
// memory is left out where /proc cannot tell it.
func appendProcess(b []byte) []byte {
	if rss, err := residentBytes(); err == nil {
		b = appendHeader(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
		b = fmt.Appendf(b, "process_resident_memory_bytes %d\n", rss)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b = appendHeader(b, "go_memstats_heap_inuse_bytes", "gauge", "Bytes in in-use spans of the Go heap.")
	b = fmt.Appendf(b, "go_memstats_heap_inuse_bytes %d\n", ms.HeapInuse)
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	if metrics.Read(live); live[0].Value.Kind() == metrics.KindUint64 {
		b = appendHeader(b, "go_gc_heap_live_bytes", "gauge", "Heap memory occupied by live objects that were marked by the previous GC.")
		b = fmt.Appendf(b, "go_gc_heap_live_bytes %d\n", live[0].Value.Uint64())
	}
	b = appendHeader(b, "go_goroutines", "gauge", "Goroutines that currently exist.")
	return fmt.Appendf(b, "go_goroutines %d\n", runtime.NumGoroutine())
}

// appendHeader appends a metric's HELP and TYPE lines.
func appendHeader(b []byte, name, kind, help string) []byte {
	return fmt.Appendf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
}

// residentBytes reads the process's resident set size from
// /proc/self/statm (its second field, in pages).
func residentBytes() (int64, error) {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/self/statm: %q: want two fields or more", data)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/self/statm: %w", err)
	}
	return pages * int64(os.Getpagesize()), nil
}

// histogram is a Prometheus histogram: cumulative counts at upper bounds.
type histogram struct {
	bounds []float64
	counts []int64 // per bucket, the last for +Inf
	sum    float64
}

func newHistogram(bounds ...float64) histogram {
	return histogram{bounds: bounds, counts: make([]int64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i]++
	h.sum += v
}

func (h histogram) clone() histogram {
	return histogram{bounds: h.bounds, counts: append([]int64(nil), h.counts...), sum: h.sum}
}

func (h histogram) appendTo(b []byte, name, model string) []byte {
	var cum int64
	for i, c := range h.counts {
		cum += c
		le := "+Inf"
		if i < len(h.bounds) {
			le = fmt.Sprint(h.bounds[i])
		}
		b = fmt.Appendf(b, "%s_bucket{model=%q,le=%q} %d\n", name, model, le, cum)
	}
	b = fmt.Appendf(b, "%s_sum{model=%q} %g\n%s_count{model=%q} %d\n", name, model, h.sum, name, model, cum)
	return b
}
