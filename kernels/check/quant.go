package check

import "github.com/zbench/zbench/kernels"

// Argument checks of the Quant op group.

// QuantDims is the geometry of a valid Quantize or Dequantize call:
// [Rows, K] with one scale or one per row.
type QuantDims struct {
	Rows, K int
	PerRow  bool
}

// scaleTensor validates a scale tensor: F32, [1] or [rows].
func scaleTensor(c *Checker, name string, s *kernels.Tensor, rows int) (perRow bool) {
	c.DType(name, s, kernels.F32)
	n := s.Len()
	c.That(len(s.Shape()) == 1 && (n == 1 || n == rows), kernels.ErrShape,
		"%s has shape %v, want [1] (per tensor) or [%d] (per row)", name, s.Shape(), rows)
	return n == rows && rows != 1
}

// Quantize validates the arguments of kernels.Quant.Quantize: x of a float
// dtype, q I8 of x's shape, scale F32 [1] or [rows] ([rows] when dynamic).
func Quantize(op string, be kernels.Backend, q, scale, x *kernels.Tensor, dynamic bool) (QuantDims, error) {
	c := Op(op).Tensor("q", q, be).Tensor("scale", scale, be).Tensor("x", x, be)
	if err := c.Err(); err != nil {
		return QuantDims{}, err
	}
	xs := x.Shape()
	c.DType("x", x, kernels.FloatTypes...).Rank("x", x, 1).DType("q", q, kernels.I8).
		That(q.Shape().Equal(xs), kernels.ErrShape, "q has shape %v, want x's %v", q.Shape(), xs)
	if err := c.Err(); err != nil {
		return QuantDims{}, err
	}
	g := QuantDims{Rows: xs.Rows(), K: xs.Last()}
	g.PerRow = scaleTensor(c, "scale", scale, g.Rows)
	if dynamic {
		g.PerRow = true
		c.Shape("scale", scale, g.Rows)
	}
	return g, c.Err()
}

// Dequantize validates the arguments of kernels.Quant.Dequantize: q I8,
// scale F32 [1] or [rows], out of a float dtype and q's shape.
func Dequantize(op string, be kernels.Backend, out, q, scale *kernels.Tensor) (QuantDims, error) {
	c := Op(op).Tensor("out", out, be).Tensor("q", q, be).Tensor("scale", scale, be)
	if err := c.Err(); err != nil {
		return QuantDims{}, err
	}
	qs := q.Shape()
	c.DType("q", q, kernels.I8).Rank("q", q, 1).DType("out", out, kernels.FloatTypes...).
		That(out.Shape().Equal(qs), kernels.ErrShape, "out has shape %v, want q's %v", out.Shape(), qs)
	if err := c.Err(); err != nil {
		return QuantDims{}, err
	}
	g := QuantDims{Rows: qs.Rows(), K: qs.Last()}
	g.PerRow = scaleTensor(c, "scale", scale, g.Rows)
	return g, c.Err()
}

// QMatMulDims is the geometry of a valid QMatMul call: a [M, K], b [N, K],
// out [M, N], and which scales are per row.
type QMatMulDims struct {
	M, N, K              int
	ARowScale, BRowScale bool
}

// QMatMul validates the arguments of kernels.Quant.QMatMul.
func QMatMul(op string, be kernels.Backend, out, a, b *kernels.Tensor, p kernels.QMatMulParams) (QMatMulDims, error) {
	c := Op(op).Tensor("out", out, be).Tensor("a", a, be).Tensor("b", b, be)
	for _, t := range []struct {
		name string
		t    *kernels.Tensor
	}{{"AScale", p.AScale}, {"BScale", p.BScale}, {"Bias", p.Bias}, {"OutScale", p.OutScale}} {
		if t.t != nil {
			c.Tensor(t.name, t.t, be)
		}
	}
	if err := c.Err(); err != nil {
		return QMatMulDims{}, err
	}
	as, bs, outs := a.Shape(), b.Shape(), out.Shape()
	c.DType("a", a, kernels.I8).DType("b", b, kernels.I8).Rank("a", a, 1).
		That(len(bs) == 2, kernels.ErrShape, "b has shape %v, want [N K] (the weight's [out, in])", bs).
		DType("out", out, kernels.F32, kernels.F16, kernels.BF16, kernels.I8, kernels.I32).
		That(validAct(p.Act), kernels.ErrValue, "unknown activation %d", p.Act)
	if err := c.Err(); err != nil {
		return QMatMulDims{}, err
	}
	g := QMatMulDims{M: as.Rows(), K: as.Last(), N: bs[0]}
	want := append(kernels.Shape{}, as[:len(as)-1]...)
	want = append(want, g.N)
	c.That(bs[1] == g.K, kernels.ErrShape, "b has shape %v, want [N %d] (a's K)", bs, g.K).
		That(g.K <= kernels.QMatMulMaxK, kernels.ErrShape, "K is %d, more than %d (an int32 sum of int8 products could overflow)", g.K, kernels.QMatMulMaxK).
		That(outs.Equal(want), kernels.ErrShape, "out has shape %v, want %v", outs, want)
	if err := c.Err(); err != nil {
		return QMatMulDims{}, err
	}
	if out.DType() == kernels.I32 {
		c.That(p.AScale == nil && p.BScale == nil && p.Bias == nil && p.OutScale == nil && p.Act == kernels.ActNone, kernels.ErrValue,
			"out is int32 (the raw sums): scales, bias, OutScale and activation must be unset")
		return g, c.Err()
	}
	c.That(p.AScale != nil && p.BScale != nil, kernels.ErrValue, "AScale and BScale are required unless out is int32")
	if err := c.Err(); err != nil {
		return QMatMulDims{}, err
	}
	g.ARowScale = scaleTensor(c, "AScale", p.AScale, g.M)
	g.BRowScale = scaleTensor(c, "BScale", p.BScale, g.N)
	if p.Bias != nil {
		c.DType("Bias", p.Bias, kernels.F32).Shape("Bias", p.Bias, g.N)
	}
	if out.DType() == kernels.I8 {
		c.That(p.OutScale != nil, kernels.ErrValue, "out is int8: OutScale is required")
		if p.OutScale != nil {
			c.DType("OutScale", p.OutScale, kernels.F32).Shape("OutScale", p.OutScale, 1)
		}
	} else {
		c.That(p.OutScale == nil, kernels.ErrValue, "OutScale is only for an int8 out, and out is %v", out.DType())
	}
	return g, c.Err()
}
