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

// gatherAxes is SwapAxes of x [A, B, C, 1] into out [A, C, B, 1], in
// parallel over the A·C rows of out. Each row out[a, c, :] is gathered
// from x at a stride of C; where the rows are short (B ≤ 16: an image's
// channels, NCHW to NHWC), a range of them is filled instead one x[a, b, :]
// at a time, read in order and written at a stride of B.
func gatherAxes[T uint16 | int32](out, x []T, A, B, C int) {
	parallelFor(A*C, B, func(lo, hi int) {
		if B <= 16 {
			for lo < hi {
				a, c0 := lo/C, lo%C
				c1 := min(C, c0+hi-lo)
				rows := out[(a*C+c0)*B : (a*C+c1)*B]
				if B == 3 { // an RGB image's pixels, written in order
					n := c1 - c0
					r, g, bl := x[a*B*C+c0:][:n], x[(a*B+1)*C+c0:][:n], x[(a*B+2)*C+c0:][:n]
					rows = rows[:3*n]
					for i := range n {
						px := rows[3*i : 3*i+3 : 3*i+3]
						px[0], px[1], px[2] = r[i], g[i], bl[i]
					}
					lo += n
					continue
				}
				for b := range B {
					src := x[(a*B+b)*C+c0 : (a*B+b)*C+c1]
					for i, v := range src {
						rows[i*B+b] = v
					}
				}
				lo += c1 - c0
			}
			return
		}
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
