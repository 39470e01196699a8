package kernels

// Argument checks of the Vision op group, shared by its backends like the
// CheckX functions of validate.go.

// ConvDims is the geometry of a valid Conv2D call: x [N, H, W, Ci], w
// [Co, Kh, Kw, Ci/Groups], out [N, Ho, Wo, Co]. Pairs are (height, width)
// with the defaults of ConvParams resolved.
type ConvDims struct {
	N, H, W, Ci, Co, Kh, Kw, Ho, Wo, Groups int
	Stride, Pad, Dilation                   [2]int
}

// M is the number of output pixels, the rows of the implicit GEMM.
func (g ConvDims) M() int { return g.N * g.Ho * g.Wo }

// K is the reduction length of one output: Kh·Kw·Ci/Groups.
func (g ConvDims) K() int { return g.Kh * g.Kw * g.Ci / g.Groups }

// PointwiseGEMM reports whether the convolution is a plain matrix product
// [N·H·W, Ci]·[Ci, Co] of the NHWC data: 1×1, stride 1, no padding, one
// group.
func (g ConvDims) PointwiseGEMM() bool {
	return g.Kh == 1 && g.Kw == 1 && g.Stride == [2]int{1, 1} && g.Pad == [2]int{} && g.Groups == 1
}

// FLOPs is 2·M·Co·K, the multiply-adds of the convolution counted twice.
func (g ConvDims) FLOPs() float64 { return 2 * float64(g.M()) * float64(g.Co) * float64(g.K()) }

// Dims is the geometry of a convolution of x [N, H, W, Ci] by w [Co, Kh,
// Kw, Ci/G] (both 4-D) under p, its defaults resolved and Ho, Wo
// computed; CheckConv2D says whether it is valid.
func (p ConvParams) Dims(x, w Shape) ConvDims {
	g := ConvDims{N: x[0], H: x[1], W: x[2], Ci: x[3], Co: w[0], Kh: w[1], Kw: w[2], Groups: orOne(p.Groups), Pad: p.Pad}
	for i := range 2 {
		g.Stride[i], g.Dilation[i] = orOne(p.Stride[i]), orOne(p.Dilation[i])
	}
	g.Ho = ConvOutSize(g.H, g.Kh, g.Stride[0], g.Pad[0], g.Dilation[0])
	g.Wo = ConvOutSize(g.W, g.Kw, g.Stride[1], g.Pad[1], g.Dilation[1])
	return g
}

// CheckConv2D validates the arguments of Vision.Conv2D: x [N, H, W, Ci] of
// a float dtype, w [Co, Kh, Kw, Ci/Groups], out [N, Ho, Wo, Co], the
// optional bias [Co] and residual (out's shape), all of x's dtype; strides,
// dilations and groups positive, padding not negative, groups dividing Ci
// and Co, a window that fits, a known activation, and out apart from x and
// w.
func CheckConv2D(op string, be Backend, out, x, w *Tensor, p ConvParams) (ConvDims, error) {
	c := Check(op).Tensor("out", out, be).Tensor("x", x, be).Tensor("w", w, be)
	if p.Bias != nil {
		c.Tensor("bias", p.Bias, be)
	}
	if p.Residual != nil {
		c.Tensor("residual", p.Residual, be)
	}
	if err := c.Err(); err != nil {
		return ConvDims{}, err
	}
	xs, ws := x.Shape(), w.Shape()
	c.DType("x", x, FloatTypes...).SameDType("w", w, "x", x).SameDType("out", out, "x", x).
		That(len(xs) == 4, ErrShape, "x has shape %v, want [N H W C] (NHWC)", xs).
		That(len(ws) == 4, ErrShape, "w has shape %v, want [Co Kh Kw Ci/groups]", ws).
		That(validAct(p.Act), ErrValue, "unknown activation %d", p.Act)
	if err := c.Err(); err != nil {
		return ConvDims{}, err
	}
	g := checkConvGeometry(c, out, xs, ws, p)
	c.That(!sameStorage(out, x), ErrValue, "out is x's storage, want a separate tensor").
		That(!sameStorage(out, w), ErrValue, "out is w's storage, want a separate tensor")
	if p.Bias != nil {
		c.SameDType("bias", p.Bias, "x", x).Shape("bias", p.Bias, g.Co)
	}
	if p.Residual != nil {
		c.SameDType("residual", p.Residual, "x", x).Shape("residual", p.Residual, g.N, g.Ho, g.Wo, g.Co).
			That(!sameStorage(p.Residual, x), ErrValue, "residual is x's storage, want a separate tensor")
	}
	if err := c.Err(); err != nil {
		return ConvDims{}, err
	}
	return g, nil
}

