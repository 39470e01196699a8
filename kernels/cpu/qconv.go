package cpu

import (
	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
	"github.com/zbench/zbench/kernels/cpu/internal/vecmath"
)

var _ kernels.QuantConv = (*Backend)(nil)

// qconvPackBytes bounds the int8 patch rows of one tile: the rows a tile
// multiplies stay in the L2 cache while dotI8 streams over them once per
// four output channels.
const qconvPackBytes = 256 << 10

// qconvMaxRows bounds the rows (output pixels) of one tile, so that a
// small K still leaves tiles to share out and a small accumulator.
const qconvMaxRows = 128

// QConv2D computes the int8 convolution as an implicit GEMM over NHWC
// data, out [M, Co] (M = N·Ho·Wo output pixels) = im2col(x) [M, K] ·
// wᵀ [K, Co] per group with exact int32 sums, then the epilogue of
// kernels.QuantConv. The GEMM is cut into tiles of up to qconvMaxRows
// output pixels by qcols output channels of one group, shared out in
// order among the workers: a worker packs its tile's int8 patches (once
// for the tiles of the same pixels and group that follow) and multiplies
// them with dotI8, QMatMul's VNNI kernels, then rescales, adds, activates
// and stores the tile while it is in cache. A 1×1 stride-1 convolution
// packs nothing: the NHWC data is itself the [M, Ci] matrix that QMatMul
// would multiply by the [Co, Ci] filters.
func (b *Backend) QConv2D(out, x, w *kernels.Tensor, p kernels.QConvParams) error {
	g, err := check.QConv2D("cpu: QConv2D", b, out, x, w, p)
	if err != nil {
		return err
	}
	M, K := g.M(), g.K()
	cog := g.Co / g.Groups
	rows := min(qconvMaxRows, max(4, qconvPackBytes/K&^3), M)
	rowBlocks := (M + rows - 1) / rows
	colBlocks := (cog + qcols - 1) / qcols
	perRow := g.Groups * colBlocks
	xv, wv := i8(x), i8(w)
	ep := newQConvEpilogue(out, g, p)
	pointwise := g.PointwiseGEMM()
	parallelFor(rowBlocks*perRow, rows*qcols*K/16, func(lo, hi int) {
		var patches []int8
		if !pointwise {
			patches = make([]int8, rows*K)
		}
		acc := make([]int32, rows*qcols)
		buf := ep.buffers()
		packed := -1 // the row block and group in patches
		for t := lo; t < hi; t++ {
			rb, gr, cb := t/perRow, t%perRow/colBlocks, t%colBlocks
			r0, r1 := rb*rows, min((rb+1)*rows, M)
			var a []int8
			if pointwise {
				a = xv[r0*K : r1*K]
			} else {
				if key := rb*g.Groups + gr; key != packed {
					for r := r0; r < r1; r++ {
						packPatch(patches[(r-r0)*K:(r-r0+1)*K], xv, g.ConvDims, r, gr, 0, K)
					}
					packed = key
				}
				a = patches[:(r1-r0)*K]
			}
			n0 := gr*cog + cb*qcols
			nw := min(qcols, (gr+1)*cog-n0)
			dotI8(acc[:(r1-r0)*nw], a, wv[n0*K:(n0+nw)*K], r1-r0, nw, K)
			ep.store(acc, r0, r1, n0, nw, buf)
		}
	})
	return nil
}

// qconvEpilogue is QConv2D's epilogue with its per-call operands
// resolved: the scale of each output channel (XScale·WScale[o] is formed
// per element by rescale, as QMatMul's) and the bias, zeros when absent.
type qconvEpilogue struct {
	out, residual *kernels.Tensor
	co            int
	xs, outScale  float32
	cs, bias      []float32 // [Co]
	act           kernels.Activation
}

func newQConvEpilogue(out *kernels.Tensor, g check.QConvDims, p kernels.QConvParams) *qconvEpilogue {
	ep := &qconvEpilogue{out: out, residual: p.Residual, co: g.Co, act: p.Act}
	if out.DType() == kernels.I32 {
		return ep
	}
	ep.xs = f32(p.XScale)[0]
	ep.cs, ep.bias = make([]float32, g.Co), make([]float32, g.Co)
	if ws := f32(p.WScale); g.WRowScale {
		copy(ep.cs, ws[:g.Co])
	} else {
		for o := range ep.cs {
			ep.cs[o] = ws[0]
		}
	}
	if p.Bias != nil {
		copy(ep.bias, f32(p.Bias)[:g.Co])
	}
	if p.OutScale != nil {
		ep.outScale = f32(p.OutScale)[0]
	}
	return ep
}

// qconvBuffers are a worker's rows of the epilogue: y, where a row's
// values are computed, and res, a 16-bit residual's row widened.
type qconvBuffers struct{ y, res []float32 }

func (ep *qconvEpilogue) buffers() qconvBuffers {
	return qconvBuffers{y: make([]float32, qcols), res: make([]float32, qcols)}
}

// store writes the output channels [n0, n0+nw) of the pixels [r0, r1)
// from their int32 sums acc [r1−r0, nw]: the sums themselves for an I32
// out, else the rescaled, biased, residual-added and activated values
// rounded to out's dtype or requantized. With a residual the values are
// computed apart from out, which may be the residual.
func (ep *qconvEpilogue) store(acc []int32, r0, r1, n0, nw int, buf qconvBuffers) {
	dt := ep.out.DType()
	for r := r0; r < r1; r++ {
		at := r*ep.co + n0
		sums := acc[(r-r0)*nw:][:nw]
		if dt == kernels.I32 {
			copy(i32(ep.out)[at:at+nw], sums)
			continue
		}
		// y is where the values are computed: out itself for F32 unless
		// the residual is to be read from there, a buffer otherwise.
		y := buf.y[:nw]
		if dt == kernels.F32 && ep.residual == nil {
			y = f32(ep.out)[at : at+nw]
		}
		rescale(y, sums, ep.xs, ep.cs[n0:n0+nw], ep.bias[n0:n0+nw])
		if ep.residual != nil {
			r := loadRange(ep.residual, at, at+nw, buf.res)
			if dt == kernels.F32 {
				dst := f32(ep.out)[at : at+nw] // may be r: each value is read before it is written
				addRow(dst, y, r)
				y = dst
			} else {
				addRow(y, y, r)
			}
		}
		if ep.act != kernels.ActNone {
			applyAct(y, y, ep.act)
		}
		switch dt {
		case kernels.I8:
			quantizeRow(i8(ep.out)[at:at+nw], y, ep.outScale)
		case kernels.F16, kernels.BF16:
			flushRange(ep.out, at, y)
		}
	}
}

// addRow sets dst[j] = a[j] + b[j]; dst may be a or b.
func addRow(dst, a, b []float32) {
	if useVecmath {
		vecmath.Add(dst, a, b)
		return
	}
	a, b = a[:len(dst)], b[:len(dst)]
	for j := range dst {
		dst[j] = a[j] + b[j]
	}
}
