package zbench

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
)

// TestMeasureRefuses: a Bench that cannot be measured fails the benchmark
// with a message instead of panicking or skipping the roofline guard.
func TestMeasureRefuses(t *testing.T) {
	dev := cpu.New()
	op := func() error { return nil }
	work := Workload{FLOPs: 1, DType: kernels.F32}
	for _, tc := range []struct {
		name string
		bm   Bench
		want string
	}{
		{"nil device", Bench{Op: op, Work: work}, "Bench.Dev is nil"},
		{"nil op", Bench{Dev: dev, Work: work}, "Bench.Op is nil"},
		{"zero work", Bench{Dev: dev, Op: op}, "declares no FLOPs and no bytes"},
		{"negative work", Bench{Dev: dev, Op: op, Work: Workload{Bytes: -1}}, "negative count"},
		{"items without unit", Bench{Dev: dev, Op: op, Work: Workload{FLOPs: 1, Items: 8}}, "without an ItemUnit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.bm.check()
			if assert.Error(t, err) {
				assert.Contains(t, err.Error(), tc.want)
			}
			// Under testing.B the check fails the benchmark: no
			// panic, no iterations.
			res := testing.Benchmark(func(b *testing.B) { Measure(b, tc.bm) })
			assert.Zero(t, res.N)
		})
	}
	assert.NoError(t, Bench{Dev: dev, Op: op, NoRoofline: "bookkeeping only"}.check())
	assert.NoError(t, Bench{Dev: dev, Op: op, Work: work}.check())
}

// TestMeasureReportsBound: a verified benchmark reports rel-err, and the
// bound it applied as rel-err-bound where it has one, so that zbench
// compare's accuracy gate reads the benchmark's own policy.
func TestMeasureReportsBound(t *testing.T) {
	dev := cpu.New()
	a, err := dev.Alloc(kernels.F32, 1<<10)
	require.NoError(t, err)
	src := make([]byte, a.Bytes())
	for _, tc := range []struct {
		name      string
		maxRelErr float64
		wantBound bool
	}{
		{"bound", 1e-3, true},
		{"no bound", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := testing.Benchmark(func(b *testing.B) {
				Measure(b, Bench{Dev: dev, Work: Workload{Bytes: 2 * float64(a.Bytes()), DType: kernels.F32},
					Op:     func() error { return dev.Upload(a, src) },
					Verify: func() (float64, error) { return 1e-4, nil }, MaxRelErr: tc.maxRelErr})
			})
			require.Positive(t, res.N)
			assert.Equal(t, 1e-4, res.Extra["rel-err"])
			bound, ok := res.Extra["rel-err-bound"]
			assert.Equal(t, tc.wantBound, ok)
			assert.Equal(t, tc.maxRelErr, bound)
		})
	}
}

// TestMeasureAdjacentBandwidth: a CPU operation bound by memory beyond the
// cache reports the bandwidth of a stream run between its iterations (a
// copy's, or a read-only stream's for a read-only workload) and its share
// of that, the share computed from the same time as GB/s; one that fits in
// the cache does not, and runs its iterations back to back.
func TestMeasureAdjacentBandwidth(t *testing.T) {
	dev := cpu.New()
	peak, err := PeakOf(dev)
	require.NoError(t, err)
	require.Positive(t, peak.ReadBandwidth)
	for _, tc := range []struct {
		name     string
		bytes    float64
		readOnly bool
		want     string // the bandwidth's unit, or none
	}{
		{"streams from memory", 4 * float64(peak.CacheBytes), false, "bw-GB/s"},
		{"only reads from memory", 4 * float64(peak.CacheBytes), true, "rd-GB/s"},
		{"fits in the cache", float64(peak.CacheBytes) / 4, false, ""},
		{"only reads, fits in the cache", float64(peak.CacheBytes) / 4, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gaps []time.Duration // from the end of one call to the start of the next
			res := testing.Benchmark(func(b *testing.B) {
				gaps = gaps[:0]
				var end time.Time
				// Long enough that the declared bytes stay under any
				// bandwidth (a sixteenth of the start's): the roofline
				// guard accepts them, and the share stays under half even
				// where other processes take the probe's bandwidth down
				// to an eighth of the start's.
				Measure(b, Bench{Dev: dev, Work: Workload{Bytes: tc.bytes, DType: kernels.F32, ReadOnly: tc.readOnly},
					Op: func() error {
						if !end.IsZero() {
							gaps = append(gaps, time.Since(end))
						}
						time.Sleep(time.Duration(tc.bytes/min(peak.Bandwidth, peak.ReadBandwidth)*1e9) * 16)
						end = time.Now()
						return nil
					}})
			})
			require.Positive(t, res.N)
			require.NotEmpty(t, gaps)
			// A pass between two timed calls moves at least the
			// operation's bytes, which takes at least a tenth of their
			// time at the start's bandwidth; back to back, a call follows
			// the last within microseconds.
			pass := time.Duration(tc.bytes / (10 * max(peak.Bandwidth, peak.ReadBandwidth)) * 1e9)
			if tc.want != "" {
				assert.GreaterOrEqual(t, slices.Min(gaps), pass, "a probe pass between every two calls")
			} else {
				assert.Less(t, slices.Min(gaps), pass, "no probe pass")
			}
			for _, unit := range []string{"bw-GB/s", "rd-GB/s"} {
				_, ok := res.Extra[unit]
				assert.Equal(t, unit == tc.want, ok, unit)
			}
			share, ok := res.Extra["%bw"]
			assert.Equal(t, tc.want != "", ok)
			if tc.want != "" {
				bw := res.Extra[tc.want]
				assert.Positive(t, bw)
				assert.InDelta(t, 100*res.Extra["GB/s"]/bw, share, 1e-9*share)
				assert.Less(t, share, 50.0, "an operation at a sixteenth of the start's bandwidths")
			}
		})
	}
}

// profiledCPU is the CPU backend with the profiler's region marks
// recorded in marks, beside the calls of an op.
type profiledCPU struct {
	kernels.Backend
	marks []string
}

func (p *profiledCPU) ProfileStart() error { p.marks = append(p.marks, "start"); return nil }
func (p *profiledCPU) ProfileStop() error  { p.marks = append(p.marks, "stop"); return nil }

// TestMeasureProfiledRegion: with ProfileEnv set, the timed calls alone lie
// between the profiler's start and stop marks; without it there are none.
func TestMeasureProfiledRegion(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want func(n int) []string
	}{
		{"1", func(n int) []string {
			return slices.Concat([]string{"op", "start"}, slices.Repeat([]string{"op"}, n), []string{"stop"})
		}},
		{"", func(n int) []string { return slices.Repeat([]string{"op"}, n+1) }},
	} {
		t.Run("env="+tc.env, func(t *testing.T) {
			t.Setenv(ProfileEnv, tc.env)
			dev := &profiledCPU{Backend: cpu.New()}
			res := testing.Benchmark(func(b *testing.B) {
				dev.marks = dev.marks[:0]
				Measure(b, Bench{Dev: dev, Work: Workload{FLOPs: 1, DType: kernels.F32},
					Op: func() error { dev.marks = append(dev.marks, "op"); return nil }})
			})
			require.Positive(t, res.N)
			assert.Equal(t, tc.want(res.N), dev.marks)
		})
	}
}
