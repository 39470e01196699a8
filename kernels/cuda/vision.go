//go:build cuda

package cuda

import (
	"fmt"
	"math"

	"github.com/mumax/3/cuda/cu"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

var _ kernels.Vision = (*Backend)(nil)

// convPath is the way Conv2D computes a call.
type convPath int

const (
	// convGEMM is MatMul over the NHWC data: [N·H·W, Ci]·wᵀ with w viewed
	// as [Co, Ci], for 1×1 stride-1 unpadded ungrouped convolutions.
	convGEMM convPath = iota
	// convTC is the implicit GEMM on tensor cores (conv_tc_T, or
	// conv_tc_n64_T when a group has at most 64 output channels).
	convTC
	// convSIMT is the tiled SIMT implicit GEMM (conv_simt_T).
	convSIMT
	// convDirect is one thread per output element (conv_direct_T).
	convDirect
)

// String names the path in test messages.
func (p convPath) String() string {
	return [...]string{"gemm", "tensor-core", "simt", "direct"}[p]
}

// Geometry of the convolution kernels (kernels/cuda/conv.cu).
const (
	convTCTileM     = 128
	convTCThreads   = 128
	convTCSmem      = 81920 // conv_tc_T: 4 stages of a 128-row A and a 128-row B tile, 80-byte rows
	convTCSmemN64   = 61440 // conv_tc_n64_T: the B tile has 64 rows
	convSIMTTile    = 64    // conv_simt_T: 64×64 block tiles
	convSIMTThreads = 256
	// convMinGroupOut is the fewest output channels per group that the
	// GEMM kernels (tensor-core and tiled SIMT) take: below it most of
	// their 64- or 128-channel tile would be idle, and conv_direct_T
	// does the work.
	convMinGroupOut = 16
)

// choosePath picks how to compute a convolution of geometry g in dtype dt
// on this device, x and w being the input and filter addresses:
//
//   - convGEMM for ConvDims.PointwiseGEMM when MatMul takes M rows;
//   - convTC from compute capability 8.0 for F16 and BF16, and F32 with
//     tf32, when each group has Ci/G a multiple of 16 bytes of elements
//     (8, or 4 for F32: the tensor-core loads copy 16-byte chunks of one
//     pixel's channels), at least convMinGroupOut output channels, and x
//     and w are 16-byte aligned;
//   - convSIMT when each group has at least convMinGroupOut output channels
//     (F32 without TF32, compute capability 7.5, channel counts the
//     tensor cores cannot load);
//   - convDirect otherwise: depthwise and other convolutions with few
//     output channels per group, more than 65535 groups (the GEMM kernels
//     put the group in the grid's z).
func (b *Backend) choosePath(g kernels.ConvDims, dt kernels.DType, tf32 bool, x, w devptr) convPath {
	if g.PointwiseGEMM() && (g.M()+127)/128 <= maxGridY {
		return convGEMM
	}
	cg, cog := g.Ci/g.Groups, g.Co/g.Groups
	if cog < convMinGroupOut || g.Groups > maxGridZ {
		return convDirect
	}
	if b.major >= 8 && (dt != kernels.F32 || tf32) && x%16 == 0 && w%16 == 0 && cg%(16/dt.Size()) == 0 {
		return convTC
	}
	return convSIMT
}

// Conv2D sets out = act(conv(x, w) + bias + residual) on NHWC images (see
// kernels.Vision). The path is choosePath's:
//
//   - 1×1 stride-1 unpadded ungrouped convolutions are MatMul(out, x, w,
//     TransB) on the [N·H·W, Ci], [Co, Ci] and [N·H·W, Co] views, with the
//     bias and activation in MatMul's epilogue and the residual there too,
//     as beta·out with beta = 1: a residual that is not out itself is first
//     copied into out (a device-to-device copy queued on the stream), so
//     that the sum is still rounded once;
//   - the others are implicit GEMMs on tensor cores or SIMT, or the direct
//     kernel, each with the bias, residual and activation fused into its
//     epilogue.
func (b *Backend) Conv2D(out, x, w *kernels.Tensor, p kernels.ConvParams) error {
	g, err := check.Conv2D("cuda: Conv2D", b, out, x, w, p)
	if err != nil {
		return err
	}
	if err := convFits(g); err != nil {
		return fmt.Errorf("cuda: Conv2D: %w", err)
	}
	dt := x.DType()
	path := b.choosePath(g, dt, p.TF32, ptrOf(x), ptrOf(w))
	cog := g.Co / g.Groups
	var (
		name      string
		grid, blk dim3
		smem      int
	)
	switch path {
	case convGEMM:
		return wrap("Conv2D", b.convGEMM(out, x, w, g, p))
	case convTC:
		name, smem = "conv_tc_"+dt.String(), convTCSmem
		bn := 128
		if cog <= 64 {
			name, smem, bn = "conv_tc_n64_"+dt.String(), convTCSmemN64, 64
		}
		grid, blk = dim3{x: ceilDiv(g.M(), convTCTileM) * ceilDiv(cog, bn), z: g.Groups}, dim3{x: convTCThreads}
	case convSIMT:
		name = "conv_simt_" + dt.String()
		grid, blk = dim3{x: ceilDiv(g.M(), convSIMTTile) * ceilDiv(cog, convSIMTTile), z: g.Groups}, dim3{x: convSIMTThreads}
	default:
		name = "conv_direct_" + dt.String()
		grid, blk = b.gridFor(int64(g.M())*int64(g.Co)), dim3{x: block}
	}
	return wrap("Conv2D", b.launch(name, grid, blk, smem,
		ptrOf(out), ptrOf(x), ptrOf(w), ptrOf(p.Bias), ptrOf(p.Residual),
		int32(g.N), int32(g.H), int32(g.W), int32(g.Ci), int32(g.Co), int32(g.Ho), int32(g.Wo), int32(g.Kh), int32(g.Kw),
		int32(g.Stride[0]), int32(g.Stride[1]), int32(g.Pad[0]), int32(g.Pad[1]), int32(g.Dilation[0]), int32(g.Dilation[1]),
		int32(g.Groups), int32(p.Act)))
}

// convGEMM runs a pointwise convolution as MatMul, the residual as beta·out
// (see Conv2D).
func (b *Backend) convGEMM(out, x, w *kernels.Tensor, g kernels.ConvDims, p kernels.ConvParams) error {
	m := g.M()
	xm, err := x.Reshape(m, g.Ci)
	if err != nil {
		return err
	}
	wm, err := w.Reshape(g.Co, g.Ci)
	if err != nil {
		return err
	}
	om, err := out.Reshape(m, g.Co)
	if err != nil {
		return err
	}
	mp := kernels.MatMulParams{TransB: true, Bias: p.Bias, Act: p.Act, TF32: p.TF32}
	if r := p.Residual; r != nil {
		if src, dst := ptrOf(r), ptrOf(out); src != dst {
			if err := b.call("cuMemcpyDtoDAsync of the residual", func() {
				cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), out.Bytes(), b.stream)
			}); err != nil {
				return err
			}
		}
		mp.Beta = 1
	}
	return b.MatMul(om, xm, wm, mp)
}

