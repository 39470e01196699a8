package cpu

import (
	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

// SwapAxes sets out[a, c, b, d] = x[a, b, c, d] for x [A, B, C, D], in
// parallel over the A·B blocks [C, D] of x: each block is read in order and
// its C rows of D elements are copied to their places, B rows apart, in out.
// Elements are moved as bytes, so every dtype is copied exactly.
func (b *Backend) SwapAxes(out, x *kernels.Tensor) error {
	g, err := check.SwapAxes("cpu: SwapAxes", b, out, x)
	if err != nil {
		return err
	}
	row := g.D * x.DType().Size() // bytes of one innermost row
	src, dst := bytesOf(x), bytesOf(out)
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