// checkConvGeometry validates the geometry of a convolution of x by w
// (shapes xs and ws, both 4-D) under p, for Conv2D and QConv2D: strides
// and dilations positive, padding not negative, groups positive and
// dividing Ci and Co, w's channels per group, a window that fits, and
// out [N, Ho, Wo, Co]. It returns the geometry, valid when c has no error.
func checkConvGeometry(c *Checker, out *Tensor, xs, ws Shape, p ConvParams) ConvDims {
	g := p.Dims(xs, ws)
	for i := range 2 {
		c.That(g.Stride[i] > 0, ErrValue, "stride %v, want positive values", p.Stride).
			That(g.Dilation[i] > 0, ErrValue, "dilation %v, want positive values", p.Dilation).
			That(g.Pad[i] >= 0, ErrValue, "padding %v, want no negative value", p.Pad)
	}
	c.That(g.Groups > 0, ErrValue, "groups %d, want a positive count", p.Groups)
	if c.Err() != nil {
		return g
	}
	c.That(g.Ci%g.Groups == 0 && g.Co%g.Groups == 0, ErrShape,
		"%d groups do not divide the %d input and %d output channels", g.Groups, g.Ci, g.Co).
		That(ws[3]*g.Groups == g.Ci, ErrShape, "w has shape %v: %d input channels per group, want %d/%d = %d",
			ws, ws[3], g.Ci, g.Groups, g.Ci/g.Groups).
		That(g.Kh > 0 && g.Kw > 0 && g.Co > 0, ErrShape, "w has shape %v, want no empty dimension", ws)
	if c.Err() != nil {
		return g
	}
	c.That(g.Ho > 0 && g.Wo > 0, ErrShape, "x %v is smaller than the %d×%d window (dilation %v, padding %v)",
		xs, g.Kh, g.Kw, g.Dilation, g.Pad).
		Shape("out", out, g.N, g.Ho, g.Wo, g.Co)
	return g
}

// PoolDims is the geometry of a valid MaxPool2D call: x [N, H, W, C] and
// out [N, Ho, Wo, C], with the defaults of PoolParams resolved.
type PoolDims struct {
	N, H, W, C, Ho, Wo            int
	Kernel, Stride, Pad, Dilation [2]int
}

// Dims is the geometry of max pooling x [N, H, W, C] (4-D) under p, its
// defaults resolved and Ho, Wo computed where the strides are positive;
// CheckMaxPool2D says whether it is valid.
func (p PoolParams) Dims(x Shape) PoolDims {
	g := PoolDims{N: x[0], H: x[1], W: x[2], C: x[3], Kernel: p.Kernel, Pad: p.Pad}
	for i := range 2 {
		g.Stride[i], g.Dilation[i] = p.Stride[i], orOne(p.Dilation[i])
		if g.Stride[i] == 0 {
			g.Stride[i] = g.Kernel[i]
		}
	}
	if g.Stride[0] > 0 && g.Stride[1] > 0 {
		g.Ho = ConvOutSize(g.H, g.Kernel[0], g.Stride[0], g.Pad[0], g.Dilation[0])
		g.Wo = ConvOutSize(g.W, g.Kernel[1], g.Stride[1], g.Pad[1], g.Dilation[1])
	}
	return g
}

// CheckMaxPool2D validates the arguments of Vision.MaxPool2D: x
// [N, H, W, C] of a float dtype, out [N, Ho, Wo, C] of its dtype apart
// from x, a positive window, stride and dilation, and padding of at most
// half the window (torch's rule).
func CheckMaxPool2D(op string, be Backend, out, x *Tensor, p PoolParams) (PoolDims, error) {
	c := Check(op).Tensor("out", out, be).Tensor("x", x, be)
	if err := c.Err(); err != nil {
		return PoolDims{}, err
	}
	xs := x.Shape()
	c.DType("x", x, FloatTypes...).SameDType("out", out, "x", x).
		That(len(xs) == 4, ErrShape, "x has shape %v, want [N H W C] (NHWC)", xs)
	if err := c.Err(); err != nil {
		return PoolDims{}, err
	}
	g := p.Dims(xs)
	for i := range 2 {
		c.That(g.Kernel[i] > 0, ErrValue, "kernel %v, want positive sizes", p.Kernel).
			That(g.Stride[i] > 0, ErrValue, "stride %v, want positive values", p.Stride).
			That(g.Dilation[i] > 0, ErrValue, "dilation %v, want positive values", p.Dilation).
			That(g.Pad[i] >= 0 && g.Pad[i] <= g.Kernel[i]/2, ErrValue,
				"padding %v, want between 0 and half the kernel %v", p.Pad, p.Kernel)
	}
	if err := c.Err(); err != nil {
		return PoolDims{}, err
	}
	if err := c.That(g.Ho > 0 && g.Wo > 0, ErrShape, "x %v is smaller than the %v window (dilation %v, padding %v)",
		xs, g.Kernel, g.Dilation, g.Pad).
		Shape("out", out, g.N, g.Ho, g.Wo, g.C).
		That(!sameStorage(out, x), ErrValue, "out is x's storage, want a separate tensor").Err(); err != nil {
		return PoolDims{}, err
	}
	return g, nil
}

// CheckGlobalAvgPool validates the arguments of Vision.GlobalAvgPool: x
// [N, H, W, C] of a float dtype with H·W > 0 and out [N, C] of its dtype.
// It returns N, H·W and C.
func CheckGlobalAvgPool(op string, be Backend, out, x *Tensor) (n, hw, ch int, err error) {
	c := Check(op).Tensor("out", out, be).Tensor("x", x, be)
	if err := c.Err(); err != nil {
		return 0, 0, 0, err
	}
	xs := x.Shape()
	c.DType("x", x, FloatTypes...).SameDType("out", out, "x", x).
		That(len(xs) == 4, ErrShape, "x has shape %v, want [N H W C] (NHWC)", xs)
	if err := c.Err(); err != nil {
		return 0, 0, 0, err
	}
	if err := c.That(xs[1]*xs[2] > 0, ErrShape, "x has shape %v, an empty image", xs).
		Shape("out", out, xs[0], xs[3]).Err(); err != nil {
		return 0, 0, 0, err
	}
	return xs[0], xs[1] * xs[2], xs[3], nil
}
