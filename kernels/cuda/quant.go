//go:build cuda

package cuda

import (
	"fmt"
	"math"

	"github.com/zbench/zbench/kernels"
)

var _ kernels.Quant = (*Backend)(nil)

// Geometry of the Quant kernels (kernels/cuda/quant.cu).
const (
	// qmmTile is the block tile of qmatmul_tc_T and qmatmul_mma_T: 128×128
	// outputs.
	qmmTile       = 128
	qmmTCThreads  = 128
	qmmTCSmem     = 81920 // qmatmul_tc_T: 4 stages of a 128×64 A and B tile, 80-byte rows
	qmmMMAThreads = 256
	qmmMMASmem    = 40960 // qmatmul_mma_T: 2 buffers of the same tiles
	// qmmGEMVRows is the most rows of a that qmatmul_gemv_T takes: one
	// warp per output column, every row's sum in registers.
	qmmGEMVRows    = 8
	qmmGEMVThreads = 256
	// quantThreads is the block of quantize_T and dequantize_T: groups of
	// 32 to 256 threads, one group per row.
	quantThreads = 256
	// qmmMaxDim bounds M, N and K, which the kernels hold in 32-bit
	// integers with room for a tile past the end.
	qmmMaxDim = math.MaxInt32 - qmmTile
	// quantMaxK bounds the row length of quantize_T and dequantize_T,
	// whose 32-bit column index steps by up to 1024 past it.
	quantMaxK = math.MaxInt32 - 1024
)

// qmmPath is the kernel QMatMul runs.
type qmmPath int

const (
	// qmmGEMV is qmatmul_gemv_T: at most qmmGEMVRows rows (decoding),
	// dp4a, one warp per output column.
	qmmGEMV qmmPath = iota
	// qmmTC is qmatmul_tc_T: mma.sync m16n8k32 fed by a cp.async pipeline.
	qmmTC
	// qmmMMA is qmatmul_mma_T: the same tiles through registers, on every
	// target and for every K.
	qmmMMA
)

// String names the path in test messages.
func (p qmmPath) String() string {
	return [...]string{"gemv", "tensor-core", "mma"}[p]
}

// chooseQMatMul picks the kernel for a product of geometry d with a and w
// at those addresses:
//
//   - qmmGEMV for M ≤ qmmGEMVRows, where a 128-row tile would be mostly
//     idle and the product is bound by reading w;
//   - qmmTC from compute capability 8.0 when K is a multiple of 16 and a
//     and w are 16-byte aligned (every row copies as 16-byte chunks);
//   - qmmMMA otherwise: compute capability 7.5, or K not a multiple of
//     16 (the kernel reads rows in 16-byte, 4-byte or 1-byte pieces, as
//     K and the alignment allow).
func (b *Backend) chooseQMatMul(d kernels.QMatMulDims, a, w devptr) qmmPath {
	switch {
	case d.M <= qmmGEMVRows:
		return qmmGEMV
	case b.major >= 8 && d.K%16 == 0 && a%16 == 0 && w%16 == 0:
		return qmmTC
	}
	return qmmMMA
}

// QMatMul sets out = act(a·wᵀ·(AScale·BScale) + Bias) with the sums exact
// in int32 (see kernels.Quant), the epilogue fused into the product. The
// kernel is chooseQMatMul's.
func (b *Backend) QMatMul(out, a, w *kernels.Tensor, p kernels.QMatMulParams) error {
	d, err := kernels.CheckQMatMul("cuda: QMatMul", b, out, a, w, p)
	if err != nil {
		return err
	}
	if d.M > qmmMaxDim || d.N > qmmMaxDim || d.K > qmmMaxDim ||
		int64(ceilDiv(d.M, qmmTile))*int64(ceilDiv(d.N, qmmTile)) > math.MaxInt32 {
		return fmt.Errorf("cuda: QMatMul: a [%d %d] times b [%d %d] is over the 2³¹ the kernels index: %w",
			d.M, d.K, d.N, d.K, kernels.ErrUnsupported)
	}
	return wrap("QMatMul", b.launchQMM(qmmLaunch{
		dt: out.DType(), c: ptrOf(out), a: ptrOf(a), b: ptrOf(w),
		aScale: ptrOf(p.AScale), bScale: ptrOf(p.BScale), bias: ptrOf(p.Bias), outScale: ptrOf(p.OutScale),
		m: d.M, n: d.N, k: d.K, ldc: d.N, aRowScale: d.ARowScale, bRowScale: d.BRowScale, act: p.Act,
	}))
}

