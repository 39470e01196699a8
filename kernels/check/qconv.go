package check

import "github.com/zbench/zbench/kernels"

// Argument checks of the QuantConv op group.

// QConvDims is the geometry of a valid QConv2D call: ConvDims, and
// whether WScale has one scale per output channel.
type QConvDims struct {
	kernels.ConvDims
	WRowScale bool
}

// QConv2D validates the arguments of kernels.QuantConv.QConv2D: x I8
// [N, H, W, Ci], w I8 [Co, Kh, Kw, Ci/Groups] with K = Kh·Kw·Ci/Groups at
// most QConvMaxK, out [N, Ho, Wo, Co] of F32, F16, BF16, I8 or I32 apart
// from x and w, Conv2D's rules on strides, padding, dilation, groups and
// the window, and a known activation. An I32 out takes no scale, bias,
// residual, activation or OutScale; any other requires XScale F32 [1] and
// WScale F32 [1] or [Co], and takes an optional Bias F32 [Co]. A float out
// may have a Residual of its shape and dtype (out itself or apart from
// x); an I8 out takes none, and needs OutScale F32 [1], which only it
// takes.
func QConv2D(op string, be kernels.Backend, out, x, w *kernels.Tensor, p kernels.QConvParams) (QConvDims, error) {
	c := Op(op).Tensor("out", out, be).Tensor("x", x, be).Tensor("w", w, be)
	for _, t := range []struct {
		name string
		t    *kernels.Tensor
	}{{"XScale", p.XScale}, {"WScale", p.WScale}, {"Bias", p.Bias}, {"Residual", p.Residual}, {"OutScale", p.OutScale}} {
		if t.t != nil {
			c.Tensor(t.name, t.t, be)
		}
	}
	if err := c.Err(); err != nil {
		return QConvDims{}, err
	}
	xs, ws := x.Shape(), w.Shape()
	c.DType("x", x, kernels.I8).DType("w", w, kernels.I8).DType("out", out, kernels.F32, kernels.F16, kernels.BF16, kernels.I8, kernels.I32).
		That(len(xs) == 4, kernels.ErrShape, "x has shape %v, want [N H W C] (NHWC)", xs).
		That(len(ws) == 4, kernels.ErrShape, "w has shape %v, want [Co Kh Kw Ci/groups]", ws).
		That(validAct(p.Act), kernels.ErrValue, "unknown activation %d", p.Act)
	if err := c.Err(); err != nil {
		return QConvDims{}, err
	}
	g := QConvDims{ConvDims: convGeometry(c, out, xs, ws, p.Conv())}
	if err := c.Err(); err != nil {
		return QConvDims{}, err
	}
	c.That(g.K() <= kernels.QConvMaxK, kernels.ErrShape, "w has shape %v: K = %d·%d·%d = %d, want at most %d for exact int32 sums",
		ws, g.Kh, g.Kw, ws[3], g.K(), kernels.QConvMaxK).
		That(!sameStorage(out, x), kernels.ErrValue, "out is x's storage, want a separate tensor").
		That(!sameStorage(out, w), kernels.ErrValue, "out is w's storage, want a separate tensor")
	if err := c.Err(); err != nil {
		return QConvDims{}, err
	}
	if out.DType() == kernels.I32 {
		c.That(p.XScale == nil && p.WScale == nil && p.Bias == nil && p.Residual == nil && p.OutScale == nil && p.Act == kernels.ActNone,
			kernels.ErrValue, "out is int32 (the raw sums): scales, bias, residual, OutScale and activation must be unset")
		return g, c.Err()
	}
	c.That(p.XScale != nil && p.WScale != nil, kernels.ErrValue, "XScale and WScale are required unless out is int32")
	if err := c.Err(); err != nil {
		return QConvDims{}, err
	}
	c.DType("XScale", p.XScale, kernels.F32).Shape("XScale", p.XScale, 1)
	g.WRowScale = scaleTensor(c, "WScale", p.WScale, g.Co)
	if p.Bias != nil {
		c.DType("Bias", p.Bias, kernels.F32).Shape("Bias", p.Bias, g.Co)
	}
	if out.DType() == kernels.I8 {
		c.That(p.Residual == nil, kernels.ErrValue, "out is int8: a residual needs a float out").
			That(p.OutScale != nil, kernels.ErrValue, "out is int8: OutScale is required")
		if p.OutScale != nil {
			c.DType("OutScale", p.OutScale, kernels.F32).Shape("OutScale", p.OutScale, 1)
		}
	} else {
		c.That(p.OutScale == nil, kernels.ErrValue, "OutScale is only for an int8 out, and out is %v", out.DType())
	}
	if p.Residual != nil {
		c.SameDType("Residual", p.Residual, "out", out).Shape("Residual", p.Residual, g.N, g.Ho, g.Wo, g.Co).
			That(!sameStorage(p.Residual, x), kernels.ErrValue, "Residual is x's storage, want out or a separate tensor")
	}
	if err := c.Err(); err != nil {
		return QConvDims{}, err
	}
	return g, nil
}
