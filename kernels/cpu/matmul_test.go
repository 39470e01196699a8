package cpu_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
)

// BenchmarkSgemm times an F32 n×n×n MatMul through the backend and reports
// GFLOP/s, to compare the BLAS libraries:
//
//	go test -run='^$' -bench=Sgemm ./kernels/cpu/
//	go test -tags openblas -run='^$' -bench=Sgemm ./kernels/cpu/
func BenchmarkSgemm(b *testing.B) {
	be := cpu.New()
	defer be.Close()
	for _, n := range []int{1024, 4096} {
		b.Run(fmt.Sprintf("blas=%s/n=%d", be.Info().BLAS, n), func(b *testing.B) {
			vals := make([]float32, n*n)
			for i := range vals {
				vals[i] = float32(i%7) - 3
			}
			x, err := kernels.FromFloat32(be, kernels.F32, vals, n, n)
			require.NoError(b, err)
			defer be.Free(x)
			y, err := kernels.FromFloat32(be, kernels.F32, vals, n, n)
			require.NoError(b, err)
			defer be.Free(y)
			out, err := be.Alloc(kernels.F32, n, n)
			require.NoError(b, err)
			defer be.Free(out)

			for b.Loop() {
				if err := be.MatMul(out, x, y, kernels.MatMulParams{}); err != nil {
					b.Fatal(err)
				}
			}
			secs := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(2*float64(n)*float64(n)*float64(n)/secs/1e9, "GFLOP/s")
		})
	}
}
