package check

import (
	"fmt"

	"github.com/zbench/zbench/kernels"
)

// Argument checks of the Ops group, the operations every backend implements.

// MatMulDims is the geometry of a valid MatMul call.
type MatMulDims struct {
	// Batch is the number of products: the product of a's leading (batch)
	// dimensions, 1 when a is 2-D.
	Batch int
	// M, N and K are the sizes of one product: op(a) is [M, K], op(b)
	// [K, N] and out [M, N].
	M, N, K int
	// SharedB is set when b is 2-D while a has batch dimensions: the same b
	// then multiplies every batch entry.
	SharedB bool
}

// MatMulShared validates the arguments of kernels.Ops.MatMulShared: as
// many outputs as weights, at least one, each output and weight as MatMul
// with TransB takes them, every weight 2-D; it returns each product's
// geometry.
func MatMulShared(op string, be kernels.Backend, outs []*kernels.Tensor, a *kernels.Tensor, bs []*kernels.Tensor) ([]MatMulDims, error) {
	if err := Op(op).That(len(outs) == len(bs) && len(bs) > 0, kernels.ErrShape,
		"%d outputs for %d weights, want as many and at least one", len(outs), len(bs)).Err(); err != nil {
		return nil, err
	}
	ds := make([]MatMulDims, len(bs))
	for i := range bs {
		d, err := MatMul(fmt.Sprintf("%s (product %d)", op, i), be, outs[i], a, bs[i], kernels.MatMulParams{TransB: true})
		if err != nil {
			return nil, err
		}
		if err := Op(op).That(len(bs[i].Shape()) == 2, kernels.ErrShape,
			"weight %d has shape %v, want [N, K]", i, bs[i].Shape()).Err(); err != nil {
			return nil, err
		}
		ds[i] = d
	}
	return ds, nil
}

// MatMul validates the arguments of kernels.Ops.MatMul: a [batch…, M, K]
// (transposed [batch…, K, M]) of a float dtype, b [batch…, K, N] or [K, N]
// (transposed [.., N, K]), out [batch…, M, N], the optional bias [N], all of
// a's dtype, and a known activation.
func MatMul(op string, be kernels.Backend, out, a, b *kernels.Tensor, p kernels.MatMulParams) (MatMulDims, error) {
	c := Op(op).Tensor("out", out, be).Tensor("a", a, be).Tensor("b", b, be)
	if p.Bias != nil {
		c.Tensor("bias", p.Bias, be)
	}
	if c.Err() != nil {
		return MatMulDims{}, c.Err()
	}
	c.DType("a", a, kernels.FloatTypes...).SameDType("a", a, "b", b).SameDType("a", a, "out", out).
		Rank("a", a, 2).Rank("b", b, 2).
		That(validAct(p.Act), kernels.ErrValue, "unknown activation %d", p.Act)
	if p.Bias != nil {
		c.SameDType("a", a, "bias", p.Bias)
	}
	if c.Err() != nil {
		return MatMulDims{}, c.Err()
	}

	as, bs := a.Shape(), b.Shape()
	ra, rb := len(as), len(bs)
	batchDims := as[:ra-2]
	m, k := as[ra-2], as[ra-1]
	if p.TransA {
		m, k = k, m
	}
	kb, n := bs[rb-2], bs[rb-1]
	if p.TransB {
		kb, n = n, kb
	}
	shared := rb == 2
	c.That(shared || bs[:rb-2].Equal(batchDims), kernels.ErrShape,
		"b has shape %v, want 2 dimensions or the batch dimensions %v of a %v", bs, batchDims, as).
		That(kb == k, kernels.ErrShape, "inner dimensions differ: a %v (TransA=%v) has K=%d, b %v (TransB=%v) has K=%d",
			as, p.TransA, k, bs, p.TransB, kb).
		Shape("out", out, append(append([]int(nil), batchDims...), m, n)...)
	if p.Bias != nil {
		c.Shape("bias", p.Bias, n)
	}
	if c.Err() != nil {
		return MatMulDims{}, c.Err()
	}
	return MatMulDims{Batch: batchDims.Len(), M: m, N: n, K: k, SharedB: shared && ra > 2}, nil
}