// int32Limit bounds the sizes the kernels hold in 32-bit integers, with
// room for a tile past the end.
const int32Limit = math.MaxInt32 - convTCTileM

// convFits reports, as an error wrapping kernels.ErrUnsupported, a
// convolution whose sizes the kernels' 32-bit integers cannot hold: the
// output pixels M, K, the padded image, every dimension, and the blocks of
// a launch. Element offsets are 64-bit and need no bound.
func convFits(g kernels.ConvDims) error {
	if int64(g.N)*int64(g.Ho)*int64(g.Wo) > int32Limit || int64(g.Kh)*int64(g.Kw)*int64(g.Ci) > int32Limit ||
		int64(g.H)+2*int64(g.Pad[0]) > int32Limit || int64(g.W)+2*int64(g.Pad[1]) > int32Limit ||
		int64(g.Co) > int32Limit || max(g.Stride[0], g.Stride[1], g.Dilation[0], g.Dilation[1]) > int32Limit ||
		int64(ceilDiv(g.M(), convSIMTTile))*int64(ceilDiv(g.Co/g.Groups, convSIMTTile)) > math.MaxInt32 {
		return fmt.Errorf("%d output pixels of %d channels, a %d×%d window of %d channels (stride %v, dilation %v) and a %d×%d image padded by %v are over the 2³¹ the kernels index: %w",
			g.M(), g.Co, g.Kh, g.Kw, g.Ci/g.Groups, g.Stride, g.Dilation, g.H, g.W, g.Pad, kernels.ErrUnsupported)
	}
	return nil
}

