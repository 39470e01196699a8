package check

import "github.com/zbench/zbench/kernels"

// Argument checks of the FP8 op group.

// FP8Dims is the geometry of a valid FP8MatMul call.
type FP8Dims struct{ M, N, K int }

// CastFP8 validates the arguments of kernels.FP8.CastFP8.
func CastFP8(op string, be kernels.Backend, q, amax, x, scale *kernels.Tensor) error {
	c := Op(op).Tensor("q", q, be).Tensor("x", x, be).Tensor("scale", scale, be)
	if amax != nil {
		c.Tensor("amax", amax, be)
	}
	if err := c.Err(); err != nil {
		return err
	}
	c.DType("q", q, kernels.E4M3, kernels.E5M2).DType("x", x, kernels.FloatTypes...).DType("scale", scale, kernels.F32).Len("scale", scale, 1).
		That(q.Shape().Equal(x.Shape()), kernels.ErrShape, "q has shape %v, x %v: want the same", q.Shape(), x.Shape())
	if amax != nil {
		c.DType("amax", amax, kernels.F32).Len("amax", amax, 1)
	}
	return c.Err()
}

// FP8MatMul validates the arguments of kernels.FP8.FP8MatMul.
func FP8MatMul(op string, be kernels.Backend, out, a, b *kernels.Tensor, p kernels.FP8MatMulParams) (FP8Dims, error) {
	c := Op(op).Tensor("out", out, be).Tensor("a", a, be).Tensor("b", b, be).
		Tensor("AScaleInv", p.AScaleInv, be).Tensor("BScaleInv", p.BScaleInv, be)
	if p.Bias != nil {
		c.Tensor("bias", p.Bias, be)
	}
	if err := c.Err(); err != nil {
		return FP8Dims{}, err
	}
	as, bs := a.Shape(), b.Shape()
	c.DType("out", out, kernels.FloatTypes...).DType("a", a, kernels.E4M3, kernels.E5M2).DType("b", b, kernels.E4M3, kernels.E5M2).
		That(a.DType() != kernels.E5M2 || b.DType() != kernels.E5M2, kernels.ErrDType, "a and b are both e5m2: want e4m3 for one of them").
		Rank("a", a, 1).That(len(bs) == 2, kernels.ErrShape, "b has shape %v, want 2-D [N, K]", bs).
		DType("AScaleInv", p.AScaleInv, kernels.F32).DType("BScaleInv", p.BScaleInv, kernels.F32)
	if err := c.Err(); err != nil {
		return FP8Dims{}, err
	}
	g := FP8Dims{M: as.Rows(), K: as.Last(), N: bs[0]}
	c.That(bs[1] == g.K, kernels.ErrShape, "b has shape %v, want [N %d] (a's K)", bs, g.K).
		That(p.AScaleInv.Len() == 1 || p.AScaleInv.Len() == g.M, kernels.ErrShape, "AScaleInv has %d elements, want 1 or a's %d rows", p.AScaleInv.Len(), g.M).
		That(p.BScaleInv.Len() == 1 || p.BScaleInv.Len() == g.N, kernels.ErrShape, "BScaleInv has %d elements, want 1 or b's %d rows", p.BScaleInv.Len(), g.N)
	want := append(kernels.Shape{}, as[:len(as)-1]...)
	c.That(out.Shape().Equal(append(want, g.N)), kernels.ErrShape, "out has shape %v, want %v", out.Shape(), append(want, g.N))
	if p.Bias != nil {
		c.DType("bias", p.Bias, kernels.F32).Shape("bias", p.Bias, g.N)
	}
	return g, c.Err()
}

// CastFP8Rows validates the arguments of kernels.FP8.CastFP8Rows.
func CastFP8Rows(op string, be kernels.Backend, q, scaleInv, x *kernels.Tensor) error {
	c := Op(op).Tensor("q", q, be).Tensor("scaleInv", scaleInv, be).Tensor("x", x, be)
	if err := c.Err(); err != nil {
		return err
	}
	c.DType("q", q, kernels.E4M3, kernels.E5M2).DType("x", x, kernels.FloatTypes...).Rank("x", x, 1).DType("scaleInv", scaleInv, kernels.F32).
		That(q.Shape().Equal(x.Shape()), kernels.ErrShape, "q has shape %v, x %v: want the same", q.Shape(), x.Shape())
	if c.Err() == nil {
		c.Len("scaleInv", scaleInv, x.Shape().Rows())
	}
	return c.Err()
}