// Add validates the arguments of kernels.Ops.Add: a of a float dtype, out of
// a's dtype and shape, and b of a's dtype with a's shape or a suffix of it.
// It returns the number of elements of a (and out) and of b, which is
// repeated over a's leading dimensions when nb < n.
func Add(op string, be kernels.Backend, out, a, b *kernels.Tensor) (n, nb int, err error) {
	c := Op(op).Tensor("out", out, be).Tensor("a", a, be).Tensor("b", b, be)
	if c.Err() != nil {
		return 0, 0, c.Err()
	}
	as, bs := a.Shape(), b.Shape()
	if err := c.DType("a", a, kernels.FloatTypes...).SameDType("a", a, "b", b).SameDType("a", a, "out", out).
		Shape("out", out, as...).
		That(len(bs) <= len(as) && bs.Equal(as[len(as)-len(bs):]), kernels.ErrShape,
			"b has shape %v, want a suffix of a's shape %v", bs, as).Err(); err != nil {
		return 0, 0, err
	}
	return a.Len(), b.Len(), nil
}

// Scale validates the arguments of kernels.Ops.Scale: x of a float dtype and
// out of x's dtype and shape. It returns the number of elements.
func Scale(op string, be kernels.Backend, out, x *kernels.Tensor, s float32) (n int, err error) {
	c := Op(op).Tensor("out", out, be).Tensor("x", x, be)
	if c.Err() != nil {
		return 0, c.Err()
	}
	if err := c.DType("x", x, kernels.FloatTypes...).SameDType("x", x, "out", out).Shape("out", out, x.Shape()...).Err(); err != nil {
		return 0, err
	}
	return x.Len(), nil
}

// Fill validates the arguments of kernels.Ops.Fill: out, of any dtype. It
// returns the number of elements.
func Fill(op string, be kernels.Backend, out *kernels.Tensor, v float32) (n int, err error) {
	if err := Op(op).Tensor("out", out, be).Err(); err != nil {
		return 0, err
	}
	return out.Len(), nil
}

// Cast validates the arguments of kernels.Ops.Cast: out of x's shape, both of
// any dtype. It returns the number of elements.
func Cast(op string, be kernels.Backend, out, x *kernels.Tensor) (n int, err error) {
	c := Op(op).Tensor("out", out, be).Tensor("x", x, be)
	if c.Err() != nil {
		return 0, c.Err()
	}
	if err := c.Shape("out", out, x.Shape()...).Err(); err != nil {
		return 0, err
	}
	return x.Len(), nil
}

// Act validates the arguments of kernels.Ops.Act: x of a float dtype, out of
// x's dtype and shape, and a known activation. It returns the number of
// elements.
func Act(op string, be kernels.Backend, out, x *kernels.Tensor, a kernels.Activation) (n int, err error) {
	c := Op(op).Tensor("out", out, be).Tensor("x", x, be)
	if c.Err() != nil {
		return 0, c.Err()
	}
	if err := c.DType("x", x, kernels.FloatTypes...).SameDType("x", x, "out", out).Shape("out", out, x.Shape()...).
		That(validAct(a), kernels.ErrValue, "unknown activation %d", a).Err(); err != nil {
		return 0, err
	}
	return x.Len(), nil
}

// ActBackward validates the arguments of kernels.Ops.ActBackward: x of a float
// dtype, dy and dx of x's dtype and shape, and a known activation. It
// returns the number of elements.
func ActBackward(op string, be kernels.Backend, dx, dy, x *kernels.Tensor, a kernels.Activation) (n int, err error) {
	c := Op(op).Tensor("dx", dx, be).Tensor("dy", dy, be).Tensor("x", x, be)
	if c.Err() != nil {
		return 0, c.Err()
	}
	if err := c.DType("x", x, kernels.FloatTypes...).SameDType("x", x, "dy", dy).SameDType("x", x, "dx", dx).
		Shape("dy", dy, x.Shape()...).Shape("dx", dx, x.Shape()...).
		That(validAct(a), kernels.ErrValue, "unknown activation %d", a).Err(); err != nil {
		return 0, err
	}
	return x.Len(), nil
}

