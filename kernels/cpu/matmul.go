package cpu

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

// smallGemm is the work (M·N·K) under which the products of a batch are
// split across goroutines, each product on one (serialSgemm); larger
// products are multiplied one after another, each by the engine on every
// core. The limit is about where our SGEMM would split a product over 2×2
// blocks of 64×64 outputs.
const smallGemm = 1 << 21

// MatMulShared runs MatMul with TransB for each weight in turn.
func (b *Backend) MatMulShared(outs []*kernels.Tensor, a *kernels.Tensor, bs []*kernels.Tensor) error {
	if _, err := check.MatMulShared("cpu: MatMulShared", b, outs, a, bs); err != nil {
		return err
	}
	for i := range bs {
		if err := b.MatMul(outs[i], a, bs[i], kernels.MatMulParams{TransB: true}); err != nil {
			return err
		}
	}
	return nil
}

// MatMul sets out = act(alpha·op(a)·op(b) + beta·out + bias) through blas32.
// a is [batch…, M, K] ([batch…, K, M] with TransA), b has the same batch
// dimensions or none (shared by every batch), out is [batch…, M, N] and bias
// [N]. BF16 runs in the engine's bfloat16 GEMM where it has one (float32
// accumulation); otherwise F16 and BF16 are multiplied in float32: a
// linear layer's transposed weight a block of rows at a time
// (blockedGemmT), other operands widened whole. Both are rounded on
// store.
func (b *Backend) MatMul(out, a, bt *kernels.Tensor, p kernels.MatMulParams) error {
	g, err := check.MatMul("cpu: matmul", b, out, a, bt, p)
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
	cv, done := out32(out, p.Beta != 0)
	// prod multiplies the products [lo, hi) of the batch, each M×K by K×N
	// (the whole when fused), from element aOff·i of a, bOff·i of b and
	// cOff·i of out: bfloat16 in the engine's own GEMM where it has one,
	// else float32 in the engine's SGEMM.
	bg := b.bf16
	bf := a.DType() == kernels.BF16 && bg != nil && !gemv
	// blocked: a 16-bit weight that the engine cannot multiply as stored,
	// in one product.
	blocked := !gemv && !bf && bt.DType().Size() == 2 && p.TransB && !p.TransA && (batch == 1 || shared)
	var a32, b32 []float32
	if !bf && !gemv && !blocked {
		a32, b32 = in32(a), in32(bt)
	}
	prod := func(m, aOff, bOff, cOff, lo, hi int) {
		for i := lo; i < hi; i++ {
			if bf {
				bg.Bf16gemm(tA, tB, m, n, k, alpha, u16(a)[i*aOff:], ac, u16(bt)[i*bOff:], bc, p.Beta, cv[i*cOff:], n)
			} else {
				blas32.Implementation().Sgemm(tA, tB, m, n, k, alpha, a32[i*aOff:], ac, b32[i*bOff:], bc, p.Beta, cv[i*cOff:], n)
			}
		}
	}

	switch {
	case gemv:
		// gemvT widens b as it reads it.
		gemvT(cv, a, bt, rows, n, k, alpha, p.Beta)
	case blocked:
		if pb := packedOf(bt, 1, sgemmKC); pb != nil { // widened once by PackLinear
			sgemmPackedB(sgemmMicro, rows, n, k, alpha, in32(a), k, pb, p.Beta, cv, n)
			break
		}
		dt, w := bt.DType(), u16(bt)
		blockedGemmT(cv, in32(a), rows, n, k, alpha, p.Beta, widenedRows(k, func(dst []float32, r int) { widen16(dt, dst, w[r*k:(r+1)*k]) }))
	case batch == 1 || (shared && !p.TransA):
		// One product: a single batch, or a batch of untransposed a against
		// a shared b, which is one [batch·M, K]·[K, N] product; against a
		// linear layer's weight packed by PackLinear, on its panels.
		if pb := packedOf(bt, 1, sgemmKC); pb != nil && p.TransB && !p.TransA && !bf {
			sgemmPackedB(sgemmMicro, batch*m, n, k, alpha, a32, ac, pb, p.Beta, cv, n)
			break
		}
		if g, ok := bg.(bf16Gemm); ok && bf && p.TransB && !p.TransA {
			if f := pairsOf(bt); f != nil {
				g.packedBf16gemm(batch*m, n, k, alpha, u16(a), ac, f, p.Beta, cv, n)
				break
			}
		}
		prod(batch*m, 0, 0, 0, 0, 1)
	default:
		aStep, bStep, cStep := ar*ac, br*bc, m*n
		if shared {
			bStep = 0
		}
		if work := m * n * k; work < smallGemm && !bf {
			parallelFor(batch, work, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					serialSgemm(tA, tB, m, n, k, alpha, a32[i*aStep:], ac, b32[i*bStep:], bc, p.Beta, cv[i*cStep:], n)
				}
			})
		} else {
			prod(m, aStep, bStep, cStep, 0, batch)
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
			addRow(row, row, bias)
		}
		if act != kernels.ActNone {
			applyAct(row, row, act)
		}
	}
}
