package cpu

import (
	"math"
	"sync"

	"gonum.org/v1/gonum/blas/blas32"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu/internal/hgemv"
)

// gemvRows is the most rows of a for which MatMul against a transposed b
// (a linear layer's [N, K] weight) takes the row-dot-product path: the
// products of decode steps, where each weight is read once per call, four
// rows of a at a time against each weight row (rowDot4), so that a
// serving engine's batch of sequences costs little more than one.
const gemvRows = 16

// gemvBlockBytes is how much of the weight gemvT dots with one group of
// four rows of a before the next group: a block that stays in L2 while
// each group reads it.
const gemvBlockBytes = 256 << 10

// gemvAhead is how many rows of the weight ahead of the one it reads a
// rowDot4 prefetches: the memory stream keeps going while the four rows
// of a are multiplied.
const gemvAhead = 4

// useHgemv selects the assembly of package hgemv in gemvT; the Go of
// rowDots is the fallback elsewhere and the reference the tests compare
// with.
var useHgemv = hgemv.Available

// usePairs selects package hgemv's pair kernels in gemvT for bfloat16
// rows of a against a bfloat16 weight.
var usePairs = hgemv.AvailablePairs

// gemvT sets c[i, n] = alpha·Σ_k a[i, k]·w[n, k] + beta·c[i, n] for the m
// rows of a [m, K] and w [N, K] stored in any float dtype, through
// dotRows: bfloat16 by bfloat16 in pairDots where the CPU has them, the
// products summed two by two as the bfloat16 GEMM sums them; else a
// widened to float32 against rowDots.
func gemvT(c []float32, a, w *kernels.Tensor, m, n, k int, alpha, beta float32) {
	if usePairs && a.DType() == kernels.BF16 && w.DType() == kernels.BF16 {
		ws := u16(w)
		dotRows(c, u16(a)[:m*k], m, n, k, alpha, beta, 2*k, func() rowKernels[uint16] { return pairDots(ws, k) })
		return
	}
	dotRows(c, in32(a), m, n, k, alpha, beta, k*w.DType().Size(), func() rowKernels[float32] { return rowDots(w, k) })
}

// dotRows sets c[i, n] = alpha·Σ_k a[i, k]·w[n, k] + beta·c[i, n] for the
// m rows of a [m, K] and a weight w [N, K] of rowBytes bytes a row that
// dots (called once per goroutine) multiplies: each row of w dotted with
// every row of a, four rows at a time where dots gives a rowDot4 (and
// two rows of w at a time against them where it gives a rowDot4x2; a
// last two or three rows, or a last one after others, go the same way,
// padded with zeros to four),
// the other rows of a against a block of w's rows in one call where it
// gives a rowDotN, the rows of w split over the cores in contiguous
// ranges and taken a block at a time, so that w is read from memory
// once, in order, at its own size. Every output is the same rowDot sum
// whatever m is. The rows of a are float32, or bfloat16 for pair kernels.
func dotRows[X float32 | uint16](c []float32, a []X, m, n, k int, alpha, beta float32, rowBytes int, dots func() rowKernels[X]) {
	block := max(1, gemvBlockBytes/rowBytes)
	parallelFor(n, m*k, func(lo, hi int) {
		kern := dots()
		dot, dot4 := kern.one, kern.four
		var many []float32 // a block's sums from kern.rows, where alpha and beta need a pass
		if kern.rows != nil && (alpha != 1 || beta != 0) {
			many = make([]float32, block)
		}
		put := func(i, j int, d float32) {
			d *= alpha
			if beta != 0 {
				d += beta * c[i*n+j]
			}
			c[i*n+j] = d
		}
		fours := 0 // rows of a that go four at a time
		var padded []X
		if dot4 != nil {
			fours = m &^ 3
			if m-fours >= 2 || (fours > 0 && m-fours == 1) {
				pool := padPool[X]()
				buf := pool.Get().(*[]X)
				defer pool.Put(buf)
				*buf = grow(*buf, 4*k)
				padded = (*buf)[:4*k]
				copy(padded, a[fours*k:m*k])
				clear(padded[(m-fours)*k:])
				fours = m
			}
		}
		var sums [4]float32
		var pairs [8]float32
		for j0 := lo; j0 < hi; j0 += block {
			j1 := min(j0+block, hi)
			for i := 0; i < fours; i += 4 {
				x, rows := padded, m-i
				if i+4 <= m {
					x, rows = a[i*k:(i+4)*k], 4
				}
				// The first group of rows of a streams the block from
				// memory, prefetching a few rows ahead; the later ones,
				// which find it in the cache, prefetch a share each of the
				// next block, so that memory streams while they compute.
				pre := func(j int) int { return j + gemvAhead }
				if g := i / 4; g > 0 {
					later := (fours+3)/4 - 1
					from := j0 + block + (g-1)*block/later
					pre = func(j int) int { return from + (j-j0)/later }
				}
				j := j0
				for ; kern.four2 != nil && j+2 <= j1; j += 2 {
					kern.four2(x, j, min(pre(j), n-2), &pairs)
					for r := range rows {
						put(i+r, j, pairs[2*r])
						put(i+r, j+1, pairs[2*r+1])
					}
				}
				for ; j < j1; j++ {
					dot4(x, j, min(pre(j), n-1), &sums)
					for r := range rows {
						put(i+r, j, sums[r])
					}
				}
			}
			for i := fours; i < m; i++ {
				x := a[i*k : (i+1)*k]
				switch {
				case kern.rows != nil && many == nil:
					kern.rows(x, j0, j1, c[i*n+j0:i*n+j1])
				case kern.rows != nil:
					kern.rows(x, j0, j1, many[:j1-j0])
					for j := j0; j < j1; j++ {
						put(i, j, many[j-j0])
					}
				default:
					for j := j0; j < j1; j++ {
						put(i, j, dot(x, j))
					}
				}
			}
		}
	})
}