// SumRows validates the arguments of kernels.Ops.SumRows: x [rows…, N] of a
// float dtype, at least 1-D, and out [N] of x's dtype. It returns the number
// of rows summed (the product of x's leading dimensions) and N.
func SumRows(op string, be kernels.Backend, out, x *kernels.Tensor) (rows, n int, err error) {
	c := Op(op).Tensor("out", out, be).Tensor("x", x, be)
	if c.Err() != nil {
		return 0, 0, c.Err()
	}
	if err := c.DType("x", x, kernels.FloatTypes...).SameDType("x", x, "out", out).Rank("x", x, 1).
		Shape("out", out, x.Shape().Last()).Err(); err != nil {
		return 0, 0, err
	}
	return x.Shape().Rows(), x.Shape().Last(), nil
}

// SwapAxesDims is the geometry of a valid SwapAxes call: x [A, B, C, D]
// and out [A, C, B, D].
type SwapAxesDims struct{ A, B, C, D int }

// SwapAxes validates the arguments of kernels.Ops.SwapAxes: x [A, B, C, D] of
// dtype F32, F16, BF16 or I32, and out [A, C, B, D] of x's dtype, not x's
// storage.
func SwapAxes(op string, be kernels.Backend, out, x *kernels.Tensor) (SwapAxesDims, error) {
	c := Op(op).Tensor("out", out, be).Tensor("x", x, be)
	if err := c.Err(); err != nil {
		return SwapAxesDims{}, err
	}
	xs := x.Shape()
	c.DType("x", x, kernels.F32, kernels.F16, kernels.BF16, kernels.I32).
		That(len(xs) == 4, kernels.ErrShape, "x has shape %v, want [A B C D]", xs)
	if err := c.Err(); err != nil {
		return SwapAxesDims{}, err
	}
	g := SwapAxesDims{A: xs[0], B: xs[1], C: xs[2], D: xs[3]}
	if err := c.SameDType("out", out, "x", x).Shape("out", out, g.A, g.C, g.B, g.D).
		That(!sameStorage(out, x), kernels.ErrValue, "out is x's storage, want a separate tensor (SwapAxes does not work in place)").
		Err(); err != nil {
		return SwapAxesDims{}, err
	}
	return g, nil
}

// RowDims is the geometry of an op over the rows of a tensor [rows…, D].
type RowDims struct {
	// Rows is the number of rows: the product of all but the innermost
	// dimension.
	Rows int
	// D is the innermost dimension, the length of each row.
	D int
}

// rowDims returns the row geometry of s.
func rowDims(s kernels.Shape) RowDims { return RowDims{Rows: s.Rows(), D: s.Last()} }

// norm checks the arguments LayerNorm and RMSNorm share: x of a float
// dtype, at least 1-D, out of x's dtype and shape, gamma [D] of x's dtype
// and eps ≥ 0.
func norm(op string, be kernels.Backend, out, x, gamma *kernels.Tensor, eps float32) *Checker {
	c := Op(op).Tensor("out", out, be).Tensor("x", x, be).Tensor("gamma", gamma, be)
	if c.Err() != nil {
		return c
	}
	return c.DType("x", x, kernels.FloatTypes...).Rank("x", x, 1).
		SameDType("out", out, "x", x).Shape("out", out, x.Shape()...).
		SameDType("gamma", gamma, "x", x).Shape("gamma", gamma, x.Shape().Last()).
		That(eps >= 0, kernels.ErrValue, "eps is %g, want ≥ 0", eps)
}

// LayerNorm validates the arguments of kernels.Ops.LayerNorm: x [rows…, D] of
// a float dtype, out of x's dtype and shape, gamma and the optional beta [D]
// of x's dtype, the optional mean and rstd F32 with one element per row,
// and eps ≥ 0.
func LayerNorm(op string, be kernels.Backend, out, mean, rstd, x, gamma, beta *kernels.Tensor, eps float32) (RowDims, error) {
	c := norm(op, be, out, x, gamma, eps)
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	g := rowDims(x.Shape())
	if beta != nil {
		c.Tensor("beta", beta, be).SameDType("beta", beta, "x", x).Shape("beta", beta, g.D)
	}
	if mean != nil {
		c.Tensor("mean", mean, be).DType("mean", mean, kernels.F32).Len("mean", mean, g.Rows)
	}
	if rstd != nil {
		c.Tensor("rstd", rstd, be).DType("rstd", rstd, kernels.F32).Len("rstd", rstd, g.Rows)
	}
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	return g, nil
}

