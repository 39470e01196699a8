package zbench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/zbench/internal/cpuclock"
)

// matmul4096 is the work of a 4096³ f32 matmul: 137 GFLOP over 201 MB.
var matmul4096 = Workload{FLOPs: 2 * 4096 * 4096 * 4096, Bytes: 3 * 4096 * 4096 * 4, DType: kernels.F32}

func TestPeakOfCPU(t *testing.T) {
	p, err := PeakOf(cpu.New())
	require.NoError(t, err)
	assert.Positive(t, p.FLOPSFor(kernels.F32))
	assert.Positive(t, p.Bandwidth)
	assert.Positive(t, p.CacheBytes)
	assert.Equal(t, p.FLOPSFor(kernels.F32), p.FLOPSFor(kernels.F16), "f16 has no faster CPU units here")
	assert.GreaterOrEqual(t, p.FLOPSFor(kernels.BF16), p.FLOPSFor(kernels.F32), "bf16 may have AMX")
}

// TestCPUClockCeiling: the clock the CPU peak assumes is never below one a
// core is measured to run at (the guard once refused a real 407 GFLOP/s
// on a virtual machine whose ceiling was 1.5x its 2.1 GHz base).
func TestCPUClockCeiling(t *testing.T) {
	ghz, source := cpuGHz()
	assert.NotEmpty(t, source)
	if measured, ok := cpuclock.GHz(); ok {
		assert.GreaterOrEqual(t, ghz, measured, "ceiling %.2f GHz (%s)", ghz, source)
	}
}

func TestPeakOfUnknownGPU(t *testing.T) {
	_, err := PeakOf(fakeGPU{name: "Imaginary X1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"Imaginary X1"`)
}

// fakeGPU is a backend that only describes itself.
type fakeGPU struct {
	kernels.Backend
	name string
}

func (g fakeGPU) Info() kernels.DeviceInfo {
	return kernels.DeviceInfo{Kind: kernels.GPU, Name: g.name}
}

// TestRooflineGuardFailsPlantedBenchmark runs a benchmark that claims a
// 4096³ matmul per operation but does no work: the guard must fail it, so
// that its numbers are never printed.
func TestRooflineGuardFailsPlantedBenchmark(t *testing.T) {
	dev := cpu.New()
	planted := testing.Benchmark(func(b *testing.B) {
		Measure(b, Bench{Dev: dev, Work: matmul4096, Op: func() error { return nil }})
	})
	assert.Zero(t, planted.N, "the planted benchmark must fail, not report %v", planted)

	honest := testing.Benchmark(func(b *testing.B) {
		a, err := dev.Alloc(kernels.F32, 1<<20)
		require.NoError(b, err)
		src := make([]byte, a.Bytes())
		Measure(b, Bench{Dev: dev, Work: Workload{Bytes: 2 * float64(a.Bytes()), DType: kernels.F32},
			Op: func() error { return dev.Upload(a, src) }})
	})
	require.Positive(t, honest.N, "an honest benchmark must run")
	assert.Positive(t, honest.Extra["GB/s"])
	assert.Positive(t, honest.Extra["peak-B"])
	assert.Positive(t, honest.Extra["%peak"])
}

func TestConfig(t *testing.T) {
	t.Setenv("ZBENCH_COMMIT", "0123456789ab")
	lines, err := Config([]kernels.Backend{cpu.New()})
	require.NoError(t, err)
	joined := strings.Join(lines, "\n")
	for _, key := range []string{"zbench-commit: 0123456789ab", "blas: ", "cpu-peak-gflops: ", "cpu-bandwidth-gbps: ", "cpu-read-bandwidth-gbps: "} {
		assert.Contains(t, joined, key)
	}
	for _, l := range lines {
		k, v, ok := strings.Cut(l, ": ")
		assert.True(t, ok && k != "" && !strings.ContainsAny(k, " \t") && v != "", "not a benchfmt config line: %q", l)
	}
}
