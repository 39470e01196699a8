package kernels

// Argument checks of the DecoderBackward op group, shared by its backends
// like the CheckX functions of validate.go.

// CheckRMSNormBackward validates the arguments of
// DecoderBackward.RMSNormBackward: x [rows…, D] of a float dtype, dy and dx
// of x's dtype and shape, gamma and the optional dgamma [D] of x's dtype,
// eps ≥ 0, and no overlaps but dx = dy (dx is not x or gamma; dgamma is
// none of the others). It returns the row geometry.
func CheckRMSNormBackward(op string, be Backend, dx, dgamma, dy, x, gamma *Tensor, eps float32) (RowDims, error) {
	c := Check(op).Tensor("dx", dx, be).Tensor("dy", dy, be).Tensor("x", x, be).Tensor("gamma", gamma, be)
	if dgamma != nil {
		c.Tensor("dgamma", dgamma, be)
	}
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	c.DType("x", x, FloatTypes...).Rank("x", x, 1)
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	g := rowDims(x.Shape())
	c.SameDType("dy", dy, "x", x).Shape("dy", dy, x.Shape()...).
		SameDType("dx", dx, "x", x).Shape("dx", dx, x.Shape()...).
		SameDType("gamma", gamma, "x", x).Shape("gamma", gamma, g.D).
		That(eps >= 0, ErrValue, "eps is %g, want ≥ 0", eps).
		That(!sameStorage(dx, x), ErrValue, "dx is x's storage, want dy's or a separate tensor").
		That(!sameStorage(dx, gamma), ErrValue, "dx is gamma's storage, want dy's or a separate tensor")
	if dgamma != nil {
		c.SameDType("dgamma", dgamma, "x", x).Shape("dgamma", dgamma, g.D)
		for _, o := range []struct {
			name string
			t    *Tensor
		}{{"dx", dx}, {"dy", dy}, {"x", x}, {"gamma", gamma}} {
			c.That(!sameStorage(dgamma, o.t), ErrValue, "dgamma is %s's storage, want a separate tensor", o.name)
		}
	}
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	return g, nil
}

// CheckSwiGLUBackward validates the arguments of
// DecoderBackward.SwiGLUBackward: gate of a float dtype, dy, up, dgate and
// dup of its dtype and shape, and dgate and dup not the same tensor. It
// returns the element count.
func CheckSwiGLUBackward(op string, be Backend, dgate, dup, dy, gate, up *Tensor) (n int, err error) {
	c := Check(op).Tensor("dgate", dgate, be).Tensor("dup", dup, be).Tensor("dy", dy, be).
		Tensor("gate", gate, be).Tensor("up", up, be)
	if err := c.Err(); err != nil {
		return 0, err
	}
	s := gate.Shape()
	c.DType("gate", gate, FloatTypes...).
		SameDType("up", up, "gate", gate).Shape("up", up, s...).
		SameDType("dy", dy, "gate", gate).Shape("dy", dy, s...).
		SameDType("dgate", dgate, "gate", gate).Shape("dgate", dgate, s...).
		SameDType("dup", dup, "gate", gate).Shape("dup", dup, s...).
		That(!sameStorage(dgate, dup), ErrValue, "dgate and dup are one tensor, want two")
	if err := c.Err(); err != nil {
		return 0, err
	}
	return gate.Len(), nil
}

// CheckDropout validates the arguments of DecoderBackward.Dropout: x of a
// float dtype, out of its dtype and shape, and 0 ≤ p < 1. It returns the
// element count.
func CheckDropout(op string, be Backend, out, x *Tensor, p float32) (n int, err error) {
	c := Check(op).Tensor("out", out, be).Tensor("x", x, be)
	if err := c.Err(); err != nil {
		return 0, err
	}
	c.DType("x", x, FloatTypes...).
		SameDType("out", out, "x", x).Shape("out", out, x.Shape()...).
		That(p >= 0 && p < 1, ErrValue, "p is %v, want 0 ≤ p < 1", p)
	if err := c.Err(); err != nil {
		return 0, err
	}
	return x.Len(), nil
}