// LayerNormBackward validates the arguments of kernels.Ops.LayerNormBackward:
// x [rows…, D] of a float dtype, dx and dy of x's dtype and shape, gamma and
// the optional dgamma and dbeta [D] of x's dtype, and mean and rstd F32 with
// one element per row.
func LayerNormBackward(op string, be kernels.Backend, dx, dgamma, dbeta, dy, x, gamma, mean, rstd *kernels.Tensor) (RowDims, error) {
	c := Op(op).
		Tensor("dx", dx, be).Tensor("dy", dy, be).Tensor("x", x, be).Tensor("gamma", gamma, be).
		Tensor("mean", mean, be).Tensor("rstd", rstd, be)
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	g := rowDims(x.Shape())
	c.DType("x", x, kernels.FloatTypes...).Rank("x", x, 1).
		SameDType("dx", dx, "x", x).Shape("dx", dx, x.Shape()...).
		SameDType("dy", dy, "x", x).Shape("dy", dy, x.Shape()...).
		SameDType("gamma", gamma, "x", x).Shape("gamma", gamma, g.D).
		DType("mean", mean, kernels.F32).Len("mean", mean, g.Rows).
		DType("rstd", rstd, kernels.F32).Len("rstd", rstd, g.Rows)
	if dgamma != nil {
		c.Tensor("dgamma", dgamma, be).SameDType("dgamma", dgamma, "x", x).Shape("dgamma", dgamma, g.D)
	}
	if dbeta != nil {
		c.Tensor("dbeta", dbeta, be).SameDType("dbeta", dbeta, "x", x).Shape("dbeta", dbeta, g.D)
	}
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	return g, nil
}

// RMSNorm validates the arguments of kernels.Ops.RMSNorm: x [rows…, D] of a
// float dtype, out of x's dtype and shape, gamma [D] of x's dtype and
// eps ≥ 0.
func RMSNorm(op string, be kernels.Backend, out, x, gamma *kernels.Tensor, eps float32) (RowDims, error) {
	if err := norm(op, be, out, x, gamma, eps).Err(); err != nil {
		return RowDims{}, err
	}
	return rowDims(x.Shape()), nil
}

// SoftmaxDims is the geometry of a valid Softmax call over x [B, …, Sq, Sk].
type SoftmaxDims struct {
	// Rows is the number of rows normalised: the product of all but the
	// innermost dimension of x.
	Rows int
	// Sq is the number of query rows of each [Sq, Sk] matrix, x's
	// second-to-last dimension (1 when x is 1-D): row r is query r % Sq
	// for the causal mask.
	Sq int
	// Sk is the row length, x's innermost dimension: the number of keys.
	Sk int
	// RowsPerBatch is the number of rows of one entry of x's leading
	// dimension B (Rows/B; Rows when x is 1-D): row r reads
	// KeyLens[r / RowsPerBatch].
	RowsPerBatch int
}

// keyLens checks the optional KeyLens tensor of p: I32 of shape
// [batch]. Its values are the backend's to check.
func keyLens(c *Checker, be kernels.Backend, p kernels.AttentionParams, batch int) *Checker {
	if t := p.KeyLens; t != nil {
		c.Tensor("KeyLens", t, be).DType("KeyLens", t, kernels.I32).Shape("KeyLens", t, batch)
	}
	return c
}

