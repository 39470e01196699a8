package zbench_test

import (
	"fmt"
	"testing"

	"github.com/zbench/zbench/kernels"
	_ "github.com/zbench/zbench/kernels/cpu" // registers "cpu"
	"github.com/zbench/zbench/zbench"
)

// A benchmark of a 64×64×64 f32 matrix multiply on the first device: the
// work it declares (FLOPs, minimum bytes) feeds GFLOP/s, GB/s, %peak and
// the roofline guard, and Verify's relative error against a float64
// reference is reported as rel-err. In a _test.go file the function body
// is a BenchmarkX(b *testing.B); here testing.Benchmark runs it.
func Example() {
	devs, err := zbench.Devices()
	if err != nil {
		fmt.Println(err)
		return
	}
	dev := devs[0]
	const n = 64
	av, bv := make([]float32, n*n), make([]float32, n*n)
	for i := range av {
		av[i], bv[i] = float32(i%7)-3, float32(i%5)-2
	}
	a, _ := kernels.FromFloat32(dev, kernels.F32, av, n, n)
	b, _ := kernels.FromFloat32(dev, kernels.F32, bv, n, n)
	out, _ := dev.Alloc(kernels.F32, n, n)

	res := testing.Benchmark(func(tb *testing.B) {
		zbench.Measure(tb, zbench.Bench{
			Dev:  dev,
			Work: zbench.Workload{FLOPs: 2 * n * n * n, Bytes: 3 * n * n * 4, DType: kernels.F32},
			Op:   func() error { return dev.MatMul(out, a, b, kernels.MatMulParams{}) },
			Verify: func() (float64, error) {
				got, err := kernels.ToFloat32(out)
				if err != nil {
					return 0, err
				}
				gotD, want := make([]float64, n*n), make([]float64, n*n)
				for i := range n {
					for j := range n {
						for k := range n {
							want[i*n+j] += float64(av[i*n+k]) * float64(bv[k*n+j])
						}
						gotD[i*n+j] = float64(got[i*n+j])
					}
				}
				rel, _ := kernels.RelErr(gotD, want)
				return rel, nil
			},
			MaxRelErr: kernels.Tolerance(kernels.F32),
		})
	})
	fmt.Println("timed:", res.N > 0)
	fmt.Println("rel-err within f32 tolerance:", res.Extra["rel-err"] <= kernels.Tolerance(kernels.F32))
	fmt.Println("reports the bound it applied:", res.Extra["rel-err-bound"] == kernels.Tolerance(kernels.F32))
	fmt.Println("reports GFLOP/s, GB/s and the share of peak:", res.Extra["GFLOP/s"] > 0, res.Extra["GB/s"] > 0, res.Extra["%peak"] > 0)
	// Output:
	// timed: true
	// rel-err within f32 tolerance: true
	// reports the bound it applied: true
	// reports GFLOP/s, GB/s and the share of peak: true true true
}
