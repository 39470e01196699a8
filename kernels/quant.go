package kernels

// Quant is the op group of int8 inference: symmetric quantization of float
// tensors to int8, its inverse, and the int8 matrix product with int32
// accumulation and a float epilogue. A backend adopts it by implementing
// every method; kerneltest.TestQuant is its conformance suite. Models find
// it with a type assertion on the Backend and fail with an error naming the
// backend when it is absent.
//
// The scheme is symmetric with the narrow range (TensorRT's, and the
// compressed-tensors "int8 symmetric" layout's values): a real value x with
// scale s is stored as q = clamp(round(x/s), −127, 127), rounding half to
// even as torch.quantize_per_tensor does, and read back as q·s. Scales are
// F32, either one per tensor (shape [1]) or one per row: per token for
// activations [rows…, K] (shape [rows]) and per output channel for weights
// [N, K] (shape [N]). Zero points are always 0.
type Quant interface {
	// Quantize sets q (I8) to x (F32, F16 or BF16, [rows…, K]) divided by
	// its scale, rounded and clamped as above. With dynamic false, scale is
	// read: F32 [1] (static per-tensor, from calibration) or [rows]. With
	// dynamic true, scale is F32 [rows] and written first, per row r
	//
	//	scale[r] = max_k |x[r, k]| / 127   (1 for a row of zeros)
	//
	// (dynamic per-token quantization); a NaN in a row makes its scale
	// NaN and its values 0. q has x's shape.
	Quantize(q, scale, x *Tensor, dynamic bool) error
	// Dequantize sets out (F32, F16 or BF16) = q·scale for q (I8,
	// [rows…, K]) and scale F32 [1] or [rows], rounded once to out's
	// dtype. out has q's shape.
	Dequantize(out, q, scale *Tensor) error
	// QMatMul multiplies a (I8, [rows…, K]) by the transpose of b (I8,
	// [N, K]: nn.Linear's weight layout) into out ([rows…, N]), summing
	// the products exactly in int32; M is the product of a's leading
	// dimensions. With out I32 the sums are the result (no scale, bias
	// or activation may be given). Otherwise, with acc the int32 sum,
	//
	//	y[m, n] = act(float32(acc)·(AScale[m]·BScale[n]) + Bias[n])
	//
	// in float32, each scale F32 [1] (shared) or per row ([M] for
	// AScale, [N] for BScale), Bias optional F32 [N]; out F32, F16 or
	// BF16 receives y rounded once, and out I8 receives y requantized
	// with OutScale (F32 [1]) as Quantize does. K may be any size up to
	// QMatMulMaxK.
	QMatMul(out, a, b *Tensor, p QMatMulParams) error
}

// QMatMulParams qualifies Quant.QMatMul.
type QMatMulParams struct {
	AScale, BScale *Tensor    // F32 [1] or per row; required unless out is I32
	Bias           *Tensor    // optional F32 [N]
	Act            Activation // optional epilogue
	OutScale       *Tensor    // F32 [1]; required exactly when out is I8
}

// QMatMulMaxK is the longest reduction QMatMul takes: K·128² < 2³¹, so
// that no sum of int8 products can leave int32.
const QMatMulMaxK = (1<<31 - 1) / (128 * 128)

// QMax is the largest magnitude of the symmetric int8 scheme: values are
// clamped to [−QMax, QMax].
const QMax = 127

// QuantizeValue is the scheme's rounding of one value on the host: x/s
// rounded half to even and clamped to [−QMax, QMax]; NaN gives 0.
func QuantizeValue(x, s float32) int8 {
	v := I8FromFloat32(x / s)
	return max(v, -QMax)
}

// QuantDims is the geometry of a valid Quantize or Dequantize call:
// [Rows, K] with one scale or one per row.
type QuantDims struct {
	Rows, K int
	PerRow  bool
}

// checkScale validates a scale tensor: F32, [1] or [rows].
func checkScale(c *Checker, name string, s *Tensor, rows int) (perRow bool) {
	c.DType(name, s, F32)
	n := s.Len()
	c.That(len(s.Shape()) == 1 && (n == 1 || n == rows), ErrShape,
		"%s has shape %v, want [1] (per tensor) or [%d] (per row)", name, s.Shape(), rows)
	return n == rows && rows != 1
}

