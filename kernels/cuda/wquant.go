//go:build cuda

package cuda

import (
	"fmt"
	"math"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

var _ kernels.WeightQuant = (*Backend)(nil)

// Geometry of the WeightQuant kernels (kernels/cuda/wquant.cu).
const (
	// wgemvRows is the most rows of x that wmatmul_gemvR_FMT_T takes
	// (R = 1, 2, 4 or 8, the fewest that hold M).
	wgemvRows = 8
	// wgemvCols is the columns of out one block of wmatmul_gemvR_FMT_T
	// computes: 4 warps of 2.
	wgemvCols    = 8
	wgemvThreads = 128
	// wmmTCTileM and wmmTCTileN are the block tile of wmatmul_tc_FMT_T.
	wmmTCTileM   = 128
	wmmTCTileN   = 64
	wmmTCThreads = 128
	wmmTCSmem    = 39936 // 3 stages of a 128×32 x tile (80-byte rows) and 64 rows of codes (48-byte rows)
	// wmmSIMTTile is the square block tile of wmatmul_simt_FMT_T.
	wmmSIMTTile    = 64
	wmmSIMTThreads = 256
	// wmmMaxDim bounds M, N and K, which the kernels hold in 32-bit
	// integers with room for a tile past the end.
	wmmMaxDim = math.MaxInt32 - wmmTCTileM
)

// wmmPath is the kernel WMatMul runs.
type wmmPath int

const (
	// wmmGEMV is wmatmul_gemvR_FMT_T: at most wgemvRows rows (decoding),
	// one warp per two columns, bound by reading the weight.
	wmmGEMV wmmPath = iota
	// wmmTC is wmatmul_tc_FMT_T: mma.sync m16n8k16 on F16 or BF16 x, the
	// codes unpacked into the B fragments.
	wmmTC
	// wmmSIMT is wmatmul_simt_FMT_T: tiles of the weight dequantized to
	// float32 in shared memory, any dtype, K and alignment.
	wmmSIMT
)

// String names the path in test messages.
func (p wmmPath) String() string {
	return [...]string{"gemv", "tensor-core", "simt"}[p]
}

// chooseWMatMul picks the kernel for a product of geometry d with x of
// dtype dt and the weight's codes at those addresses:
//
//   - wmmGEMV for M ≤ wgemvRows, where a tile of many rows would be mostly
//     idle and the product is bound by reading the weight;
//   - wmmTC from compute capability 8.0 for F16 and BF16 x when K is a
//     multiple of 16 (always so for the 4-bit formats) and x and the codes
//     are 16-byte aligned (every row copies as 16-byte chunks);
//   - wmmSIMT otherwise: F32 x (summed in float32 exactly as specified,
//     no TF32), compute capability 7.5, other K or alignments.
func (b *Backend) chooseWMatMul(d check.WMatMulDims, dt kernels.DType, x, w devptr) wmmPath {
	switch {
	case d.M <= wgemvRows:
		return wmmGEMV
	case b.major >= 8 && dt != kernels.F32 && d.K%16 == 0 && x%16 == 0 && w%16 == 0:
		return wmmTC
	}
	return wmmSIMT
}

// gemvVariant is R of the wmatmul_gemvR kernel for m ≤ wgemvRows rows:
// the fewest of 1, 2, 4 and 8 that hold them.
func gemvVariant(m int) int {
	r := 1
	for r < m {
		r *= 2
	}
	return r
}

// WMatMul sets out = x·Wᵀ + bias with W dequantized on the fly from its
// int8 or 4-bit codes (see kernels.WeightQuant), summed in float32 and
// rounded once to out's dtype. The kernel is chooseWMatMul's.
func (b *Backend) WMatMul(out, x *kernels.Tensor, w kernels.QWeight, bias *kernels.Tensor) error {
	d, err := check.WMatMul("cuda: WMatMul", b, out, x, w, bias)
	if err != nil {
		return err
	}
	if w.Format == kernels.WInt8 && w.Group > 0 {
		return fmt.Errorf("cuda: WMatMul: int8 weights in groups of %d (GGUF's Q8_0 blocks): the CUDA kernels take one scale per row: %w",
			w.Group, kernels.ErrUnsupported)
	}
	if d.M > wmmMaxDim || d.N > wmmMaxDim || d.K > wmmMaxDim {
		return fmt.Errorf("cuda: WMatMul: x [%d %d] times w [%d %d] is over the 2³¹ the kernels index: %w",
			d.M, d.K, d.N, d.K, kernels.ErrUnsupported)
	}
	dt := x.DType()
	px, pw := ptrOf(x), ptrOf(w.Data)
	group := 0 // not read for int8
	if w.Format != kernels.WInt8 {
		group = w.Group
	}
	suffix := w.Format.String() + "_" + dt.String()
	var (
		name      string
		grid, blk dim3
		smem      int
		tileM     = 1 // rows of x per block row of the grid
	)
	switch b.chooseWMatMul(d, dt, px, pw) {
	case wmmGEMV:
		name = fmt.Sprintf("wmatmul_gemv%d_%s", gemvVariant(d.M), suffix)
		grid, blk = dim3{x: ceilDiv(d.N, wgemvCols)}, dim3{x: wgemvThreads}
	case wmmTC:
		name, blk, smem, tileM = "wmatmul_tc_"+suffix, dim3{x: wmmTCThreads}, wmmTCSmem, wmmTCTileM
		grid = dim3{x: ceilDiv(d.N, wmmTCTileN), y: ceilDiv(d.M, wmmTCTileM)}
	default:
		name, blk, tileM = "wmatmul_simt_"+suffix, dim3{x: wmmSIMTThreads}, wmmSIMTTile
		grid = dim3{x: ceilDiv(d.N, wmmSIMTTile), y: ceilDiv(d.M, wmmSIMTTile)}
	}
	// The tensor-core kernel numbers its blocks in 32 bits.
	if grid.y > maxGridY || int64(grid.x)*int64(max(grid.y, 1)) > math.MaxInt32 {
		return fmt.Errorf("cuda: WMatMul: x [%d %d] times w [%d %d] is over the %d rows and 2³¹ blocks one launch takes: %w",
			d.M, d.K, d.N, d.K, tileM*maxGridY, kernels.ErrUnsupported)
	}
	return wrap("WMatMul", b.launch(name, grid, blk, smem,
		ptrOf(out), px, pw, ptrOf(w.Scales), ptrOf(bias), int32(d.M), int32(d.N), int32(d.K), int32(group)))
}
