package check

import "github.com/zbench/zbench/kernels"

// Argument checks of the WeightQuant op group.

// WMatMulDims is the geometry of a valid WMatMul call.
type WMatMulDims struct{ M, N, K int }

// WMatMul validates the arguments of kernels.WeightQuant.WMatMul.
func WMatMul(op string, be kernels.Backend, out, x *kernels.Tensor, w kernels.QWeight, bias *kernels.Tensor) (WMatMulDims, error) {
	c := Op(op).Tensor("out", out, be).Tensor("x", x, be).Tensor("w.Data", w.Data, be).Tensor("w.Scales", w.Scales, be)
	if bias != nil {
		c.Tensor("bias", bias, be)
	}
	if err := c.Err(); err != nil {
		return WMatMulDims{}, err
	}
	xs, ds := x.Shape(), w.Data.Shape()
	c.DType("x", x, kernels.FloatTypes...).Rank("x", x, 1).SameDType("out", out, "x", x).
		DType("w.Data", w.Data, kernels.I8).
		That(len(ds) == 2, kernels.ErrShape, "w.Data has shape %v, want 2-D", ds).
		That(w.Format >= kernels.WInt8 && w.Format <= kernels.WNF4, kernels.ErrValue, "unknown weight format %d", w.Format)
	if err := c.Err(); err != nil {
		return WMatMulDims{}, err
	}
	g := WMatMulDims{M: xs.Rows(), K: xs.Last(), N: ds[0]}
	if w.Format == kernels.WInt8 {
		c.That(ds[1] == g.K, kernels.ErrShape, "w.Data has shape %v, want [N %d] (x's K) for %v", ds, g.K, w.Format).
			That(w.Group == 0 || (w.Group > 0 && w.Group%32 == 0 && g.K%w.Group == 0), kernels.ErrShape,
				"group %d for K = %d: want 0 (one scale per row) or a positive multiple of 32 that divides K", w.Group, g.K)
		if c.Err() == nil {
			scales := []int{g.N}
			if w.Group > 0 {
				scales = append(scales, g.K/w.Group)
				c.DType("w.Scales", w.Scales, kernels.F32, kernels.F16)
			} else {
				c.DType("w.Scales", w.Scales, kernels.F32)
			}
			c.Shape("w.Scales", w.Scales, scales...)
		}
	} else {
		c.That(w.Group > 0 && w.Group%32 == 0 && g.K%w.Group == 0, kernels.ErrShape,
			"group %d for K = %d: want a positive multiple of 32 that divides K", w.Group, g.K).
			That(ds[1]*2 == g.K, kernels.ErrShape, "w.Data has shape %v, want [N %d] (two %v codes per byte of x's K = %d)", ds, g.K/2, w.Format, g.K)
		if c.Err() == nil {
			c.DType("w.Scales", w.Scales, kernels.F32).Shape("w.Scales", w.Scales, g.N, g.K/w.Group)
		}
	}
	want := append(kernels.Shape{}, xs[:len(xs)-1]...)
	c.That(out.Shape().Equal(append(want, g.N)), kernels.ErrShape, "out has shape %v, want %v", out.Shape(), append(want, g.N))
	if bias != nil {
		c.DType("bias", bias, kernels.F32).Shape("bias", bias, g.N)
	}
	return g, c.Err()
}