// Softmax validates the arguments of kernels.Ops.Softmax: x of a float dtype,
// at least 2-D when p.Causal or p.KeyLens asks for masks (else at least
// 1-D), out of x's dtype and shape, and the optional p.KeyLens I32 of shape
// [B], B being x's leading dimension. The backend checks that the lengths
// lie in [0, Sk].
func Softmax(op string, be kernels.Backend, out, x *kernels.Tensor, p kernels.AttentionParams) (SoftmaxDims, error) {
	c := Op(op).Tensor("out", out, be).Tensor("x", x, be)
	if err := c.Err(); err != nil {
		return SoftmaxDims{}, err
	}
	shape := x.Shape()
	minRank := 1
	if p.Causal || p.KeyLens != nil {
		minRank = 2
	}
	c.DType("x", x, kernels.FloatTypes...).Rank("x", x, minRank).
		SameDType("out", out, "x", x).Shape("out", out, shape...)
	if err := c.Err(); err != nil {
		return SoftmaxDims{}, err
	}
	g := SoftmaxDims{Rows: shape.Rows(), Sq: 1, Sk: shape.Last()}
	g.RowsPerBatch = g.Rows
	if len(shape) >= 2 {
		g.Sq, g.RowsPerBatch = shape[len(shape)-2], g.Rows/shape[0]
	}
	if err := keyLens(c, be, p, shape[0]).Err(); err != nil {
		return SoftmaxDims{}, err
	}
	return g, nil
}

// SoftmaxBackward validates the arguments of kernels.Ops.SoftmaxBackward: y of
// a float dtype, at least 1-D, and dy and dx of y's dtype and shape.
func SoftmaxBackward(op string, be kernels.Backend, dx, dy, y *kernels.Tensor) (RowDims, error) {
	c := Op(op).Tensor("dx", dx, be).Tensor("dy", dy, be).Tensor("y", y, be)
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	shape := y.Shape()
	c.DType("y", y, kernels.FloatTypes...).Rank("y", y, 1).
		SameDType("dy", dy, "y", y).Shape("dy", dy, shape...).
		SameDType("dx", dx, "y", y).Shape("dx", dx, shape...)
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	return rowDims(shape), nil
}

// attention checks q, k, v and p.KeyLens, which Attention and its
// backward share, and returns the geometry.
func attention(c *Checker, be kernels.Backend, q, k, v *kernels.Tensor, p kernels.AttentionParams) kernels.AttentionDims {
	c.Tensor("q", q, be).Tensor("k", k, be).Tensor("v", v, be)
	if c.Err() != nil {
		return kernels.AttentionDims{}
	}
	qs, ks := q.Shape(), k.Shape()
	c.DType("q", q, kernels.FloatTypes...).
		That(len(qs) == 4, kernels.ErrShape, "q has shape %v, want [B Hq Sq D]", qs).
		SameDType("k", k, "q", q).
		That(len(ks) == 4, kernels.ErrShape, "k has shape %v, want [B Hkv Sk D]", ks)
	if c.Err() != nil {
		return kernels.AttentionDims{}
	}
	g := kernels.AttentionDims{B: qs[0], Hq: qs[1], Sq: qs[2], D: qs[3], Hkv: ks[1], Sk: ks[2]}
	c.That(ks[0] == g.B && ks[3] == g.D, kernels.ErrShape,
		"k has shape %v, want [%d Hkv Sk %d] to match q %v", ks, g.B, g.D, qs).
		That(g.Hq%g.Hkv == 0, kernels.ErrShape,
			"q has %d heads, not a multiple of the %d KV heads of k", g.Hq, g.Hkv).
		SameDType("v", v, "q", q).Shape("v", v, ks...)
	if c.Err() != nil {
		return kernels.AttentionDims{}
	}
	keyLens(c, be, p, g.B)
	return g
}

// Attention validates the arguments of kernels.Ops.Attention: q [B, Hq, Sq, D]
// of a float dtype, k and v [B, Hkv, Sk, D] of q's dtype with Hq a multiple
// of Hkv, the optional p.KeyLens I32 [B], and out of q's dtype and shape.
// The backend checks that the lengths lie in [0, Sk].
func Attention(op string, be kernels.Backend, out, q, k, v *kernels.Tensor, p kernels.AttentionParams) (kernels.AttentionDims, error) {
	c := Op(op)
	g := attention(c, be, q, k, v, p)
	if err := c.Err(); err != nil {
		return kernels.AttentionDims{}, err
	}
	if err := c.Tensor("out", out, be).Err(); err != nil {
		return kernels.AttentionDims{}, err
	}
	if err := c.SameDType("out", out, "q", q).Shape("out", out, q.Shape()...).Err(); err != nil {
		return kernels.AttentionDims{}, err
	}
	return g, nil
}

