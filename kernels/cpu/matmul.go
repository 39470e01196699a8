package cpu

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/zbench/zbench/kernels"
)

// smallGemm returns the work (M·N·K) under which the products of a batch are
// split across goroutines, each product single-threaded; larger products are
// multiplied one after another, each by the multi-threaded BLAS. The limit is
// about where the BLAS starts threads of its own: OpenBLAS at 64³
// (GEMM_MULTITHREAD_THRESHOLD), gonum at 2×2 blocks of 64×64 outputs.
func smallGemm() int {
	if openBLAS() {
		return 1 << 18
	}
	return 1 << 21
}

// parallelGemms runs f over n work items that each call the BLAS on small
// products: across goroutines with gonum, whose products below smallGemm
// run on the calling goroutine, and on one goroutine with OpenBLAS, whose
// own threads would otherwise contend with ours for the cores.
func parallelGemms(n, cost int, f func(lo, hi int)) {
	if openBLAS() {
		f(0, n)
		return
	}
	parallelFor(n, cost, f)
}

// MatMul sets out = act(alpha·op(a)·op(b) + beta·out + bias) through blas32.
// a is [batch…, M, K] ([batch…, K, M] with TransA), b has the same batch
// dimensions or none (shared by every batch), out is [batch…, M, N] and bias
// [N]. F16 and BF16 are multiplied in float32 and rounded on store.
func (b *Backend) MatMul(out, a, bt *kernels.Tensor, p kernels.MatMulParams) error {
	g, err := kernels.CheckMatMul("cpu: matmul", b, out, a, bt, p)
	if err != nil {
		return err
	}
	m, n, k, batch, shared := g.M, g.N, g.K, g.Batch, g.SharedB
	// The operands as stored, and how BLAS is to read them.
	ar, ac, tA := m, k, blas.NoTrans
	if p.TransA {
		ar, ac, tA = k, m, blas.Trans
	}
	br, bc, tB := k, n, blas.NoTrans
	if p.TransB {
		br, bc, tB = n, k, blas.Trans
	}

	alpha := p.Alpha
	if alpha == 0 {
		alpha = 1
	}
	rows := m
	if shared && !p.TransA {
		rows = batch * m
	}
	gemv := p.TransB && !p.TransA && rows <= gemvRows && (batch == 1 || shared)
	av := in32(a)
	var bv []float32 // gemvT widens b a row at a time instead
	if !gemv {
		bv = in32(bt)
	}
	cv, done := out32(out, p.Beta != 0)

	switch {
	case gemv:
		gemvT(cv, av, bt, rows, n, k, alpha, p.Beta)
	case batch == 1 || (shared && !p.TransA):
		// One product: a single batch, or a batch of untransposed a against
		// a shared b, which is one [batch·M, K]·[K, N] product.
		blas32.Gemm(tA, tB, alpha,
			blas32.General{Rows: batch * ar, Cols: ac, Stride: ac, Data: av},
			blas32.General{Rows: br, Cols: bc, Stride: bc, Data: bv},
			p.Beta,
			blas32.General{Rows: batch * m, Cols: n, Stride: n, Data: cv})
	default:
		aStep, bStep, cStep := ar*ac, br*bc, m*n
		if shared {
			bStep = 0
		}
		gemm := func(lo, hi int) {
			for i := lo; i < hi; i++ {
				blas32.Gemm(tA, tB, alpha,
					blas32.General{Rows: ar, Cols: ac, Stride: ac, Data: av[i*aStep : (i+1)*aStep]},
					blas32.General{Rows: br, Cols: bc, Stride: bc, Data: bv[i*bStep : i*bStep+br*bc]},
					p.Beta,
					blas32.General{Rows: m, Cols: n, Stride: n, Data: cv[i*cStep : (i+1)*cStep]})
			}
		}
		if work := m * n * k; work < smallGemm() {
			parallelFor(batch, work, gemm)
		} else {
			gemm(0, batch)
		}
	}

	if p.Bias != nil || p.Act != kernels.ActNone {
		var bias []float32
		if p.Bias != nil {
			bias = in32(p.Bias)[:n]
		}
		parallelFor(batch*m, n*actCost(p.Act), func(lo, hi int) { biasAct(cv[lo*n:hi*n], n, bias, p.Act) })
	}
	done()
	return nil
}

// biasAct is the epilogue of MatMul and Conv2D: it adds bias (n values,
// or nil for none) to each n-wide row of rows and applies act.
func biasAct(rows []float32, n int, bias []float32, act kernels.Activation) {
	if bias == nil && act == kernels.ActNone {
		return
	}
	for r := 0; r+n <= len(rows); r += n {
		row := rows[r : r+n]
		if bias != nil {
			for j := range row {
				row[j] += bias[j]
			}
		}
		if act != kernels.ActNone {
			applyAct(row, row, act)
		}
	}
}