// MaxPool2D sets out to the largest value of each window of x (padding
// never wins, NaN does); one thread per output element.
func (b *Backend) MaxPool2D(out, x *kernels.Tensor, p kernels.PoolParams) error {
	g, err := check.MaxPool2D("cuda: MaxPool2D", b, out, x, p)
	if err != nil {
		return err
	}
	if int64(g.N)*int64(g.Ho)*int64(g.Wo) > int32Limit || int64(g.C) > int32Limit ||
		int64(g.H)+2*int64(g.Pad[0]) > int32Limit || int64(g.W)+2*int64(g.Pad[1]) > int32Limit ||
		max(g.Kernel[0], g.Kernel[1], g.Stride[0], g.Stride[1], g.Dilation[0], g.Dilation[1]) > int32Limit {
		return fmt.Errorf("cuda: MaxPool2D: x %v with window %v (stride %v, padding %v, dilation %v) is over the 2³¹ the kernel indexes: %w",
			x.Shape(), g.Kernel, g.Stride, g.Pad, g.Dilation, kernels.ErrUnsupported)
	}
	return wrap("MaxPool2D", b.launch("maxpool_"+out.DType().String(), b.gridFor(int64(out.Len())), dim3{x: block}, 0,
		ptrOf(out), ptrOf(x), int32(g.N), int32(g.H), int32(g.W), int32(g.C), int32(g.Ho), int32(g.Wo),
		int32(g.Kernel[0]), int32(g.Kernel[1]), int32(g.Stride[0]), int32(g.Stride[1]),
		int32(g.Pad[0]), int32(g.Pad[1]), int32(g.Dilation[0]), int32(g.Dilation[1])))
}

// Geometry of global_avgpool_T: a block of 64 channels × 4 pixel rows per
// (image, channel chunk).
const (
	avgPoolChannels = 64
	avgPoolRows     = 4
)

// GlobalAvgPool sets out [N, C] to the mean of x [N, H, W, C] over H and
// W, summed in float32: one block per image and chunk of 64 channels.
func (b *Backend) GlobalAvgPool(out, x *kernels.Tensor) error {
	n, hw, c, err := check.GlobalAvgPool("cuda: GlobalAvgPool", b, out, x)
	if err != nil {
		return err
	}
	blocks := int64(n) * int64(ceilDiv(c, avgPoolChannels))
	if blocks > math.MaxInt32 || hw > math.MaxInt32 {
		return fmt.Errorf("cuda: GlobalAvgPool: x %v is over the 2³¹ blocks or pixels one launch takes: %w",
			x.Shape(), kernels.ErrUnsupported)
	}
	return wrap("GlobalAvgPool", b.launch("global_avgpool_"+out.DType().String(), dim3{x: int(blocks)},
		dim3{x: avgPoolChannels, y: avgPoolRows}, 0, ptrOf(out), ptrOf(x), int32(n), int32(hw), int32(c)))
}

// ceilDiv returns ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int) int { return (a + b - 1) / b }