// padBufs32 and padBufs16 hold the buffers of dotRows' last rows padded
// to four, float32 and bfloat16.
var (
	padBufs32 = sync.Pool{New: func() any { return new([]float32) }}
	padBufs16 = sync.Pool{New: func() any { return new([]uint16) }}
)

// padPool is the pool of padded rows of X.
func padPool[X float32 | uint16]() *sync.Pool {
	var x X
	if _, ok := any(x).(uint16); ok {
		return &padBufs16
	}
	return &padBufs32
}

// rowDot returns Σ_p x[p]·w[j, p] over the K values of row j of a weight
// w [N, K].
type rowDot[X float32 | uint16] func(x []X, j int) float32

// rowDot4 sets sums[r] to the rowDot of row r of x (four rows of K
// values) with row j of w, reading w's row once for the four, and
// prefetches w's row pre.
type rowDot4[X float32 | uint16] func(x []X, j, pre int, sums *[4]float32)

// rowDot4x2 sets sums[2r+c] to the rowDot of row r of x (four rows of K
// values) with row j+c of w, c < 2, reading each row once for the
// others, and prefetches w's rows pre and pre+1.
type rowDot4x2[X float32 | uint16] func(x []X, j, pre int, sums *[8]float32)

// rowDotN sets dst[j-j0] to the rowDot of x with row j of w for each j0 ≤
// j < j1, in one call.
type rowDotN[X float32 | uint16] func(x []X, j0, j1 int, dst []float32)

// rowKernels are the dot products dotRows multiplies a weight's rows
// with: one, and where not nil four, four2 and rows, whose sums equal
// one's bit for bit.
type rowKernels[X float32 | uint16] struct {
	one   rowDot[X]
	four  rowDot4[X]
	four2 rowDot4x2[X]
	rows  rowDotN[X]
}

// rowDots returns the rowKernels over w [N, K] (K = k ≥ 1) for one
// goroutine: the hgemv kernels for float32, float16 and bfloat16 weights
// where they run; else the rows widened to float32 (bfloat16 as it is
// read, in dotBF16) in a buffer of the goroutine's and dotted by blas32,
// without a rowDot4.
func rowDots(w *kernels.Tensor, k int) rowKernels[float32] {
	if useHgemv {
		switch w.DType() {
		case kernels.F32:
			return hgemvDots(f32(w), k, hgemv.Dot1F32, hgemv.Dot4F32, hgemv.Dot4x2F32)
		case kernels.F16:
			return hgemvDots(u16(w), k, hgemv.Dot1F16, hgemv.Dot4F16, hgemv.Dot4x2F16)
		case kernels.BF16:
			return hgemvDots(u16(w), k, hgemv.Dot1BF16, hgemv.Dot4BF16, hgemv.Dot4x2BF16)
		}
	}
	if w.DType() == kernels.BF16 {
		ws := u16(w)
		return rowKernels[float32]{one: func(x []float32, j int) float32 { return dotBF16(x, ws[j*k:(j+1)*k]) }}
	}
	buf := make([]float32, k)
	return rowKernels[float32]{one: func(x []float32, j int) float32 {
		v := loadRange(w, j*k, (j+1)*k, buf)
		return blas32.Dot(blas32.Vector{N: k, Inc: 1, Data: x}, blas32.Vector{N: k, Inc: 1, Data: v})
	}}
}

// hgemvDots is rowDots over the rows of ws (k values each) through one of
// package hgemv's sets of kernels, x's values of type X.
func hgemvDots[X, T float32 | uint16](ws []T, k int, dot1 func(*X, *T, int) float32,
	dot4 func(*X, int, *T, int, *float32, int, *T), dot4x2 func(*X, int, *T, int, int, *float32, int, *T)) rowKernels[X] {
	return rowKernels[X]{one: func(x []X, j int) float32 {
		_, _ = ws[j*k+k-1], x[k-1]
		return dot1(&x[0], &ws[j*k], k)
	}, four: func(x []X, j, pre int, sums *[4]float32) {
		_, _, _ = ws[j*k+k-1], ws[pre*k+k-1], x[4*k-1]
		dot4(&x[0], k, &ws[j*k], k, &sums[0], 1, &ws[pre*k])
	}, four2: func(x []X, j, pre int, sums *[8]float32) {
		_, _, _ = ws[(j+2)*k-1], ws[(pre+2)*k-1], x[4*k-1]
		dot4x2(&x[0], k, &ws[j*k], k, k, &sums[0], 2, &ws[pre*k])
	}}
}

// pairDots is the rowKernels over bfloat16 rows ws (k values each) for
// bfloat16 rows of x: package hgemv's pair kernels.
func pairDots(ws []uint16, k int) rowKernels[uint16] {
	return hgemvDots(ws, k, hgemv.Dot1PairsBF16, hgemv.Dot4PairsBF16, hgemv.Dot4x2PairsBF16)
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