// CheckQuantize validates the arguments of Quant.Quantize: x of a float
// dtype, q I8 of x's shape, scale F32 [1] or [rows] ([rows] when dynamic).
func CheckQuantize(op string, be Backend, q, scale, x *Tensor, dynamic bool) (QuantDims, error) {
	c := Check(op).Tensor("q", q, be).Tensor("scale", scale, be).Tensor("x", x, be)
	if err := c.Err(); err != nil {
		return QuantDims{}, err
	}
	xs := x.Shape()
	c.DType("x", x, FloatTypes...).Rank("x", x, 1).DType("q", q, I8).
		That(q.Shape().Equal(xs), ErrShape, "q has shape %v, want x's %v", q.Shape(), xs)
	if err := c.Err(); err != nil {
		return QuantDims{}, err
	}
	g := QuantDims{Rows: xs.Rows(), K: xs.Last()}
	g.PerRow = checkScale(c, "scale", scale, g.Rows)
	if dynamic {
		g.PerRow = true
		c.Shape("scale", scale, g.Rows)
	}
	return g, c.Err()
}

// CheckDequantize validates the arguments of Quant.Dequantize: q I8,
// scale F32 [1] or [rows], out of a float dtype and q's shape.
func CheckDequantize(op string, be Backend, out, q, scale *Tensor) (QuantDims, error) {
	c := Check(op).Tensor("out", out, be).Tensor("q", q, be).Tensor("scale", scale, be)
	if err := c.Err(); err != nil {
		return QuantDims{}, err
	}
	qs := q.Shape()
	c.DType("q", q, I8).Rank("q", q, 1).DType("out", out, FloatTypes...).
		That(out.Shape().Equal(qs), ErrShape, "out has shape %v, want q's %v", out.Shape(), qs)
	if err := c.Err(); err != nil {
		return QuantDims{}, err
	}
	g := QuantDims{Rows: qs.Rows(), K: qs.Last()}
	g.PerRow = checkScale(c, "scale", scale, g.Rows)
	return g, c.Err()
}

// QMatMulDims is the geometry of a valid QMatMul call: a [M, K], b [N, K],
// out [M, N], and which scales are per row.
type QMatMulDims struct {
	M, N, K              int
	ARowScale, BRowScale bool
}

// CheckQMatMul validates the arguments of Quant.QMatMul.
func CheckQMatMul(op string, be Backend, out, a, b *Tensor, p QMatMulParams) (QMatMulDims, error) {
	c := Check(op).Tensor("out", out, be).Tensor("a", a, be).Tensor("b", b, be)
	for _, t := range []struct {
		name string
		t    *Tensor
	}{{"AScale", p.AScale}, {"BScale", p.BScale}, {"Bias", p.Bias}, {"OutScale", p.OutScale}} {
		if t.t != nil {
			c.Tensor(t.name, t.t, be)
		}
	}
	if err := c.Err(); err != nil {
		return QMatMulDims{}, err
	}
	as, bs, outs := a.Shape(), b.Shape(), out.Shape()
	c.DType("a", a, I8).DType("b", b, I8).Rank("a", a, 1).
		That(len(bs) == 2, ErrShape, "b has shape %v, want [N K] (the weight's [out, in])", bs).
		DType("out", out, F32, F16, BF16, I8, I32).
		That(validAct(p.Act), ErrValue, "unknown activation %d", p.Act)
	if err := c.Err(); err != nil {
		return QMatMulDims{}, err
	}
	g := QMatMulDims{M: as.Rows(), K: as.Last(), N: bs[0]}
	want := append(Shape{}, as[:len(as)-1]...)
	want = append(want, g.N)
	c.That(bs[1] == g.K, ErrShape, "b has shape %v, want [N %d] (a's K)", bs, g.K).
		That(g.K <= QMatMulMaxK, ErrShape, "K is %d, more than %d (an int32 sum of int8 products could overflow)", g.K, QMatMulMaxK).
		That(outs.Equal(want), ErrShape, "out has shape %v, want %v", outs, want)
	if err := c.Err(); err != nil {
		return QMatMulDims{}, err
	}
	if out.DType() == I32 {
		c.That(p.AScale == nil && p.BScale == nil && p.Bias == nil && p.OutScale == nil && p.Act == ActNone, ErrValue,
			"out is int32 (the raw sums): scales, bias, OutScale and activation must be unset")
		return g, c.Err()
	}
	c.That(p.AScale != nil && p.BScale != nil, ErrValue, "AScale and BScale are required unless out is int32")
	if err := c.Err(); err != nil {
		return QMatMulDims{}, err
	}
	g.ARowScale = checkScale(c, "AScale", p.AScale, g.M)
	g.BRowScale = checkScale(c, "BScale", p.BScale, g.N)
	if p.Bias != nil {
		c.DType("Bias", p.Bias, F32).Shape("Bias", p.Bias, g.N)
	}
	if out.DType() == I8 {
		c.That(p.OutScale != nil, ErrValue, "out is int8: OutScale is required")
		if p.OutScale != nil {
			c.DType("OutScale", p.OutScale, F32).Shape("OutScale", p.OutScale, 1)
		}
	} else {
		c.That(p.OutScale == nil, ErrValue, "OutScale is only for an int8 out, and out is %v", out.DType())
	}
	return g, c.Err()
}
