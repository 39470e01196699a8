//go:build cuda

package cuda

import (
	"fmt"
	"math"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
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

// Geometry of qmatmul_sm90_T (kernels/cuda/qmatmul_sm90.cu): a CTA of three
// warpgroups computes a 128×256 tile of out in steps of 128 along K
// through a 4-stage shared-memory ring, rows of 128 bytes as in
// matmul_sm90_bf16.
const (
	qmmSM90TileM   = 128
	qmmSM90TileN   = 256
	qmmSM90TileK   = 128
	qmmSM90Threads = 384
	qmmSM90Stages  = 4
	// qmmSM90Smem is the dynamic shared memory: 1024 bytes of alignment
	// slack, the stages (A 128×128 and B 256×128 int8 values each) and
	// two 8-byte mbarriers per stage.
	qmmSM90Smem = 1024 + qmmSM90Stages*(qmmSM90TileM+qmmSM90TileN)*qmmSM90TileK + 16*qmmSM90Stages
	// qmmSM90MinM, qmmSM90MinN and qmmSM90MinK are the smallest products
	// chooseQMatMul gives the Hopper kernel: one whole tile, and at least
	// one whole stage of K.
	qmmSM90MinM = qmmSM90TileM
	qmmSM90MinN = qmmSM90TileN
	qmmSM90MinK = qmmSM90TileK
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
	// qmmSM90 is qmatmul_sm90_T: wgmma m64n256k32 fed by TMA, on
	// compute capability 9.0 (the kernels exist only in the sm_90a image).
	qmmSM90
)

// String names the path in test messages.
func (p qmmPath) String() string {
	return [...]string{"gemv", "tensor-core", "mma", "hopper"}[p]
}

// chooseQMatMul picks the kernel for a product of geometry d with a and w
// at those addresses:
//
//   - qmmGEMV for M ≤ qmmGEMVRows, where a 128-row tile would be mostly
//     idle and the product is bound by reading w;
//   - qmmSM90 on compute capability 9.0 for at least a whole 128×256
//     tile and 128 of K (M ≥ 128, N ≥ 256, K ≥ 128), K a multiple of 16
//     and a and w 16-byte aligned (TMA's row strides and base
//     addresses), M and N at most sm90MaxDim and at most 2³¹−1 tiles;
//   - qmmTC from compute capability 8.0 when K is a multiple of 16 and a
//     and w are 16-byte aligned (every row copies as 16-byte chunks);
//   - qmmMMA otherwise: compute capability 7.5, or K not a multiple of
//     16 (the kernel reads rows in 16-byte, 4-byte or 1-byte pieces, as
//     K and the alignment allow).
func (b *Backend) chooseQMatMul(d check.QMatMulDims, a, w devptr) qmmPath {
	aligned := d.K%16 == 0 && a%16 == 0 && w%16 == 0
	switch {
	case d.M <= qmmGEMVRows:
		return qmmGEMV
	case b.major == 9 && b.minor == 0 && aligned &&
		d.M >= qmmSM90MinM && d.N >= qmmSM90MinN && d.K >= qmmSM90MinK &&
		d.M <= sm90MaxDim && d.N <= sm90MaxDim &&
		int64(ceilDiv(d.M, qmmSM90TileM))*int64(ceilDiv(d.N, qmmSM90TileN)) <= math.MaxInt32:
		return qmmSM90
	case b.major >= 8 && aligned:
		return qmmTC
	}
	return qmmMMA
}

// QMatMul sets out = act(a·wᵀ·(AScale·BScale) + Bias) with the sums exact
// in int32 (see kernels.Quant), the epilogue fused into the product. The
// kernel is chooseQMatMul's.
func (b *Backend) QMatMul(out, a, w *kernels.Tensor, p kernels.QMatMulParams) error {
	d, err := check.QMatMul("cuda: QMatMul", b, out, a, w, p)
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
	return b.launchQMMPath(l, b.chooseQMatMul(check.QMatMulDims{M: l.m, N: l.n, K: l.k}, l.a, l.b))
}

// launchQMMPath queues l on the kernel of path, whose preconditions
// (chooseQMatMul's) l meets.
func (b *Backend) launchQMMPath(l qmmLaunch, path qmmPath) error {
	d := check.QMatMulDims{M: l.m, N: l.n, K: l.k, ARowScale: l.aRowScale, BRowScale: l.bRowScale}
	if ceilDiv(d.M, qmmTile) > maxGridY {
		return fmt.Errorf("%d rows (M) are over the %d one launch takes: %w", d.M, qmmTile*maxGridY, kernels.ErrUnsupported)
	}
	name := "qmatmul_mma_"
	grid, blk, smem := dim3{x: ceilDiv(d.N, qmmTile), y: ceilDiv(d.M, qmmTile)}, dim3{x: qmmMMAThreads}, qmmMMASmem
	var opA, opB any = l.a, l.b // the operands: addresses, or the Hopper kernel's tensor maps
	switch path {
	case qmmGEMV:
		name, grid, blk, smem = "qmatmul_gemv_", dim3{x: ceilDiv(d.N, qmmGEMVThreads/32)}, dim3{x: qmmGEMVThreads}, 0
	case qmmTC:
		name, blk, smem = "qmatmul_tc_", dim3{x: qmmTCThreads}, qmmTCSmem
	case qmmSM90:
		tmA, tmB, err := b.qmmSM90Maps(l)
		if err != nil {
			return err
		}
		name, opA, opB = "qmatmul_sm90_", tmA, tmB
		grid, blk, smem = dim3{x: ceilDiv(d.M, qmmSM90TileM) * ceilDiv(d.N, qmmSM90TileN)}, dim3{x: qmmSM90Threads}, qmmSM90Smem
	}
	return b.launch(name+l.dt.String(), grid, blk, smem,
		l.c, opA, opB, l.aScale, l.bScale, l.bias, l.outScale, l.res,
		int32(d.M), int32(d.N), int32(d.K), int32(l.ldc), int32(boolInt(d.ARowScale)), int32(boolInt(d.BRowScale)), int32(l.act))
}

// tensorMapSpec is the arguments of one encodeTensorMap call.
type tensorMapSpec struct {
	base          devptr
	dims, strides []uint64
	box           []uint32
}

// qmmSM90Specs returns the tensor maps of qmatmul_sm90_T for l: a [m, k]
// and b [n, k] as 2-D byte tensors, K innermost, read in boxes of 128
// bytes of K by 128 rows of a and 256 rows of b, with the 128-byte swizzle
// (kernels/cuda/qmatmul_sm90.cu).
func qmmSM90Specs(l qmmLaunch) (a, b tensorMapSpec) {
	return byteSpecs(l, qmmSM90TileK, qmmSM90TileM, qmmSM90TileN)
}

// byteSpecs returns the tensor maps of l's a [m, k] and b [n, k] as 2-D
// byte tensors, K innermost, read in boxes of tileK bytes of K by tileM
// rows of a and tileN rows of b.
func byteSpecs(l qmmLaunch, tileK, tileM, tileN uint32) (a, b tensorMapSpec) {
	k := uint64(l.k)
	a = tensorMapSpec{l.a, []uint64{k, uint64(l.m)}, []uint64{k}, []uint32{tileK, tileM}}
	b = tensorMapSpec{l.b, []uint64{k, uint64(l.n)}, []uint64{k}, []uint32{tileK, tileN}}
	return a, b
}

// qmmSM90Maps encodes qmmSM90Specs's tensor maps for l.
func (b *Backend) qmmSM90Maps(l qmmLaunch) (tmA, tmB tensorMap, err error) {
	return b.byteMaps(qmmSM90Specs(l))
}

// byteMaps encodes the tensor maps of two byte matrices (int8 or FP8
// codes) with the 128-byte swizzle.
func (b *Backend) byteMaps(sa, sb tensorMapSpec) (tmA, tmB tensorMap, err error) {
	var errA, errB error
	err = b.call("cuTensorMapEncodeTiled", func() {
		tmA, errA = encodeTensorMap(sa.base, kernels.I8, sa.dims, sa.strides, sa.box, true)
		tmB, errB = encodeTensorMap(sb.base, kernels.I8, sb.dims, sb.strides, sb.box, true)
	})
	switch {
	case err != nil:
		return tmA, tmB, err
	case errA != nil:
		return tmA, tmB, errA
	}
	return tmA, tmB, errB
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
	g, err := check.Quantize("cuda: Quantize", b, q, scale, x, dynamic)
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
	g, err := check.Dequantize("cuda: Dequantize", b, out, q, scale)
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
