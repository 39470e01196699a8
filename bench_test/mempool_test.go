package bench_test

import (
	"fmt"
	"testing"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/zbench"
)

// bertLayerActivations are the activation shapes of one BERT-base encoder
// layer's forward at batch 8, sequence 128, in allocation order: q, k, v,
// scores, probabilities, context, attention output, residual, FFN up, GELU,
// FFN down, residual.
var bertLayerActivations = [][]int{
	{8, 12, 128, 64}, {8, 12, 128, 64}, {8, 12, 128, 64},
	{8, 12, 128, 128}, {8, 12, 128, 128}, {8, 12, 128, 64},
	{1024, 768}, {1024, 768}, {1024, 3072}, {1024, 3072}, {1024, 768}, {1024, 768},
}

// BenchmarkMemPool times allocation through a device's caching pool: one
// size allocated and freed per op, and the activation set of a BERT-base
// layer. It reports per-op allocs, hits and returns and the hit rate over
// the whole run, warm-up included.
func BenchmarkMemPool(b *testing.B) {
	patterns := []struct {
		name   string
		shapes [][]int
	}{
		{"size=4KiB", [][]int{{1 << 10}}},
		{"size=1MiB", [][]int{{1 << 18}}},
		{"size=64MiB", [][]int{{1 << 24}}},
		{"pattern=bert-layer", bertLayerActivations},
	}
	if testing.Short() {
		patterns = patterns[1:2:2]
	}
	for _, dev := range devices {
		for _, p := range patterns {
			b.Run(fmt.Sprintf("dev=%s/dtype=f32/%s", dev.Name(), p.name), func(b *testing.B) {
				live := make([]*kernels.Tensor, len(p.shapes))
				before := dev.MemStats()
				zbench.Measure(b, zbench.Bench{Dev: dev, NoRoofline: "pool bookkeeping: no arithmetic, no data moved", Op: func() error {
					for i, s := range p.shapes {
						t, err := dev.Alloc(kernels.F32, s...)
						if err != nil {
							return err
						}
						live[i] = t
					}
					for _, t := range live {
						if err := dev.Free(t); err != nil {
							return err
						}
					}
					return nil
				}})
				after := dev.MemStats()
				run := kernels.MemStats{Allocs: after.Allocs - before.Allocs, Hits: after.Hits - before.Hits, Returns: after.Returns - before.Returns}
				ops := float64(b.N + 1) // the warm-up call allocates too
				b.ReportMetric(float64(run.Allocs)/ops, "allocs")
				b.ReportMetric(float64(run.Hits)/ops, "hits")
				b.ReportMetric(float64(run.Returns)/ops, "returns")
				b.ReportMetric(run.HitRate(), "hit-rate")
			})
		}
	}
}
