package cpu

import (
	"math"

	"gonum.org/v1/gonum/blas/blas32"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu/internal/vecmath"
)

// gemvRows is the most rows of a for which MatMul against a transposed b
// (a linear layer's [N, K] weight) takes the row-dot-product path: the
// products of decode steps, where each weight is read once per call and
// memory bandwidth, not arithmetic, bounds the time.
const gemvRows = 4

// gemvT sets c[i, n] = alpha·Σ_k a[i, k]·w[n, k] + beta·c[i, n] for the m
// rows of a [m, K] and w [N, K] stored in any float dtype: each weight row
// is widened to float32 once, in a buffer of the goroutine's (bfloat16
// as it is read, in the dot product), and dotted with every row of a, so a
// 16-bit weight is read at its own size and never copied whole.
func gemvT(c, a []float32, w *kernels.Tensor, m, n, k int, alpha, beta float32) {
	parallelFor(n, m*k, func(lo, hi int) {
		buf := make([]float32, k)
		for j := lo; j < hi; j++ {
			var row []float32
			if w.DType() != kernels.BF16 {
				row = loadRange(w, j*k, (j+1)*k, buf)
			}
			for i := range m {
				ai := a[i*k : (i+1)*k]
				var d float32
				if row == nil {
					d = dotBF16Row(ai, u16(w)[j*k:(j+1)*k])
				} else {
					d = blas32.Dot(blas32.Vector{N: k, Inc: 1, Data: ai}, blas32.Vector{N: k, Inc: 1, Data: row})
				}
				d *= alpha
				if beta != 0 {
					d += beta * c[i*n+j]
				}
				c[i*n+j] = d
			}
		}
	})
}

// dotBF16Row is Σ a[i]·w[i] for bfloat16 w: AVX-512 where the CPU has it
// (vecmath.DotBF16), else dotBF16.
func dotBF16Row(a []float32, w []uint16) float32 {
	if useVecmath && vecmath.DotBF16Available {
		return vecmath.DotBF16(a, w)
	}
	return dotBF16(a, w)
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
