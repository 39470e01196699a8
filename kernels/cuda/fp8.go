//go:build cuda

package cuda

import (
	"fmt"
	"math"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

var _ kernels.FP8 = (*Backend)(nil)

// Geometry of the FP8 kernels (kernels/cuda/fp8.cu).
const (
	// fp8CastThreads is the block of castfp8_T and castfp8_rows_T.
	fp8CastThreads = 256
	// fp8CastMaxBlocks bounds the grid of both casts, which are
	// grid-stride loops.
	fp8CastMaxBlocks = 1 << 20
	// fp8mmTile is the block tile of fp8mm_A_B_T: 64×64 outputs.
	fp8mmTile    = 64
	fp8mmThreads = 128
	// fp8MaxDim bounds M, N and K (and a row's length in the row cast),
	// which the kernels hold in 32-bit integers with room for a tile past
	// the end.
	fp8MaxDim = math.MaxInt32 - 1024

	// fp8SM90TileM, fp8SM90TileN and fp8SM90TileK are the tile of
	// fp8mm_sm90_A_B_T (K in bytes), fp8SM90Stages its ring's depth, and
	// fp8SM90Smem its dynamic shared memory: 1024 bytes of alignment, the
	// stages, two mbarriers per stage.
	fp8SM90TileM  = 128
	fp8SM90TileN  = 128
	fp8SM90TileK  = 128
	fp8SM90Stages = 6
	fp8SM90Smem   = 1024 + fp8SM90Stages*(fp8SM90TileM+fp8SM90TileN)*fp8SM90TileK + 16*fp8SM90Stages
)

// fp8Capable returns nil on a device whose kernel image holds the FP8
// kernels, and otherwise an error wrapping kernels.ErrUnsupported. FP8
// (cvt.satfinite to e4m3x2/e5m2x2, mma.sync with e4m3/e5m2 operands) needs
// compute capability 8.9 or 9.0: Hopper loads the sm_90a cubin, Ada the
// compute_89 PTX of fp8.cu (in place of its compute_80 image, whose FP8
// kernels are __trap() stubs).
func (b *Backend) fp8Capable(op string) error {
	switch {
	case b.major == 9 && b.minor == 0:
		return nil
	case b.major == 8 && b.minor == 9:
		if b.preferred == "compute_89" && hasImage("fp8", b.preferred) {
			return nil
		}
		return fmt.Errorf("cuda: %s: FP8 on compute capability 8.9 needs fp8.cu's compute_89 kernel image, which ptx/ lacks (run make kernels): %w",
			op, kernels.ErrUnsupported)
	}
	return fmt.Errorf("cuda: %s: FP8 needs compute capability 8.9 or 9.0; this device is %d.%d: %w",
		op, b.major, b.minor, kernels.ErrUnsupported)
}

// FP8Supported is nil on a device that runs the FP8 kernels (see
// fp8Capable).
func (b *Backend) FP8Supported() error { return b.fp8Capable("FP8") }

// fp8IsE5M2 is the kernels' e5m2 argument for an FP8 dtype.
func fp8IsE5M2(dt kernels.DType) int32 { return int32(boolInt(dt == kernels.E5M2)) }

// CastFP8 sets q = satfinite(round(x·scale)) and, when amax is not nil,
// amax = max |x| (see kernels.FP8), in one kernel: amax is zeroed first and
// every block merges its maximum into it.
func (b *Backend) CastFP8(q, amax, x, scale *kernels.Tensor) error {
	if err := check.CastFP8("cuda: CastFP8", b, q, amax, x, scale); err != nil {
		return err
	}
	if err := b.fp8Capable("CastFP8"); err != nil {
		return err
	}
	n := x.Len()
	if amax != nil {
		if err := b.memsetZero(ptrOf(amax), 4); err != nil {
			return wrap("CastFP8", err)
		}
	}
	if n == 0 {
		return nil
	}
	grid := dim3{x: min(ceilDiv(n, fp8CastThreads), fp8CastMaxBlocks)}
	return wrap("CastFP8", b.launch("castfp8_"+x.DType().String(), grid, dim3{x: fp8CastThreads}, 0,
		ptrOf(q), ptrOf(amax), ptrOf(x), ptrOf(scale), int64(n), fp8IsE5M2(q.DType())))
}

// CastFP8Rows casts each row of x with its own current scale (see
// kernels.FP8): one block per row.
func (b *Backend) CastFP8Rows(q, scaleInv, x *kernels.Tensor) error {
	if err := check.CastFP8Rows("cuda: CastFP8Rows", b, q, scaleInv, x); err != nil {
		return err
	}
	if err := b.fp8Capable("CastFP8Rows"); err != nil {
		return err
	}
	rows, k := x.Shape().Rows(), x.Shape().Last()
	if k > fp8MaxDim {
		return fmt.Errorf("cuda: CastFP8Rows: rows of %d elements are over the 2³¹ the kernel indexes: %w", k, kernels.ErrUnsupported)
	}
	if rows == 0 {
		return nil
	}
	return wrap("CastFP8Rows", b.launch("castfp8_rows_"+x.DType().String(), dim3{x: min(rows, fp8CastMaxBlocks)},
		dim3{x: fp8CastThreads}, 0, ptrOf(q), ptrOf(scaleInv), ptrOf(x), int64(rows), int32(k), fp8IsE5M2(q.DType())))
}

// fp8SM90Specs are the tensor maps of fp8mm_sm90_A_B_T: a [M, K] and
// b [N, K] of bytes, boxes of 128 rows of 128 bytes.
func fp8SM90Specs(l qmmLaunch) (a, b tensorMapSpec) {
	return byteSpecs(l, fp8SM90TileK, fp8SM90TileM, fp8SM90TileN)
}

// fp8mmKernel names the FP8MatMul kernel for a's and b's formats and the
// out dtype: fp8mm_e4m3_e4m3_f32, fp8mm_e4m3_e5m2_bf16, ...
func fp8mmKernel(a, b, out kernels.DType) string {
	return "fp8mm_" + a.String() + "_" + b.String() + "_" + out.String()
}

// fp8mmPath is the kernel FP8MatMul runs.
type fp8mmPath int

const (
	// fp8mmMMA is fp8mm_A_B_T: mma.sync m16n8k32, on every FP8 device and
	// for every shape.
	fp8mmMMA fp8mmPath = iota
	// fp8mmSM90 is fp8mm_sm90_A_B_T: wgmma m64n128k32 fed by TMA, its
	// sums promoted to float32 registers every 128 of K, on compute
	// capability 9.0 (the kernels exist only in the sm_90a image), with
	// qmatmul_sm90_T's pipeline and a 128×128 tile.
	fp8mmSM90
)

// String names the path in test messages.
func (p fp8mmPath) String() string { return [...]string{"mma", "hopper"}[p] }

// fp8mmSM90Kernel names the Hopper FP8MatMul kernel: fp8mm_sm90_e4m3_e4m3_f32, ...
func fp8mmSM90Kernel(a, b, out kernels.DType) string {
	return "fp8mm_sm90_" + a.String() + "_" + b.String() + "_" + out.String()
}

// chooseFP8MatMul picks the kernel for a product of geometry d with a and w
// at those addresses, as chooseQMatMul does: fp8mmSM90 on compute
// capability 9.0 for at least a whole 128×128 tile and 128 of K (M ≥ 128,
// N ≥ 128, K ≥ 128), K a multiple of 16 and a and w 16-byte aligned
// (TMA's row strides and base addresses), M and N at most sm90MaxDim and
// at most 2³¹−1 tiles; fp8mmMMA otherwise.
func (b *Backend) chooseFP8MatMul(d check.FP8Dims, a, w devptr) fp8mmPath {
	if b.major == 9 && b.minor == 0 && d.K%16 == 0 && a%16 == 0 && w%16 == 0 &&
		d.M >= fp8SM90TileM && d.N >= fp8SM90TileN && d.K >= fp8SM90TileK &&
		d.M <= sm90MaxDim && d.N <= sm90MaxDim &&
		int64(ceilDiv(d.M, fp8SM90TileM))*int64(ceilDiv(d.N, fp8SM90TileN)) <= math.MaxInt32 {
		return fp8mmSM90
	}
	return fp8mmMMA
}

// FP8MatMul sets out = act(Σ decode(a)·decode(b) · aScaleInv·bScaleInv +
// bias) (see kernels.FP8) with float32 accumulation, the epilogue fused:
// by chooseFP8MatMul's kernel, fp8mm_sm90_A_B_T (wgmma) on Hopper for
// large products, else fp8mm_A_B_T (mma.sync m16n8k32 with e4m3 and e5m2
// operands).
func (b *Backend) FP8MatMul(out, a, w *kernels.Tensor, p kernels.FP8MatMulParams) error {
	d, err := check.FP8MatMul("cuda: FP8MatMul", b, out, a, w, p)
	if err != nil {
		return err
	}
	if err := b.fp8Capable("FP8MatMul"); err != nil {
		return err
	}
	if d.M > fp8MaxDim || d.N > fp8MaxDim || d.K > fp8MaxDim {
		return fmt.Errorf("cuda: FP8MatMul: a [%d %d] times b [%d %d] is over the 2³¹ the kernels index: %w",
			d.M, d.K, d.N, d.K, kernels.ErrUnsupported)
	}
	return b.launchFP8MM(out, a, w, p, d, b.chooseFP8MatMul(d, ptrOf(a), ptrOf(w)))
}

// launchFP8MM queues FP8MatMul on the kernel of path, whose preconditions
// (chooseFP8MatMul's) the product meets; the caller has checked the
// arguments.
func (b *Backend) launchFP8MM(out, a, w *kernels.Tensor, p kernels.FP8MatMulParams, d check.FP8Dims, path fp8mmPath) error {
	if path == fp8mmMMA && ceilDiv(d.M, fp8mmTile) > maxGridY {
		return fmt.Errorf("cuda: FP8MatMul: %d rows (M) are over the %d one launch takes: %w", d.M, fp8mmTile*maxGridY, kernels.ErrUnsupported)
	}
	if d.M == 0 || d.N == 0 {
		return nil
	}
	tail := []any{ptrOf(p.AScaleInv), ptrOf(p.BScaleInv), ptrOf(p.Bias),
		int32(d.M), int32(d.N), int32(d.K), int32(boolInt(p.AScaleInv.Len() > 1)), int32(boolInt(p.BScaleInv.Len() > 1)), int32(p.Act)}
	if path == fp8mmSM90 {
		tmA, tmB, err := b.byteMaps(fp8SM90Specs(qmmLaunch{a: ptrOf(a), b: ptrOf(w), m: d.M, n: d.N, k: d.K}))
		if err != nil {
			return wrap("FP8MatMul", err)
		}
		grid := dim3{x: ceilDiv(d.M, fp8SM90TileM) * ceilDiv(d.N, fp8SM90TileN)}
		return wrap("FP8MatMul", b.launch(fp8mmSM90Kernel(a.DType(), w.DType(), out.DType()), grid, dim3{x: qmmSM90Threads},
			fp8SM90Smem, append([]any{ptrOf(out), tmA, tmB}, tail...)...))
	}
	grid := dim3{x: ceilDiv(d.N, fp8mmTile), y: ceilDiv(d.M, fp8mmTile)}
	return wrap("FP8MatMul", b.launch(fp8mmKernel(a.DType(), w.DType(), out.DType()), grid, dim3{x: fp8mmThreads}, 0,
		append([]any{ptrOf(out), ptrOf(a), ptrOf(w)}, tail...)...))
}
