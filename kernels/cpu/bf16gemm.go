package cpu

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/zbench/zbench/kernels"
)

// bf16Gemmer is an engine with a bfloat16 GEMM: c = alpha·op(a)·op(b) +
// beta·c, a and b in bfloat16 as stored, c in float32, row-major, with the
// arguments of Sgemm.
type bf16Gemmer interface {
	Bf16gemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []uint16, lda int,
		b []uint16, ldb int, beta float32, c []float32, ldc int)
}

// widenedBf16gemm is Bf16gemm through float32: a and b widened whole, then
// the engine's SGEMM (through blas32, which reports bad arguments).
func widenedBf16gemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []uint16, lda int,
	b []uint16, ldb int, beta float32, c []float32, ldc int) {
	widen := func(s []uint16) []float32 {
		w := make([]float32, len(s))
		for i, h := range s {
			w[i] = kernels.BF16ToFloat32(h)
		}
		return w
	}
	blas32.Implementation().Sgemm(tA, tB, m, n, k, alpha, widen(a), lda, widen(b), ldb, beta, c, ldc)
}
