package cpu

import (
	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

// SwapAxes sets out[a, c, b, d] = x[a, b, c, d] for x [A, B, C, D], in
// parallel over the A·B blocks [C, D] of x: each block is read in order and
// its C rows of D elements are copied to their places, B rows apart, in out.
// Elements are moved as bytes, so every dtype is copied exactly. Rows of one
// element (D = 1, an image's pixels between NCHW and NHWC) are gathered
// into out's rows instead (gatherAxes).
func (b *Backend) SwapAxes(out, x *kernels.Tensor) error {
	g, err := check.SwapAxes("cpu: SwapAxes", b, out, x)
	if err != nil {
		return err
	}
	row := g.D * x.DType().Size() // bytes of one innermost row
	src, dst := bytesOf(x), bytesOf(out)
	switch {
	case g.D == 1 && row == 4:
		gatherAxes(i32(out), i32(x), g.A, g.B, g.C)
		return nil
	case g.D == 1 && row == 2:
		gatherAxes(u16(out), u16(x), g.A, g.B, g.C)
		return nil
	}
	parallelFor(g.A*g.B, g.C*g.D, func(lo, hi int) {
		for ab := lo; ab < hi; ab++ {
			a, bi := ab/g.B, ab%g.B
			block := src[ab*g.C*row : (ab+1)*g.C*row] // x[a, b, :, :]
			o := (a*g.C*g.B + bi) * row               // out[a, 0, b, :]
			for c := range g.C {
				copy(dst[o:o+row], block[c*row:(c+1)*row])
				o += g.B * row
			}
		}
	})
	return nil
}

// gatherAxes is SwapAxes of x [A, B, C, 1] into out [A, C, B, 1]: each row
// out[a, c, :] gathered from x at a stride of C, in parallel over the A·C
// rows.
func gatherAxes[T uint16 | int32](out, x []T, A, B, C int) {
	parallelFor(A*C, B, func(lo, hi int) {
		for ac := lo; ac < hi; ac++ {
			a, c := ac/C, ac%C
			row, src := out[ac*B:(ac+1)*B], x[a*B*C+c:]
			_ = src[(B-1)*C]
			for b := range row {
				row[b] = src[b*C]
			}
		}
	})
}
