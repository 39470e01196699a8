package check

import "github.com/zbench/zbench/kernels"

// Argument checks of the DecoderBackward op group.

// RMSNormBackward validates the arguments of
// kernels.DecoderBackward.RMSNormBackward: x [rows…, D] of a float dtype, dy
// and dx of x's dtype and shape, gamma and the optional dgamma [D] of x's
// dtype, eps ≥ 0, and no overlaps but dx = dy (dx is not x or gamma; dgamma is
// none of the others). It returns the row geometry.
func RMSNormBackward(op string, be kernels.Backend, dx, dgamma, dy, x, gamma *kernels.Tensor, eps float32) (RowDims, error) {
	c := Op(op).Tensor("dx", dx, be).Tensor("dy", dy, be).Tensor("x", x, be).Tensor("gamma", gamma, be)
	if dgamma != nil {
		c.Tensor("dgamma", dgamma, be)
	}
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	c.DType("x", x, kernels.FloatTypes...).Rank("x", x, 1)
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	g := rowDims(x.Shape())
	c.SameDType("dy", dy, "x", x).Shape("dy", dy, x.Shape()...).
		SameDType("dx", dx, "x", x).Shape("dx", dx, x.Shape()...).
		SameDType("gamma", gamma, "x", x).Shape("gamma", gamma, g.D).
		That(eps >= 0, kernels.ErrValue, "eps is %g, want ≥ 0", eps).
		That(!sameStorage(dx, x), kernels.ErrValue, "dx is x's storage, want dy's or a separate tensor").
		That(!sameStorage(dx, gamma), kernels.ErrValue, "dx is gamma's storage, want dy's or a separate tensor")
	if dgamma != nil {
		c.SameDType("dgamma", dgamma, "x", x).Shape("dgamma", dgamma, g.D)
		for _, o := range []struct {
			name string
			t    *kernels.Tensor
		}{{"dx", dx}, {"dy", dy}, {"x", x}, {"gamma", gamma}} {
			c.That(!sameStorage(dgamma, o.t), kernels.ErrValue, "dgamma is %s's storage, want a separate tensor", o.name)
		}
	}
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	return g, nil
}

// SwiGLUBackward validates the arguments of
// kernels.DecoderBackward.SwiGLUBackward: gate of a float dtype, dy, up, dgate
// and dup of its dtype and shape, and dgate and dup not the same tensor. It
// returns the element count.
func SwiGLUBackward(op string, be kernels.Backend, dgate, dup, dy, gate, up *kernels.Tensor) (n int, err error) {
	c := Op(op).Tensor("dgate", dgate, be).Tensor("dup", dup, be).Tensor("dy", dy, be).
		Tensor("gate", gate, be).Tensor("up", up, be)
	if err := c.Err(); err != nil {
		return 0, err
	}
	s := gate.Shape()
	c.DType("gate", gate, kernels.FloatTypes...).
		SameDType("up", up, "gate", gate).Shape("up", up, s...).
		SameDType("dy", dy, "gate", gate).Shape("dy", dy, s...).
		SameDType("dgate", dgate, "gate", gate).Shape("dgate", dgate, s...).
		SameDType("dup", dup, "gate", gate).Shape("dup", dup, s...).
		That(!sameStorage(dgate, dup), kernels.ErrValue, "dgate and dup are one tensor, want two")
	if err := c.Err(); err != nil {
		return 0, err
	}
	return gate.Len(), nil
}

// Dropout validates the arguments of kernels.DecoderBackward.Dropout: x of a
// float dtype, out of its dtype and shape, and 0 ≤ p < 1. It returns the
// element count.
func Dropout(op string, be kernels.Backend, out, x *kernels.Tensor, p float32) (n int, err error) {
	c := Op(op).Tensor("out", out, be).Tensor("x", x, be)
	if err := c.Err(); err != nil {
		return 0, err
	}
	c.DType("x", x, kernels.FloatTypes...).
		SameDType("out", out, "x", x).Shape("out", out, x.Shape()...).
		That(p >= 0 && p < 1, kernels.ErrValue, "p is %v, want 0 ≤ p < 1", p)
	if err := c.Err(); err != nil {
		return 0, err
	}
	return x.Len(), nil
}