// AttentionPacked validates the arguments of kernels.Ops.AttentionPacked:
// qkv [B, S, Hq+2·Hkv, D] of a float dtype, out [B, S, Hq, D] of its dtype
// with Hq ≥ 1 a multiple of Hkv ≥ 1, and the optional p.KeyLens I32 [B].
// The backend checks that the lengths lie in [0, S].
func AttentionPacked(op string, be kernels.Backend, out, qkv *kernels.Tensor, p kernels.AttentionParams) (kernels.AttentionDims, error) {
	c := Op(op).Tensor("qkv", qkv, be).Tensor("out", out, be)
	if err := c.Err(); err != nil {
		return kernels.AttentionDims{}, err
	}
	pk, po := qkv.Shape(), out.Shape()
	c.DType("qkv", qkv, kernels.FloatTypes...).SameDType("out", out, "qkv", qkv).
		That(len(pk) == 4, kernels.ErrShape, "qkv has shape %v, want [B S Hq+2·Hkv D]", pk).
		That(len(po) == 4, kernels.ErrShape, "out has shape %v, want [B S Hq D]", po)
	if err := c.Err(); err != nil {
		return kernels.AttentionDims{}, err
	}
	g := kernels.AttentionDims{B: pk[0], Sq: pk[1], Sk: pk[1], Hq: po[2], D: pk[3], Hkv: (pk[2] - po[2]) / 2}
	c.That(po[0] == g.B && po[1] == g.Sq && po[3] == g.D, kernels.ErrShape,
		"out has shape %v, want [%d %d Hq %d] to match qkv %v", po, g.B, g.Sq, g.D, pk).
		That(g.Hq >= 1 && g.Hkv >= 1 && pk[2] == g.Hq+2*g.Hkv && g.Hq%g.Hkv == 0, kernels.ErrShape,
			"qkv has %d heads and out %d: want out's Hq query heads then two sets of Hkv key and value heads, Hq a multiple of Hkv", pk[2], po[2])
	if err := c.Err(); err != nil {
		return kernels.AttentionDims{}, err
	}
	keyLens(c, be, p, g.B)
	return g, c.Err()
}

// AttentionBackward validates the arguments of kernels.Ops.AttentionBackward:
// q, k, v and p as Attention does, dout and dq of q's dtype and shape,
// and dk and dv of q's dtype and k's shape. The backend checks that the
// lengths of p.KeyLens lie in [0, Sk].
func AttentionBackward(op string, be kernels.Backend, dq, dk, dv, dout, q, k, v *kernels.Tensor, p kernels.AttentionParams) (kernels.AttentionDims, error) {
	c := Op(op)
	g := attention(c, be, q, k, v, p)
	if err := c.Err(); err != nil {
		return kernels.AttentionDims{}, err
	}
	if err := c.Tensor("dq", dq, be).Tensor("dk", dk, be).Tensor("dv", dv, be).Tensor("dout", dout, be).Err(); err != nil {
		return kernels.AttentionDims{}, err
	}
	c.SameDType("dout", dout, "q", q).Shape("dout", dout, q.Shape()...).
		SameDType("dq", dq, "q", q).Shape("dq", dq, q.Shape()...).
		SameDType("dk", dk, "q", q).Shape("dk", dk, k.Shape()...).
		SameDType("dv", dv, "q", q).Shape("dv", dv, k.Shape()...)
	if err := c.Err(); err != nil {
		return kernels.AttentionDims{}, err
	}
	return g, nil
}

// EmbeddingDims is the geometry of a valid Embedding or EmbeddingBackward
// call.
type EmbeddingDims struct {
	N int // number of ids: the elements of the ids tensor
	V int // vocabulary size: the rows of the table
	D int // embedding width: the columns of the table
}

