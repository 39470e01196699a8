package cpu

import (
	"math"

	"gonum.org/v1/gonum/blas/blas32"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu/internal/hgemv"
)

// gemvRows is the most rows of a for which MatMul against a transposed b
// (a linear layer's [N, K] weight) takes the row-dot-product path: the
// products of decode steps, where each weight is read once per call and
// memory bandwidth, not arithmetic, bounds the time.
const gemvRows = 4

// useHgemv selects the assembly of package hgemv in gemvT; the Go of
// rowDots is the fallback elsewhere and the reference the tests compare
// with.
var useHgemv = hgemv.Available

// gemvT sets c[i, n] = alpha·Σ_k a[i, k]·w[n, k] + beta·c[i, n] for the m
// rows of a [m, K] and w [N, K] stored in any float dtype: each row of w
// dotted with every row of a (rowDots), the rows split over the cores in
// contiguous ranges, so that w is read from memory once, in order, at its
// own size.
func gemvT(c, a []float32, w *kernels.Tensor, m, n, k int, alpha, beta float32) {
	parallelFor(n, m*k, func(lo, hi int) {
		dot := rowDots(w, k)
		for j := lo; j < hi; j++ {
			for i := range m {
				d := alpha * dot(a[i*k:(i+1)*k], j)
				if beta != 0 {
					d += beta * c[i*n+j]
				}
				c[i*n+j] = d
			}
		}
	})
}

// rowDot returns Σ_p x[p]·w[j, p] over the K values of row j of a weight
// w [N, K].
type rowDot func(x []float32, j int) float32

// rowDots returns a rowDot over w [N, K] (K = k ≥ 1) for one goroutine:
// the hgemv kernels for float32, float16 and bfloat16 weights where they
// run; else the rows widened to float32 (bfloat16 as it is read, in
// dotBF16) in a buffer of the goroutine's and dotted by blas32.
func rowDots(w *kernels.Tensor, k int) rowDot {
	if useHgemv {
		switch w.DType() {
		case kernels.F32:
			ws := f32(w)
			return func(x []float32, j int) float32 {
				_, _ = ws[j*k+k-1], x[k-1]
				return hgemv.Dot1F32(&x[0], &ws[j*k], k)
			}
		case kernels.F16:
			ws := u16(w)
			return func(x []float32, j int) float32 {
				_, _ = ws[j*k+k-1], x[k-1]
				return hgemv.Dot1F16(&x[0], &ws[j*k], k)
			}
		case kernels.BF16:
			ws := u16(w)
			return func(x []float32, j int) float32 {
				_, _ = ws[j*k+k-1], x[k-1]
				return hgemv.Dot1BF16(&x[0], &ws[j*k], k)
			}
		}
	}
	if w.DType() == kernels.BF16 {
		ws := u16(w)
		return func(x []float32, j int) float32 { return dotBF16(x, ws[j*k:(j+1)*k]) }
	}
	buf := make([]float32, k)
	return func(x []float32, j int) float32 {
		v := loadRange(w, j*k, (j+1)*k, buf)
		return blas32.Dot(blas32.Vector{N: k, Inc: 1, Data: x}, blas32.Vector{N: k, Inc: 1, Data: v})
	}
}

// dotBF16 is Σ a[i]·w[i] for bfloat16 w, widened in the loop (a bfloat16
// is the top half of a float32), over eight partial sums.
func dotBF16(a []float32, w []uint16) float32 {
	var s [8]float32
	a = a[:len(w)]
	n := len(w) &^ 7
	for i := 0; i < n; i += 8 {
		a, w := a[i:i+8], w[i:i+8]
		for l := range 8 {
			s[l] += a[l] * math.Float32frombits(uint32(w[l])<<16)
		}
	}
	for i := n; i < len(w); i++ {
		s[0] += a[i] * math.Float32frombits(uint32(w[i])<<16)
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}
