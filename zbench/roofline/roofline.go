// Package roofline is the roofline model of a device: the work an operation
// declares (Workload), what a device can do at best (Peak), the check that
// refuses a result above it, and the vendor peaks of the GPUs zbench knows.
//
// It imports neither testing nor a compute backend, so that the harness
// (package zbench), which measures a CPU's peak and checks every benchmark
// against it, and the offline analysis (package compare), which checks
// results read from files, share one table and one check.
package roofline

import (
	"fmt"
	"strings"
	"time"

	"github.com/zbench/zbench/kernels"
)

// Workload declares the work one operation of a benchmark does: what the
// harness turns into throughput metrics and checks against the device's peak.
type Workload struct {
	// FLOPs is the arithmetic of one operation (a multiply-add counts 2).
	FLOPs float64
	// LeastFLOPs, where it is below FLOPs, is the arithmetic of the
	// cheapest algorithm the backend may run the operation with (a 3×3
	// convolution as Winograd's F(2×2, 3×3): kernels.ConvDims.LeastFLOPs).
	// The guard holds it to the peak; rates are reported from FLOPs, the
	// effective rate that convolution benchmarks quote. Zero means FLOPs.
	LeastFLOPs float64
	// Bytes is the least traffic one operation needs between memory and
	// the processor: every input read once and every output written once.
	Bytes float64
	// DType is the type the arithmetic runs in; it selects the peak.
	DType kernels.DType
	// ReadOnly marks a workload whose Bytes are reads (a decode step
	// streaming its weights): on a CPU its adjacent bandwidth is that of a
	// stream that only reads, not a copy's.
	ReadOnly bool
	// Items, with ItemUnit ("seq/s", "img/s", "tok/s"), reports a rate of
	// work items per second; zero reports none.
	Items    float64
	ItemUnit string
}

// Peak is what a device can do at best: the roofline.
type Peak struct {
	Device string
	// FLOPS is the peak arithmetic rate per compute dtype, in FLOP/s
	// (dense; tensor cores where the dtype uses them).
	FLOPS map[kernels.DType]float64
	// Bandwidth is the peak rate of main (device) memory in bytes/s.
	Bandwidth float64
	// ReadBandwidth is the rate of a stream that only reads, in bytes/s,
	// where it was measured (a CPU's); zero where it was not.
	ReadBandwidth float64
	// BandwidthLimit is the rate Check holds results to, where it differs
	// from Bandwidth: above a bandwidth measured by a copy, which a stream
	// that only reads can pass. Zero means Bandwidth.
	BandwidthLimit float64
	// CacheBytes is the largest cache: that much of a working set may be
	// served from it at rates above Bandwidth, so the bandwidth check only
	// applies to the traffic beyond it.
	CacheBytes int64
	// Source says where the numbers come from.
	Source string
}

// FLOPSFor returns the peak rate for dt, falling back to the F32 rate.
func (p Peak) FLOPSFor(dt kernels.DType) float64 {
	if f, ok := p.FLOPS[dt]; ok {
		return f
	}
	return p.FLOPS[kernels.F32]
}

// Check returns an error when w done in perOp would exceed the peak: a
// result no device can produce, and so a broken benchmark.
func (p Peak) Check(w Workload, perOp time.Duration) error {
	if perOp <= 0 {
		return fmt.Errorf("roofline: %v per operation on %s: the timer measured nothing (missing device sync, or the work was never queued)", perOp, p.Device)
	}
	sec := perOp.Seconds()
	flops, least := w.FLOPs, ""
	if w.LeastFLOPs > 0 && w.LeastFLOPs < flops {
		flops, least = w.LeastFLOPs, " (the arithmetic of its cheapest algorithm)"
	}
	if peak := p.FLOPSFor(w.DType); flops > 0 && peak > 0 && flops/sec > peak {
		return fmt.Errorf("roofline: %.4g GFLOP/s%s in %v exceeds the %s peak of %.4g GFLOP/s (%s) by %.1fx: "+
			"likely a missing device synchronisation (the timer stopped before the work finished), "+
			"work the compiler or backend eliminated, or a declared FLOP count larger than the work done",
			flops/sec/1e9, least, w.DType, p.Device, peak/1e9, p.Source, flops/sec/peak)
	}
	// At most the cache's worth of the working set can be served from the
	// cache; the rest must come from memory.
	limit := p.BandwidthLimit
	if limit == 0 {
		limit = p.Bandwidth
	}
	if spill := w.Bytes - float64(p.CacheBytes); spill > 0 && limit > 0 && spill/sec > limit {
		return fmt.Errorf("roofline: %.4g GB/s exceeds the %s memory bandwidth limit of %.4g GB/s (%s) by %.1fx for the %.3g MB of a %.3g MB working set that its %d MB cache cannot hold: "+
			"likely a missing device synchronisation, cache reuse across iterations that a real run would not get, or a declared byte count larger than the data moved",
			spill/sec/1e9, p.Device, limit/1e9, p.Source, spill/sec/limit, spill/1e6, w.Bytes/1e6, p.CacheBytes>>20)
	}
	return nil
}