// embedding checks what Embedding and its backward share: a table
// [V, D] of a float dtype, I32 ids of any shape, and rows [ids…, D] of the
// table's dtype.
func embedding(op string, tableName string, table *kernels.Tensor, rowsName string, rows, ids *kernels.Tensor) (EmbeddingDims, error) {
	ts := table.Shape()
	c := Op(op).DType(tableName, table, kernels.FloatTypes...).
		That(len(ts) == 2, kernels.ErrShape, "%s has shape %v, want [V D]", tableName, ts).
		DType("ids", ids, kernels.I32)
	if err := c.Err(); err != nil {
		return EmbeddingDims{}, err
	}
	g := EmbeddingDims{N: ids.Len(), V: ts[0], D: ts[1]}
	is := ids.Shape()
	want := append(append(make([]int, 0, len(is)+1), is...), g.D)
	if err := c.SameDType(rowsName, rows, tableName, table).Shape(rowsName, rows, want...).Err(); err != nil {
		return EmbeddingDims{}, err
	}
	return g, nil
}

// Embedding validates the arguments of kernels.Ops.Embedding: table [V, D] of a
// float dtype, ids I32 of any shape, and out [ids…, D] of the table's dtype.
// The backend checks that the ids lie in [0, V).
func Embedding(op string, be kernels.Backend, out, table, ids *kernels.Tensor) (EmbeddingDims, error) {
	if err := Op(op).Tensor("out", out, be).Tensor("table", table, be).Tensor("ids", ids, be).Err(); err != nil {
		return EmbeddingDims{}, err
	}
	return embedding(op, "table", table, "out", out, ids)
}

// EmbeddingBackward validates the arguments of kernels.Ops.EmbeddingBackward:
// dtable [V, D] of a float dtype, ids I32 of any shape, and dout [ids…, D]
// of dtable's dtype. The backend checks that the ids lie in [0, V).
func EmbeddingBackward(op string, be kernels.Backend, dtable, dout, ids *kernels.Tensor) (EmbeddingDims, error) {
	if err := Op(op).Tensor("dtable", dtable, be).Tensor("dout", dout, be).Tensor("ids", ids, be).Err(); err != nil {
		return EmbeddingDims{}, err
	}
	return embedding(op, "dtable", dtable, "dout", dout, ids)
}

// crossEntropy checks the arguments of CrossEntropy and its backward,
// out being loss or dlogits as outName says, and returns N and V.
func crossEntropy(op string, be kernels.Backend, outName string, out, logits, targets *kernels.Tensor) (n, v int, err error) {
	c := Op(op).Tensor(outName, out, be).Tensor("logits", logits, be).Tensor("targets", targets, be)
	if err := c.Err(); err != nil {
		return 0, 0, err
	}
	ls := logits.Shape()
	c.DType("logits", logits, kernels.FloatTypes...).
		That(len(ls) == 2, kernels.ErrShape, "logits has shape %v, want [N V]", ls).
		DType("targets", targets, kernels.I32)
	if err := c.Err(); err != nil {
		return 0, 0, err
	}
	n, v = ls[0], ls[1]
	c.Shape("targets", targets, n)
	if outName == "loss" {
		c.DType("loss", out, kernels.F32).Shape("loss", out, n)
	} else {
		c.SameDType(outName, out, "logits", logits).Shape(outName, out, ls...)
	}
	if err := c.Err(); err != nil {
		return 0, 0, err
	}
	return n, v, nil
}

// CrossEntropy validates the arguments of kernels.Ops.CrossEntropy: logits
// [N, V] of a float dtype, targets I32 [N] and loss F32 [N]. It returns N
// and V. The backend checks that each target lies in [0, V) or is
// IgnoreIndex.
func CrossEntropy(op string, be kernels.Backend, loss, logits, targets *kernels.Tensor) (n, v int, err error) {
	return crossEntropy(op, be, "loss", loss, logits, targets)
}

// CrossEntropyBackward validates the arguments of
// kernels.Ops.CrossEntropyBackward: logits [N, V] of a float dtype, targets I32
// [N] and dlogits of logits' dtype and shape. It returns N and V. The backend
// checks that each target lies in [0, V) or is IgnoreIndex.
func CrossEntropyBackward(op string, be kernels.Backend, dlogits, logits, targets *kernels.Tensor, scale float32) (n, v int, err error) {
	return crossEntropy(op, be, "dlogits", dlogits, logits, targets)
}

