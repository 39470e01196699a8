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
// rows of a [m, K] and w [N, K] stored in any float dtype: four rows of w
// at a time dotted with every row of a (rowDots), the blocks of rows split
// over the cores, so that w is read from memory once, at its own size.
func gemvT(c, a []float32, w *kernels.Tensor, m, n, k int, alpha, beta float32) {
	parallelFor((n+3)/4, 4*m*k, func(lo, hi int) {
		dot := rowDots(w, k)
		var s [4]float32
		for blk := lo; blk < hi; blk++ {
			j := 4 * blk
			rows := min(4, n-j)
			for i := range m {
				x := a[i*k : (i+1)*k]
				if rows == 4 {
					dot(&s, x, j, 1)
				} else {
					for r := range rows {
						var t [4]float32
						dot(&t, x, j+r, 0)
						s[r] = t[0]
					}
				}
				ci := c[i*n+j : i*n+j+rows]
				for r := range ci {
					d := alpha * s[r]
					if beta != 0 {
						d += beta * ci[r]
					}
					ci[r] = d
				}
			}
		}
	})
}

// rowDot sets out[r] = Σ_p x[p]·w[j + r·step, p] for r < 4 over the K
// values of a row of a weight w [N, K]; step 0 dots row j four times.
type rowDot func(out *[4]float32, x []float32, j, step int)

// rowDots returns a rowDot over w [N, K] (K = k ≥ 1) for one goroutine:
// the hgemv kernels for float32, float16 and bfloat16 weights where they
// run; else the rows widened to float32 (bfloat16 as it is read, in
// dotBF16) in a buffer of the goroutine's and dotted by blas32.
func rowDots(w *kernels.Tensor, k int) rowDot {
	// last is the last element a call reads, checked before the
	// assembly reads up to it.
	last := func(j, step int) int { return (j+3*step)*k + k - 1 }
	if useHgemv {
		switch w.DType() {
		case kernels.F32:
			ws := f32(w)
			return func(out *[4]float32, x []float32, j, step int) {
				_, _ = ws[last(j, step)], x[k-1]
				hgemv.Dot4F32(&x[0], &ws[j*k], step*k, k, out)
			}
		case kernels.F16:
			ws := u16(w)
			return func(out *[4]float32, x []float32, j, step int) {
				_, _ = ws[last(j, step)], x[k-1]
				hgemv.Dot4F16(&x[0], &ws[j*k], step*k, k, out)
			}
		case kernels.BF16:
			ws := u16(w)
			return func(out *[4]float32, x []float32, j, step int) {
				_, _ = ws[last(j, step)], x[k-1]
				hgemv.Dot4BF16(&x[0], &ws[j*k], step*k, k, out)
			}
		}
	}
	buf := make([]float32, k)
	return func(out *[4]float32, x []float32, j, step int) {
		for r := range out {
			row := j + r*step
			if w.DType() == kernels.BF16 {
				out[r] = dotBF16(x, u16(w)[row*k:(row+1)*k])
				continue
			}
			v := loadRange(w, row*k, (row+1)*k, buf)
			out[r] = blas32.Dot(blas32.Vector{N: k, Inc: 1, Data: x}, blas32.Vector{N: k, Inc: 1, Data: v})
		}
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
