package roofline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
)

// matmul4096 is the work of a 4096³ f32 matmul: 137 GFLOP over 201 MB.
var matmul4096 = Workload{FLOPs: 2 * 4096 * 4096 * 4096, Bytes: 3 * 4096 * 4096 * 4, DType: kernels.F32}

// cpuPeak64 is a 2-core CPU with a 64 MiB cache and 60 GB/s of memory.
var cpuPeak64 = Peak{Device: "CPU", FLOPS: map[kernels.DType]float64{kernels.F32: 400e9}, Bandwidth: 60e9,
	CacheBytes: 64 << 20, Source: "test"}

// cpuCopyPeak is a CPU whose 60 GB/s was measured by a copy, results held
// to twice it.
var cpuCopyPeak = Peak{Device: "CPU", FLOPS: map[kernels.DType]float64{kernels.F32: 400e9}, Bandwidth: 60e9,
	BandwidthLimit: 120e9, CacheBytes: 64e6, Source: "test"}

func TestPeakCheck(t *testing.T) {
	h100, ok := GPU("NVIDIA H100 80GB HBM3")
	require.True(t, ok)
	t4, ok := GPU("Tesla T4")
	require.True(t, ok)
	for _, tc := range []struct {
		name  string
		peak  Peak
		w     Workload
		perOp time.Duration
		want  string // substring of the error; "" for none
	}{
		{"plausible matmul", h100, matmul4096, 300 * time.Microsecond, ""},
		// A reported claim: a 1024³ f32 matmul in 0.013 ms is ~165 TFLOP/s.
		{"unsynchronised timer", t4, Workload{FLOPs: 2 << 30, DType: kernels.F32}, 13 * time.Microsecond, "exceeds the Tesla T4 peak"},
		{"bf16 within tensor-core peak", h100, Workload{FLOPs: 2 * 8192 * 8192 * 8192, DType: kernels.BF16}, 1500 * time.Microsecond, ""},
		{"bandwidth beyond HBM", h100, Workload{Bytes: 1 << 30}, 100 * time.Microsecond, "exceeds the NVIDIA H100 80GB HBM3 memory bandwidth"},
		{"small working set may hit in cache", h100, Workload{Bytes: 1 << 20}, time.Nanosecond, ""},
		// A 75.5 MB elementwise op against a 64 MB cache at 60 GB/s: at
		// most 11.5 MB need come from memory.
		{"working set a little over the cache", cpuPeak64, Workload{Bytes: 75.5e6}, time.Millisecond, ""},
		{"working set far over the cache", cpuPeak64, Workload{Bytes: 640e6}, time.Millisecond, "for the 573 MB of a 640 MB working set"},
		{"zero time", h100, matmul4096, 0, "measured nothing"},
		// A read-only stream above a copy-measured bandwidth, within the
		// limit; and past the limit.
		{"read stream above a measured copy rate", cpuCopyPeak, Workload{Bytes: 64e6 + 45e6}, time.Millisecond, ""},
		{"read stream past the limit", cpuCopyPeak, Workload{Bytes: 64e6 + 121e6}, time.Millisecond, "memory bandwidth limit of 120 GB/s"},
		// A 3×3 convolution's effective 600 GFLOP/s on a 400 GFLOP/s CPU:
		// within the peak as Winograd's F(2×2, 3×3) does it, past it as
		// its cheapest algorithm's arithmetic, and as a direct one.
		{"effective rate of a fast algorithm", cpuCopyPeak, Workload{FLOPs: 600e6, LeastFLOPs: 600e6 / 2.25, DType: kernels.F32}, time.Millisecond, ""},
		{"fast algorithm past the peak", cpuCopyPeak, Workload{FLOPs: 1000e6, LeastFLOPs: 1000e6 / 2.25, DType: kernels.F32}, time.Millisecond, "444.4 GFLOP/s (the arithmetic of its cheapest algorithm)"},
		{"direct rate past the peak", cpuCopyPeak, Workload{FLOPs: 600e6, DType: kernels.F32}, time.Millisecond, "600 GFLOP/s in f32 exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.peak.Check(tc.w, tc.perOp)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestGPU(t *testing.T) {
	for _, tc := range []struct {
		name, want string // want: the table's Source; "" for none
	}{
		{"NVIDIA H100 80GB HBM3", "H100 SXM datasheet"},
		{"NVIDIA H100 PCIe", "H100 PCIe datasheet"},
		{"NVIDIA H200", "H200 SXM datasheet"},
		{"Tesla T4", "T4 datasheet"},
		{"Imaginary X1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := GPU(tc.name)
			assert.Equal(t, tc.want != "", ok)
			assert.Equal(t, tc.want, p.Source)
			if ok {
				assert.Equal(t, tc.name, p.Device)
			}
		})
	}
	h100, _ := GPU("NVIDIA H100 80GB HBM3")
	t4, _ := GPU("Tesla T4")
	assert.Equal(t, h100.FLOPSFor(kernels.I8), h100.FLOPSFor(kernels.E4M3), "Hopper runs FP8 at the INT8 rate")
	assert.Equal(t, t4.FLOPSFor(kernels.F32), t4.FLOPSFor(kernels.E4M3), "the T4 has no FP8 units: f32's rate")
}