// AdamW validates the arguments of kernels.Ops.AdamW: param, grad, m and v F32
// with one shape, and hyper-parameters in range: Step ≥ 1, LR ≥ 0,
// 0 ≤ Beta1, Beta2 < 1, Eps > 0 and WeightDecay ≥ 0, all finite. It returns
// the number of elements.
func AdamW(op string, be kernels.Backend, param, grad, m, v *kernels.Tensor, p kernels.AdamWParams) (n int, err error) {
	c := Op(op).Tensor("param", param, be).Tensor("grad", grad, be).Tensor("m", m, be).Tensor("v", v, be)
	if err := c.Err(); err != nil {
		return 0, err
	}
	shape := param.Shape()
	c.DType("param", param, kernels.F32).
		DType("grad", grad, kernels.F32).Shape("grad", grad, shape...).
		DType("m", m, kernels.F32).Shape("m", m, shape...).
		DType("v", v, kernels.F32).Shape("v", v, shape...)
	if err := adamwParams(c, p).Err(); err != nil {
		return 0, err
	}
	return param.Len(), nil
}

// AdamWAll validates the arguments of kernels.Ops.AdamWAll: every
// parameter as AdamW's, except that Grad may be F16 or BF16, with an
// optional Copy of Param's shape in F16 or BF16, no tensor given twice
// (a message names the parameter by its index), and p as AdamW's.
func AdamWAll(op string, be kernels.Backend, ps []kernels.AdamWParam, p kernels.AdamWParams) error {
	c := Op(op)
	seen := map[*kernels.Tensor]bool{}
	for i, x := range ps {
		at := func(role string) string { return fmt.Sprintf("parameter %d's %s", i, role) }
		c.Tensor(at("param"), x.Param, be).Tensor(at("grad"), x.Grad, be).Tensor(at("m"), x.M, be).Tensor(at("v"), x.V, be)
		if x.Copy != nil {
			c.Tensor(at("copy"), x.Copy, be)
		}
		if err := c.Err(); err != nil {
			return err
		}
		shape := x.Param.Shape()
		c.DType(at("param"), x.Param, kernels.F32).
			DType(at("grad"), x.Grad, kernels.F32, kernels.F16, kernels.BF16).Shape(at("grad"), x.Grad, shape...).
			DType(at("m"), x.M, kernels.F32).Shape(at("m"), x.M, shape...).
			DType(at("v"), x.V, kernels.F32).Shape(at("v"), x.V, shape...)
		if x.Copy != nil {
			c.DType(at("copy"), x.Copy, kernels.F16, kernels.BF16).Shape(at("copy"), x.Copy, shape...)
		}
		for _, t := range []*kernels.Tensor{x.Param, x.Grad, x.M, x.V, x.Copy} {
			if t != nil {
				c.That(!seen[t], kernels.ErrValue, "parameter %d has a tensor given before", i)
				seen[t] = true
			}
		}
		if err := c.Err(); err != nil {
			return err
		}
	}
	return adamwParams(c, p).Err()
}

// adamwParams checks AdamW's hyper-parameters.
func adamwParams(c *Checker, p kernels.AdamWParams) *Checker {
	return c.That(p.Step >= 1, kernels.ErrValue, "Step is %d, want ≥ 1 (the 1-based number of the update)", p.Step).
		That(finite(p.LR) && p.LR >= 0, kernels.ErrValue, "LR is %g, want a finite value ≥ 0", p.LR).
		That(finite(p.Beta1) && p.Beta1 >= 0 && p.Beta1 < 1, kernels.ErrValue, "Beta1 is %g, want it in [0, 1)", p.Beta1).
		That(finite(p.Beta2) && p.Beta2 >= 0 && p.Beta2 < 1, kernels.ErrValue, "Beta2 is %g, want it in [0, 1)", p.Beta2).
		That(finite(p.Eps) && p.Eps > 0, kernels.ErrValue, "Eps is %g, want a finite value > 0", p.Eps).
		That(finite(p.WeightDecay) && p.WeightDecay >= 0, kernels.ErrValue, "WeightDecay is %g, want a finite value ≥ 0", p.WeightDecay)
}