// MemoryBound reports whether w is bound by memory on this roofline: it
// moves bytes and its arithmetic intensity is at or below the ridge point.
func (p Peak) MemoryBound(w Workload) bool {
	peak := p.FLOPSFor(w.DType)
	return w.Bytes > 0 && p.Bandwidth > 0 && (w.FLOPs == 0 || w.FLOPs/w.Bytes <= peak/p.Bandwidth)
}

// Fraction is the share of the roofline that w in perOp reaches, between 0
// and 1: of the arithmetic peak when w is compute-bound (its arithmetic
// intensity above the ridge point) and of the bandwidth otherwise.
func (p Peak) Fraction(w Workload, perOp time.Duration) float64 {
	sec := perOp.Seconds()
	if p.MemoryBound(w) {
		return w.Bytes / sec / p.Bandwidth
	}
	if peak := p.FLOPSFor(w.DType); peak > 0 && w.FLOPs > 0 {
		return w.FLOPs / sec / peak
	}
	return 0
}

// GPU returns the vendor peak of the GPU with the given device name (as the
// driver and torch.cuda.get_device_name report it), and false for a GPU the
// table does not know.
func GPU(name string) (Peak, bool) {
	for _, g := range gpuPeaks {
		if strings.Contains(name, g.match) {
			p := g.peak
			p.Device = name
			return p, true
		}
	}
	return Peak{}, false
}

// gpuPeaks are vendor dense peaks (no sparsity) of the GPUs zbench knows,
// matched by substring of the device name, most specific first.
var gpuPeaks = []struct {
	match string
	peak  Peak
}{
	{"H200", Peak{FLOPS: tensorPeaks(67e12, 494.7e12, 989.4e12, 1978.9e12), Bandwidth: 4.8e12, CacheBytes: 50 << 20, Source: "H200 SXM datasheet"}},
	{"H100 PCIe", Peak{FLOPS: tensorPeaks(51.2e12, 378e12, 756e12, 1513e12), Bandwidth: 2.0e12, CacheBytes: 50 << 20, Source: "H100 PCIe datasheet"}},
	{"H100", Peak{FLOPS: tensorPeaks(67e12, 494.7e12, 989.4e12, 1978.9e12), Bandwidth: 3.35e12, CacheBytes: 50 << 20, Source: "H100 SXM datasheet"}},
	{"A100", Peak{FLOPS: tensorPeaks(19.5e12, 156e12, 312e12, 624e12), Bandwidth: 2.039e12, CacheBytes: 40 << 20, Source: "A100 SXM 80GB datasheet"}},
	{"T4", Peak{FLOPS: tensorPeaks(8.1e12, 0, 65e12, 130e12), Bandwidth: 320e9, CacheBytes: 4 << 20, Source: "T4 datasheet"}},
}

// tensorPeaks fills the per-dtype table from the CUDA-core f32 rate and the
// tensor-core TF32, 16-bit and 8-bit rates. F32 takes the TF32 rate where
// there is one, since an f32 matmul may run on tensor cores in TF32 and the
// table is a ceiling; 8-bit floats run at the INT8 rate from Hopper on.
func tensorPeaks(f32, tf32, f16, i8 float64) map[kernels.DType]float64 {
	m := map[kernels.DType]float64{kernels.F32: max(f32, tf32), kernels.F16: f16, kernels.BF16: f16, kernels.I8: i8}
	if i8 >= 1.9e15 { // Hopper: FP8 at the INT8 rate
		m[kernels.E4M3], m[kernels.E5M2] = i8, i8
	}
	return m
}
