package check

import "github.com/zbench/zbench/kernels"

// Argument checks of the Vision op group.

// Conv2D validates the arguments of kernels.Vision.Conv2D: x [N, H, W, Ci] of
// a float dtype, w [Co, Kh, Kw, Ci/Groups], out [N, Ho, Wo, Co], the
// optional bias [Co] and residual (out's shape), all of x's dtype; strides,
// dilations and groups positive, padding not negative, groups dividing Ci
// and Co, a window that fits, a known activation, and out apart from x and
// w.
func Conv2D(op string, be kernels.Backend, out, x, w *kernels.Tensor, p kernels.ConvParams) (kernels.ConvDims, error) {
	c := Op(op).Tensor("out", out, be).Tensor("x", x, be).Tensor("w", w, be)
	if p.Bias != nil {
		c.Tensor("bias", p.Bias, be)
	}
	if p.Residual != nil {
		c.Tensor("residual", p.Residual, be)
	}
	if err := c.Err(); err != nil {
		return kernels.ConvDims{}, err
	}
	xs, ws := x.Shape(), w.Shape()
	c.DType("x", x, kernels.FloatTypes...).SameDType("w", w, "x", x).SameDType("out", out, "x", x).
		That(len(xs) == 4, kernels.ErrShape, "x has shape %v, want [N H W C] (NHWC)", xs).
		That(len(ws) == 4, kernels.ErrShape, "w has shape %v, want [Co Kh Kw Ci/groups]", ws).
		That(validAct(p.Act), kernels.ErrValue, "unknown activation %d", p.Act)
	if err := c.Err(); err != nil {
		return kernels.ConvDims{}, err
	}
	g := convGeometry(c, out, xs, ws, p)
	c.That(!sameStorage(out, x), kernels.ErrValue, "out is x's storage, want a separate tensor").
		That(!sameStorage(out, w), kernels.ErrValue, "out is w's storage, want a separate tensor")
	if p.Bias != nil {
		c.SameDType("bias", p.Bias, "x", x).Shape("bias", p.Bias, g.Co)
	}
	if p.Residual != nil {
		c.SameDType("residual", p.Residual, "x", x).Shape("residual", p.Residual, g.N, g.Ho, g.Wo, g.Co).
			That(!sameStorage(p.Residual, x), kernels.ErrValue, "residual is x's storage, want a separate tensor")
	}
	if err := c.Err(); err != nil {
		return kernels.ConvDims{}, err
	}
	return g, nil
}

// convGeometry validates the geometry of a convolution of x by w
// (shapes xs and ws, both 4-D) under p, for Conv2D and QConv2D: strides
// and dilations positive, padding not negative, groups positive and
// dividing Ci and Co, w's channels per group, a window that fits, and
// out [N, Ho, Wo, Co]. It returns the geometry, valid when c has no error.
func convGeometry(c *Checker, out *kernels.Tensor, xs, ws kernels.Shape, p kernels.ConvParams) kernels.ConvDims {
	g := p.Dims(xs, ws)
	for i := range 2 {
		c.That(g.Stride[i] > 0, kernels.ErrValue, "stride %v, want positive values", p.Stride).
			That(g.Dilation[i] > 0, kernels.ErrValue, "dilation %v, want positive values", p.Dilation).
			That(g.Pad[i] >= 0, kernels.ErrValue, "padding %v, want no negative value", p.Pad)
	}
	c.That(g.Groups > 0, kernels.ErrValue, "groups %d, want a positive count", p.Groups)
	if c.Err() != nil {
		return g
	}
	c.That(g.Ci%g.Groups == 0 && g.Co%g.Groups == 0, kernels.ErrShape,
		"%d groups do not divide the %d input and %d output channels", g.Groups, g.Ci, g.Co).
		That(ws[3]*g.Groups == g.Ci, kernels.ErrShape, "w has shape %v: %d input channels per group, want %d/%d = %d",
			ws, ws[3], g.Ci, g.Groups, g.Ci/g.Groups).
		That(g.Kh > 0 && g.Kw > 0 && g.Co > 0, kernels.ErrShape, "w has shape %v, want no empty dimension", ws)
	if c.Err() != nil {
		return g
	}
	c.That(g.Ho > 0 && g.Wo > 0, kernels.ErrShape, "x %v is smaller than the %d×%d window (dilation %v, padding %v)",
		xs, g.Kh, g.Kw, g.Dilation, g.Pad).
		Shape("out", out, g.N, g.Ho, g.Wo, g.Co)
	return g
}

