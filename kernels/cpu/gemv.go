package cpu

import (
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/zbench/zbench/kernels"
)

// gemvRows is the most rows of a for which MatMul against a transposed b
// (a linear layer's [N, K] weight) takes the row-dot-product path: the
// products of decode steps, where each weight is read once per call and
// memory bandwidth, not arithmetic, bounds the time.
const gemvRows = 4

// gemvT sets c[i, n] = alpha·Σ_k a[i, k]·w[n, k] + beta·c[i, n] for the m
// rows of a [m, K] and w [N, K] stored in any float dtype: each weight row
// is widened to float32 once, in a buffer of the goroutine's, and dotted
// with every row of a, so a 16-bit weight is read at its own size and
// never copied whole.
func gemvT(c, a []float32, w *kernels.Tensor, m, n, k int, alpha, beta float32) {
	parallelFor(n, m*k, func(lo, hi int) {
		buf := make([]float32, k)
		for j := lo; j < hi; j++ {
			row := loadRange(w, j*k, (j+1)*k, buf)
			wv := blas32.Vector{N: k, Inc: 1, Data: row}
			for i := range m {
				d := alpha * blas32.Dot(blas32.Vector{N: k, Inc: 1, Data: a[i*k : (i+1)*k]}, wv)
				if beta != 0 {
					d += beta * c[i*n+j]
				}
				c[i*n+j] = d
			}
		}
	})
}
