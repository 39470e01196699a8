//go:build cuda

package cuda

import (
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

var _ kernels.QuantConv = (*Backend)(nil)

// qconvScratchBytes bounds the int8 patches QConv2D gathers at a time
// into the workspace: a slab of output pixels, whole 128-row tiles of
// QMatMul, as many as fit (one tile at least).
const qconvScratchBytes = 32 << 20

// qconvPath is the way QConv2D computes a call.
type qconvPath int

const (
	// qconvGEMM is QMatMul's kernels on the NHWC data itself, the
	// [N·H·W, Ci] matrix, for 1×1 stride-1 unpadded ungrouped
	// convolutions.
	qconvGEMM qconvPath = iota
	// qconvIm2col gathers the patches of a slab of output pixels for
	// one group (qconv_im2col) and multiplies them with QMatMul's
	// kernels, group after group and slab after slab.
	qconvIm2col
)

// String names the path in test messages.
func (p qconvPath) String() string {
	return [...]string{"gemm", "im2col"}[p]
}

// chooseQConv returns the path for a convolution of geometry g.
func chooseQConv(g kernels.ConvDims) qconvPath {
	if g.PointwiseGEMM() {
		return qconvGEMM
	}
	return qconvIm2col
}

// qconvSlabRows returns the output pixels of one slab for m pixels and a
// reduction of k: all of them when they fit, else a multiple of qmmTile,
// within what one QMatMul launch takes (maxGridY tiles of rows) and, when
// the patches are gathered, within qconvScratchBytes.
func qconvSlabRows(path qconvPath, m, k int) int {
	rows := qmmTile * maxGridY
	if path == qconvIm2col {
		rows = min(rows, max(qmmTile, qconvScratchBytes/k/qmmTile*qmmTile))
	}
	return min(rows, m)
}

// qconvVec returns the bytes qconv_im2col moves at a time for groups of
// cg channels of x at address x: 16, 4 or 1, the widest that divides cg
// and x's alignment (the patch rows of K = Kh·Kw·cg bytes in the
// workspace, 256-byte aligned, are then as aligned).
func qconvVec(cg int, x devptr) int {
	for _, v := range []int{16, 4} {
		if cg%v == 0 && x%devptr(v) == 0 {
			return v
		}
	}
	return 1
}

// QConv2D sets out from the int8 convolution of x by w with exact int32
// sums and the epilogue of kernels.QuantConv, as a GEMM per group of the
// patch matrix [M, K] (M = N·Ho·Wo output pixels, K = Kh·Kw·Ci/G) by the
// group's filters [Co/G, K] on QMatMul's kernels, which write the group's
// channels of out (row pitch Co) with the rescale, bias, residual,
// activation and rounding or requantization fused. The patch matrix is
// the NHWC data itself for a 1×1 stride-1 unpadded ungrouped convolution;
// otherwise qconv_im2col gathers it into the workspace a slab of output
// pixels (qconvSlabRows) and a group at a time, each slab multiplied
// before the next is gathered (the stream orders them).
func (b *Backend) QConv2D(out, x, w *kernels.Tensor, p kernels.QConvParams) error {
	g, err := check.QConv2D("cuda: QConv2D", b, out, x, w, p)
	if err != nil {
		return err
	}
	if err := convFits(g.ConvDims); err != nil {
		return fmt.Errorf("cuda: QConv2D: %w", err)
	}
	return wrap("QConv2D", b.qconv(out, x, w, g, p))
}

// qconv queues QConv2D's launches for a valid call of geometry g.
func (b *Backend) qconv(out, x, w *kernels.Tensor, g check.QConvDims, p kernels.QConvParams) error {
	m, k, cg, cog := g.M(), g.K(), g.Ci/g.Groups, g.Co/g.Groups
	path := chooseQConv(g.ConvDims)
	rows := qconvSlabRows(path, m, k)
	var (
		col devptr // the patches of a slab and group: [rows, k]
		vec int
	)
	if path == qconvIm2col {
		var err error
		if col, err = b.workspace(int64(rows) * int64(k)); err != nil {
			return err
		}
		vec = qconvVec(cg, ptrOf(x))
	}
	es := int64(out.DType().Size())
	l := qmmLaunch{
		dt: out.DType(), aScale: ptrOf(p.XScale), outScale: ptrOf(p.OutScale),
		n: cog, k: k, ldc: g.Co, bRowScale: g.WRowScale, act: p.Act,
	}
	for r0 := 0; r0 < m; r0 += rows {
		l.m = min(rows, m-r0)
		for gr := range g.Groups {
			if path == qconvGEMM {
				l.a = ptrOf(x) + devptr(int64(r0)*int64(k))
			} else {
				if err := b.launch("qconv_im2col", b.gridFor(int64(l.m)*int64(k/vec)), dim3{x: block}, 0,
					col, ptrOf(x), int32(r0), int32(l.m), int32(gr), int32(g.H), int32(g.W), int32(g.Ci),
					int32(g.Ho), int32(g.Wo), int32(g.Kh), int32(g.Kw), int32(g.Stride[0]), int32(g.Stride[1]),
					int32(g.Pad[0]), int32(g.Pad[1]), int32(g.Dilation[0]), int32(g.Dilation[1]),
					int32(cg), int32(vec)); err != nil {
					return err
				}
				l.a = col
			}
			ch := int64(gr) * int64(cog) // the group's first output channel
			at := devptr((int64(r0)*int64(g.Co) + ch) * es)
			l.c = ptrOf(out) + at
			if p.Residual != nil {
				l.res = ptrOf(p.Residual) + at
			}
			l.b = ptrOf(w) + devptr(ch*int64(k))
			if p.Bias != nil {
				l.bias = ptrOf(p.Bias) + devptr(4*ch)
			}
			if l.bScale = ptrOf(p.WScale); g.WRowScale {
				l.bScale += devptr(4 * ch)
			}
			if err := b.launchQMM(l); err != nil {
				return err
			}
		}
	}
	return nil
}