// qmmLaunch is one launch of the QMatMul kernels: the first n columns of c
// [m, ldc] (out dtype dt) from a [m, k] times bᵀ, b [n, k], with the
// epilogue's operands (0 for an absent one) and a residual res of c's
// layout, which may be c. QMatMul's own calls have ldc = n and no
// residual; QConv2D's write one group's channels of a slab of pixels.
type qmmLaunch struct {
	dt                                           kernels.DType
	c, a, b, aScale, bScale, bias, outScale, res devptr
	m, n, k, ldc                                 int
	aRowScale, bRowScale                         bool
	act                                          kernels.Activation
}

// launchQMM queues l on the kernel chooseQMatMul picks. The caller has
// checked that m, n, k and ldc are within qmmMaxDim.
func (b *Backend) launchQMM(l qmmLaunch) error {
	d := kernels.QMatMulDims{M: l.m, N: l.n, K: l.k, ARowScale: l.aRowScale, BRowScale: l.bRowScale}
	name := "qmatmul_mma_"
	grid, blk, smem := dim3{x: ceilDiv(d.N, qmmTile), y: ceilDiv(d.M, qmmTile)}, dim3{x: qmmMMAThreads}, qmmMMASmem
	switch b.chooseQMatMul(d, l.a, l.b) {
	case qmmGEMV:
		name, grid, blk, smem = "qmatmul_gemv_", dim3{x: ceilDiv(d.N, qmmGEMVThreads/32)}, dim3{x: qmmGEMVThreads}, 0
	case qmmTC:
		name, blk, smem = "qmatmul_tc_", dim3{x: qmmTCThreads}, qmmTCSmem
	}
	if grid.y > maxGridY {
		return fmt.Errorf("%d rows (M) are over the %d one launch takes: %w", d.M, qmmTile*maxGridY, kernels.ErrUnsupported)
	}
	return b.launch(name+l.dt.String(), grid, blk, smem,
		l.c, l.a, l.b, l.aScale, l.bScale, l.bias, l.outScale, l.res,
		int32(d.M), int32(d.N), int32(d.K), int32(l.ldc), int32(boolInt(d.ARowScale)), int32(boolInt(d.BRowScale)), int32(l.act))
}

// quantLaunch returns the grid and block of quantize_T and dequantize_T
// for rows of k elements: a group of threads per row, a power of two from
// 32 to 256 giving each about 8 elements, and as many rows per block as
// fill 256 threads.
func quantLaunch(rows, k int) (grid, blk dim3) {
	g := 32
	for g < quantThreads && 8*g < k {
		g *= 2
	}
	per := quantThreads / g
	return dim3{x: min(ceilDiv(rows, per), 1<<20)}, dim3{x: g, y: per}
}

// Quantize sets q to x quantized with a static scale or, when dynamic, a
// per-row scale computed in the same kernel (the row's largest magnitude
// over 127).
func (b *Backend) Quantize(q, scale, x *kernels.Tensor, dynamic bool) error {
	g, err := kernels.CheckQuantize("cuda: Quantize", b, q, scale, x, dynamic)
	if err != nil {
		return err
	}
	if g.K > quantMaxK {
		return fmt.Errorf("cuda: Quantize: rows of %d elements are over the 2³¹ the kernel indexes: %w", g.K, kernels.ErrUnsupported)
	}
	grid, blk := quantLaunch(g.Rows, g.K)
	return wrap("Quantize", b.launch("quantize_"+x.DType().String(), grid, blk, 0,
		ptrOf(q), ptrOf(scale), ptrOf(x), int64(g.Rows), int32(g.K), int32(boolInt(g.PerRow)), int32(boolInt(dynamic))))
}

// Dequantize sets out = q·scale, rounded once to out's dtype.
func (b *Backend) Dequantize(out, q, scale *kernels.Tensor) error {
	g, err := kernels.CheckDequantize("cuda: Dequantize", b, out, q, scale)
	if err != nil {
		return err
	}
	if g.K > quantMaxK {
		return fmt.Errorf("cuda: Dequantize: rows of %d elements are over the 2³¹ the kernel indexes: %w", g.K, kernels.ErrUnsupported)
	}
	grid, blk := quantLaunch(g.Rows, g.K)
	return wrap("Dequantize", b.launch("dequantize_"+out.DType().String(), grid, blk, 0,
		ptrOf(out), ptrOf(q), ptrOf(scale), int64(g.Rows), int32(g.K), int32(boolInt(g.PerRow))))
}
