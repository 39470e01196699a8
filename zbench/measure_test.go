package zbench

import (
	"testing"

	"github.com/stretchr/testify/assert"

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