// MaxPool2D validates the arguments of kernels.Vision.MaxPool2D: x
// [N, H, W, C] of a float dtype, out [N, Ho, Wo, C] of its dtype apart
// from x, a positive window, stride and dilation, and padding of at most
// half the window (torch's rule).
func MaxPool2D(op string, be kernels.Backend, out, x *kernels.Tensor, p kernels.PoolParams) (kernels.PoolDims, error) {
	c := Op(op).Tensor("out", out, be).Tensor("x", x, be)
	if err := c.Err(); err != nil {
		return kernels.PoolDims{}, err
	}
	xs := x.Shape()
	c.DType("x", x, kernels.FloatTypes...).SameDType("out", out, "x", x).
		That(len(xs) == 4, kernels.ErrShape, "x has shape %v, want [N H W C] (NHWC)", xs)
	if err := c.Err(); err != nil {
		return kernels.PoolDims{}, err
	}
	g := p.Dims(xs)
	for i := range 2 {
		c.That(g.Kernel[i] > 0, kernels.ErrValue, "kernel %v, want positive sizes", p.Kernel).
			That(g.Stride[i] > 0, kernels.ErrValue, "stride %v, want positive values", p.Stride).
			That(g.Dilation[i] > 0, kernels.ErrValue, "dilation %v, want positive values", p.Dilation).
			That(g.Pad[i] >= 0 && g.Pad[i] <= g.Kernel[i]/2, kernels.ErrValue,
				"padding %v, want between 0 and half the kernel %v", p.Pad, p.Kernel)
	}
	if err := c.Err(); err != nil {
		return kernels.PoolDims{}, err
	}
	if err := c.That(g.Ho > 0 && g.Wo > 0, kernels.ErrShape, "x %v is smaller than the %v window (dilation %v, padding %v)",
		xs, g.Kernel, g.Dilation, g.Pad).
		Shape("out", out, g.N, g.Ho, g.Wo, g.C).
		That(!sameStorage(out, x), kernels.ErrValue, "out is x's storage, want a separate tensor").Err(); err != nil {
		return kernels.PoolDims{}, err
	}
	return g, nil
}

// GlobalAvgPool validates the arguments of kernels.Vision.GlobalAvgPool: x
// [N, H, W, C] of a float dtype with H·W > 0 and out [N, C] of its dtype.
// It returns N, H·W and C.
func GlobalAvgPool(op string, be kernels.Backend, out, x *kernels.Tensor) (n, hw, ch int, err error) {
	c := Op(op).Tensor("out", out, be).Tensor("x", x, be)
	if err := c.Err(); err != nil {
		return 0, 0, 0, err
	}
	xs := x.Shape()
	c.DType("x", x, kernels.FloatTypes...).SameDType("out", out, "x", x).
		That(len(xs) == 4, kernels.ErrShape, "x has shape %v, want [N H W C] (NHWC)", xs)
	if err := c.Err(); err != nil {
		return 0, 0, 0, err
	}
	if err := c.That(xs[1]*xs[2] > 0, kernels.ErrShape, "x has shape %v, an empty image", xs).
		Shape("out", out, xs[0], xs[3]).Err(); err != nil {
		return 0, 0, 0, err
	}
	return xs[0], xs[1] * xs[2], xs[3], nil
}
