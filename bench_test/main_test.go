// Package bench_test holds zbench's workloads as standard Go benchmarks,
// one Benchmark function per workload with sub-benchmarks named
// dev=…/dtype=…/key=value, and the golden accuracy tests that check every
// device against outputs written by an independent PyTorch reference.
//
//	go test -bench=. ./bench_test/          # every workload, real sizes
//	go test -short -bench=. ./bench_test/   # the quick set
//
// The environment (commit, BLAS, peaks, GPU) is printed once as benchfmt
// configuration lines, so that the output is a complete, comparable record.
package bench_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/zbench"
)

// devices are the backends every benchmark and golden test runs on.
var devices []kernels.Backend

func TestMain(m *testing.M) {
	flag.Parse()
	var err error
	if devices, err = zbench.Devices(); err != nil {
		fmt.Fprintln(os.Stderr, "zbench:", err)
		os.Exit(2)
	}
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		if err := zbench.PrintEnv(os.Stdout, devices); err != nil {
			fmt.Fprintln(os.Stderr, "zbench:", err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}

// uniform returns n seeded values uniform in [-1, 1), rounded to dt.
func uniform(seed uint64, dt kernels.DType, n int) []float32 {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	out := make([]float32, n)
	for i := range out {
		out[i] = kernels.Round(dt, float32(2*rng.Float64()-1))
	}
	return out
}

// upload allocates a tensor on dev holding vals; it is freed when b ends.
func upload(b *testing.B, dev kernels.Backend, dt kernels.DType, vals []float32, shape ...int) *kernels.Tensor {
	b.Helper()
	t, err := kernels.FromFloat32(dev, dt, vals, shape...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = dev.Free(t) })
	return t
}

// alloc allocates an uninitialised tensor on dev, freed when b ends.
func alloc(b *testing.B, dev kernels.Backend, dt kernels.DType, shape ...int) *kernels.Tensor {
	b.Helper()
	t, err := dev.Alloc(dt, shape...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = dev.Free(t) })
	return t
}

// dtypes lists the dtypes a workload runs in: all of want, or only the
// first in -short mode.
func dtypes(want ...kernels.DType) []kernels.DType {
	if testing.Short() {
		return want[:1]
	}
	return want
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// devicesWith returns the devices that implement the op group T
// (kernels.Decoder, kernels.Vision).
func devicesWith[T any]() []kernels.Backend {
	var out []kernels.Backend
	for _, d := range devices {
		if _, ok := d.(T); ok {
			out = append(out, d)
		}
	}
	return out
}

// visionDevices are the devices that implement kernels.Vision.
func visionDevices() []kernels.Backend { return devicesWith[kernels.Vision]() }

// captured returns run as one graph launch on devices that capture
// graphs, after one eager pass (scratch space grows outside the capture),
// and run itself elsewhere; the graph is closed when b ends.
func captured(b *testing.B, dev kernels.Backend, run func() error) func() error {
	b.Helper()
	c, err := kernels.Group[kernels.Capturer](dev)
	if err != nil {
		return run
	}
	if err := run(); err != nil {
		b.Fatal(err)
	}
	if err := dev.Sync(); err != nil {
		b.Fatal(err)
	}
	g, err := c.Capture(run)
	if err != nil {
		b.Fatalf("capture: %v", err)
	}
	b.Cleanup(func() { _ = g.Close() })
	return g.Launch
}
