package kernels

import (
	"math"
	"reflect"
)

// Argument validation of every Ops method, shared by the backends so that
// they accept the same calls and fail with the same messages.
//
// Each CheckX validates the arguments of Ops.X in the order the method takes
// them: tensors are non-nil, live and owned by be, dtypes and shapes agree,
// and parameters such as the activation code and eps are in range. It
// needs none of the tensors' data, so a device backend can call it before
// queuing work. The first failure is returned as an error that starts with
// op (by convention "<backend>: <op name>", e.g. "cpu: matmul") and wraps
// one of the sentinel errors; on success the sizes the kernel needs are
// returned. Checks of values (ids, targets and KeyLens in range) read the
// data and are left to the backends.

// validAct reports whether a is one of the defined activations.
func validAct(a Activation) bool { return a <= ActTanh }

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

// CheckMatMul validates the arguments of Ops.MatMul: a [batch…, M, K]
// (transposed [batch…, K, M]) of a float dtype, b [batch…, K, N] or [K, N]
// (transposed [.., N, K]), out [batch…, M, N], the optional bias [N], all of
// a's dtype, and a known activation.
func CheckMatMul(op string, be Backend, out, a, b *Tensor, p MatMulParams) (MatMulDims, error) {
	c := Check(op).Tensor("out", out, be).Tensor("a", a, be).Tensor("b", b, be)
	if p.Bias != nil {
		c.Tensor("bias", p.Bias, be)
	}
	if c.Err() != nil {
		return MatMulDims{}, c.Err()
	}
	c.DType("a", a, FloatTypes...).SameDType("a", a, "b", b).SameDType("a", a, "out", out).
		Rank("a", a, 2).Rank("b", b, 2).
		That(validAct(p.Act), ErrValue, "unknown activation %d", p.Act)
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
	c.That(shared || bs[:rb-2].Equal(batchDims), ErrShape,
		"b has shape %v, want 2 dimensions or the batch dimensions %v of a %v", bs, batchDims, as).
		That(kb == k, ErrShape, "inner dimensions differ: a %v (TransA=%v) has K=%d, b %v (TransB=%v) has K=%d",
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

// CheckAdd validates the arguments of Ops.Add: a of a float dtype, out of
// a's dtype and shape, and b of a's dtype with a's shape or a suffix of it.
// It returns the number of elements of a (and out) and of b, which is
// repeated over a's leading dimensions when nb < n.
func CheckAdd(op string, be Backend, out, a, b *Tensor) (n, nb int, err error) {
	c := Check(op).Tensor("out", out, be).Tensor("a", a, be).Tensor("b", b, be)
	if c.Err() != nil {
		return 0, 0, c.Err()
	}
	as, bs := a.Shape(), b.Shape()
	if err := c.DType("a", a, FloatTypes...).SameDType("a", a, "b", b).SameDType("a", a, "out", out).
		Shape("out", out, as...).
		That(len(bs) <= len(as) && bs.Equal(as[len(as)-len(bs):]), ErrShape,
			"b has shape %v, want a suffix of a's shape %v", bs, as).Err(); err != nil {
		return 0, 0, err
	}
	return a.Len(), b.Len(), nil
}

// CheckScale validates the arguments of Ops.Scale: x of a float dtype and
// out of x's dtype and shape. It returns the number of elements.
func CheckScale(op string, be Backend, out, x *Tensor, s float32) (n int, err error) {
	c := Check(op).Tensor("out", out, be).Tensor("x", x, be)
	if c.Err() != nil {
		return 0, c.Err()
	}
	if err := c.DType("x", x, FloatTypes...).SameDType("x", x, "out", out).Shape("out", out, x.Shape()...).Err(); err != nil {
		return 0, err
	}
	return x.Len(), nil
}

// CheckFill validates the arguments of Ops.Fill: out, of any dtype. It
// returns the number of elements.
func CheckFill(op string, be Backend, out *Tensor, v float32) (n int, err error) {
	if err := Check(op).Tensor("out", out, be).Err(); err != nil {
		return 0, err
	}
	return out.Len(), nil
}

// CheckCast validates the arguments of Ops.Cast: out of x's shape, both of
// any dtype. It returns the number of elements.
func CheckCast(op string, be Backend, out, x *Tensor) (n int, err error) {
	c := Check(op).Tensor("out", out, be).Tensor("x", x, be)
	if c.Err() != nil {
		return 0, c.Err()
	}
	if err := c.Shape("out", out, x.Shape()...).Err(); err != nil {
		return 0, err
	}
	return x.Len(), nil
}

// CheckAct validates the arguments of Ops.Act: x of a float dtype, out of
// x's dtype and shape, and a known activation. It returns the number of
// elements.
func CheckAct(op string, be Backend, out, x *Tensor, a Activation) (n int, err error) {
	c := Check(op).Tensor("out", out, be).Tensor("x", x, be)
	if c.Err() != nil {
		return 0, c.Err()
	}
	if err := c.DType("x", x, FloatTypes...).SameDType("x", x, "out", out).Shape("out", out, x.Shape()...).
		That(validAct(a), ErrValue, "unknown activation %d", a).Err(); err != nil {
		return 0, err
	}
	return x.Len(), nil
}

// CheckActBackward validates the arguments of Ops.ActBackward: x of a float
// dtype, dy and dx of x's dtype and shape, and a known activation. It
// returns the number of elements.
func CheckActBackward(op string, be Backend, dx, dy, x *Tensor, a Activation) (n int, err error) {
	c := Check(op).Tensor("dx", dx, be).Tensor("dy", dy, be).Tensor("x", x, be)
	if c.Err() != nil {
		return 0, c.Err()
	}
	if err := c.DType("x", x, FloatTypes...).SameDType("x", x, "dy", dy).SameDType("x", x, "dx", dx).
		Shape("dy", dy, x.Shape()...).Shape("dx", dx, x.Shape()...).
		That(validAct(a), ErrValue, "unknown activation %d", a).Err(); err != nil {
		return 0, err
	}
	return x.Len(), nil
}

// CheckSumRows validates the arguments of Ops.SumRows: x [rows…, N] of a
// float dtype, at least 1-D, and out [N] of x's dtype. It returns the number
// of rows summed (the product of x's leading dimensions) and N.
func CheckSumRows(op string, be Backend, out, x *Tensor) (rows, n int, err error) {
	c := Check(op).Tensor("out", out, be).Tensor("x", x, be)
	if c.Err() != nil {
		return 0, 0, c.Err()
	}
	if err := c.DType("x", x, FloatTypes...).SameDType("x", x, "out", out).Rank("x", x, 1).
		Shape("out", out, x.Shape().Last()).Err(); err != nil {
		return 0, 0, err
	}
	return x.Shape().Rows(), x.Shape().Last(), nil
}

// SwapAxesDims is the geometry of a valid SwapAxes call: x [A, B, C, D]
// and out [A, C, B, D].
type SwapAxesDims struct{ A, B, C, D int }

// sameStorage reports whether a and b are the same allocation: a tensor and
// its Reshape views share the backend's handle. Handles of a type that
// cannot be compared count as distinct.
func sameStorage(a, b *Tensor) bool {
	if a.storage == nil || b.storage == nil || !reflect.TypeOf(a.storage).Comparable() {
		return false
	}
	return a.storage == b.storage
}

// CheckSwapAxes validates the arguments of Ops.SwapAxes: x [A, B, C, D] of
// dtype F32, F16, BF16 or I32, and out [A, C, B, D] of x's dtype, not x's
// storage.
func CheckSwapAxes(op string, be Backend, out, x *Tensor) (SwapAxesDims, error) {
	c := Check(op).Tensor("out", out, be).Tensor("x", x, be)
	if err := c.Err(); err != nil {
		return SwapAxesDims{}, err
	}
	xs := x.Shape()
	c.DType("x", x, F32, F16, BF16, I32).
		That(len(xs) == 4, ErrShape, "x has shape %v, want [A B C D]", xs)
	if err := c.Err(); err != nil {
		return SwapAxesDims{}, err
	}
	g := SwapAxesDims{A: xs[0], B: xs[1], C: xs[2], D: xs[3]}
	if err := c.SameDType("out", out, "x", x).Shape("out", out, g.A, g.C, g.B, g.D).
		That(!sameStorage(out, x), ErrValue, "out is x's storage, want a separate tensor (SwapAxes does not work in place)").
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
func rowDims(s Shape) RowDims { return RowDims{Rows: s.Rows(), D: s.Last()} }

// checkNorm checks the arguments LayerNorm and RMSNorm share: x of a float
// dtype, at least 1-D, out of x's dtype and shape, gamma [D] of x's dtype
// and eps ≥ 0.
func checkNorm(op string, be Backend, out, x, gamma *Tensor, eps float32) *Checker {
	c := Check(op).Tensor("out", out, be).Tensor("x", x, be).Tensor("gamma", gamma, be)
	if c.Err() != nil {
		return c
	}
	return c.DType("x", x, FloatTypes...).Rank("x", x, 1).
		SameDType("out", out, "x", x).Shape("out", out, x.Shape()...).
		SameDType("gamma", gamma, "x", x).Shape("gamma", gamma, x.Shape().Last()).
		That(eps >= 0, ErrValue, "eps is %g, want ≥ 0", eps)
}

// CheckLayerNorm validates the arguments of Ops.LayerNorm: x [rows…, D] of
// a float dtype, out of x's dtype and shape, gamma and the optional beta [D]
// of x's dtype, the optional mean and rstd F32 with one element per row,
// and eps ≥ 0.
func CheckLayerNorm(op string, be Backend, out, mean, rstd, x, gamma, beta *Tensor, eps float32) (RowDims, error) {
	c := checkNorm(op, be, out, x, gamma, eps)
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	g := rowDims(x.Shape())
	if beta != nil {
		c.Tensor("beta", beta, be).SameDType("beta", beta, "x", x).Shape("beta", beta, g.D)
	}
	if mean != nil {
		c.Tensor("mean", mean, be).DType("mean", mean, F32).Len("mean", mean, g.Rows)
	}
	if rstd != nil {
		c.Tensor("rstd", rstd, be).DType("rstd", rstd, F32).Len("rstd", rstd, g.Rows)
	}
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	return g, nil
}

// CheckLayerNormBackward validates the arguments of Ops.LayerNormBackward:
// x [rows…, D] of a float dtype, dx and dy of x's dtype and shape, gamma and
// the optional dgamma and dbeta [D] of x's dtype, and mean and rstd F32 with
// one element per row.
func CheckLayerNormBackward(op string, be Backend, dx, dgamma, dbeta, dy, x, gamma, mean, rstd *Tensor) (RowDims, error) {
	c := Check(op).
		Tensor("dx", dx, be).Tensor("dy", dy, be).Tensor("x", x, be).Tensor("gamma", gamma, be).
		Tensor("mean", mean, be).Tensor("rstd", rstd, be)
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	g := rowDims(x.Shape())
	c.DType("x", x, FloatTypes...).Rank("x", x, 1).
		SameDType("dx", dx, "x", x).Shape("dx", dx, x.Shape()...).
		SameDType("dy", dy, "x", x).Shape("dy", dy, x.Shape()...).
		SameDType("gamma", gamma, "x", x).Shape("gamma", gamma, g.D).
		DType("mean", mean, F32).Len("mean", mean, g.Rows).
		DType("rstd", rstd, F32).Len("rstd", rstd, g.Rows)
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

// CheckRMSNorm validates the arguments of Ops.RMSNorm: x [rows…, D] of a
// float dtype, out of x's dtype and shape, gamma [D] of x's dtype and
// eps ≥ 0.
func CheckRMSNorm(op string, be Backend, out, x, gamma *Tensor, eps float32) (RowDims, error) {
	if err := checkNorm(op, be, out, x, gamma, eps).Err(); err != nil {
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

// checkKeyLens checks the optional KeyLens tensor of p: I32 of shape
// [batch]. Its values are the backend's to check.
func checkKeyLens(c *Checker, be Backend, p AttentionParams, batch int) *Checker {
	if t := p.KeyLens; t != nil {
		c.Tensor("KeyLens", t, be).DType("KeyLens", t, I32).Shape("KeyLens", t, batch)
	}
	return c
}

// CheckSoftmax validates the arguments of Ops.Softmax: x of a float dtype,
// at least 2-D when p.Causal or p.KeyLens asks for masks (else at least
// 1-D), out of x's dtype and shape, and the optional p.KeyLens I32 of shape
// [B], B being x's leading dimension. The backend checks that the lengths
// lie in [0, Sk].
func CheckSoftmax(op string, be Backend, out, x *Tensor, p AttentionParams) (SoftmaxDims, error) {
	c := Check(op).Tensor("out", out, be).Tensor("x", x, be)
	if err := c.Err(); err != nil {
		return SoftmaxDims{}, err
	}
	shape := x.Shape()
	minRank := 1
	if p.Causal || p.KeyLens != nil {
		minRank = 2
	}
	c.DType("x", x, FloatTypes...).Rank("x", x, minRank).
		SameDType("out", out, "x", x).Shape("out", out, shape...)
	if err := c.Err(); err != nil {
		return SoftmaxDims{}, err
	}
	g := SoftmaxDims{Rows: shape.Rows(), Sq: 1, Sk: shape.Last()}
	g.RowsPerBatch = g.Rows
	if len(shape) >= 2 {
		g.Sq, g.RowsPerBatch = shape[len(shape)-2], g.Rows/shape[0]
	}
	if err := checkKeyLens(c, be, p, shape[0]).Err(); err != nil {
		return SoftmaxDims{}, err
	}
	return g, nil
}

// CheckSoftmaxBackward validates the arguments of Ops.SoftmaxBackward: y of
// a float dtype, at least 1-D, and dy and dx of y's dtype and shape.
func CheckSoftmaxBackward(op string, be Backend, dx, dy, y *Tensor) (RowDims, error) {
	c := Check(op).Tensor("dx", dx, be).Tensor("dy", dy, be).Tensor("y", y, be)
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	shape := y.Shape()
	c.DType("y", y, FloatTypes...).Rank("y", y, 1).
		SameDType("dy", dy, "y", y).Shape("dy", dy, shape...).
		SameDType("dx", dx, "y", y).Shape("dx", dx, shape...)
	if err := c.Err(); err != nil {
		return RowDims{}, err
	}
	return rowDims(shape), nil
}

// AttentionDims is the geometry of a valid Attention or AttentionBackward
// call: q [B, Hq, Sq, D], k and v [B, Hkv, Sk, D].
type AttentionDims struct {
	B   int // batch size
	Hq  int // query heads, a multiple of Hkv
	Hkv int // key/value heads; query head h reads KV head h/(Hq/Hkv)
	Sq  int // query length
	Sk  int // key length
	D   int // head dimension
}

// checkAttention checks q, k, v and p.KeyLens, which Attention and its
// backward share, and returns the geometry.
func checkAttention(c *Checker, be Backend, q, k, v *Tensor, p AttentionParams) AttentionDims {
	c.Tensor("q", q, be).Tensor("k", k, be).Tensor("v", v, be)
	if c.Err() != nil {
		return AttentionDims{}
	}
	qs, ks := q.Shape(), k.Shape()
	c.DType("q", q, FloatTypes...).
		That(len(qs) == 4, ErrShape, "q has shape %v, want [B Hq Sq D]", qs).
		SameDType("k", k, "q", q).
		That(len(ks) == 4, ErrShape, "k has shape %v, want [B Hkv Sk D]", ks)
	if c.Err() != nil {
		return AttentionDims{}
	}
	g := AttentionDims{B: qs[0], Hq: qs[1], Sq: qs[2], D: qs[3], Hkv: ks[1], Sk: ks[2]}
	c.That(ks[0] == g.B && ks[3] == g.D, ErrShape,
		"k has shape %v, want [%d Hkv Sk %d] to match q %v", ks, g.B, g.D, qs).
		That(g.Hq%g.Hkv == 0, ErrShape,
			"q has %d heads, not a multiple of the %d KV heads of k", g.Hq, g.Hkv).
		SameDType("v", v, "q", q).Shape("v", v, ks...)
	if c.Err() != nil {
		return AttentionDims{}
	}
	checkKeyLens(c, be, p, g.B)
	return g
}

// CheckAttention validates the arguments of Ops.Attention: q [B, Hq, Sq, D]
// of a float dtype, k and v [B, Hkv, Sk, D] of q's dtype with Hq a multiple
// of Hkv, the optional p.KeyLens I32 [B], and out of q's dtype and shape.
// The backend checks that the lengths lie in [0, Sk].
func CheckAttention(op string, be Backend, out, q, k, v *Tensor, p AttentionParams) (AttentionDims, error) {
	c := Check(op)
	g := checkAttention(c, be, q, k, v, p)
	if err := c.Err(); err != nil {
		return AttentionDims{}, err
	}
	if err := c.Tensor("out", out, be).Err(); err != nil {
		return AttentionDims{}, err
	}
	if err := c.SameDType("out", out, "q", q).Shape("out", out, q.Shape()...).Err(); err != nil {
		return AttentionDims{}, err
	}
	return g, nil
}

// CheckAttentionBackward validates the arguments of Ops.AttentionBackward:
// q, k, v and p as CheckAttention does, dout and dq of q's dtype and shape,
// and dk and dv of q's dtype and k's shape. The backend checks that the
// lengths of p.KeyLens lie in [0, Sk].
func CheckAttentionBackward(op string, be Backend, dq, dk, dv, dout, q, k, v *Tensor, p AttentionParams) (AttentionDims, error) {
	c := Check(op)
	g := checkAttention(c, be, q, k, v, p)
	if err := c.Err(); err != nil {
		return AttentionDims{}, err
	}
	if err := c.Tensor("dq", dq, be).Tensor("dk", dk, be).Tensor("dv", dv, be).Tensor("dout", dout, be).Err(); err != nil {
		return AttentionDims{}, err
	}
	c.SameDType("dout", dout, "q", q).Shape("dout", dout, q.Shape()...).
		SameDType("dq", dq, "q", q).Shape("dq", dq, q.Shape()...).
		SameDType("dk", dk, "q", q).Shape("dk", dk, k.Shape()...).
		SameDType("dv", dv, "q", q).Shape("dv", dv, k.Shape()...)
	if err := c.Err(); err != nil {
		return AttentionDims{}, err
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

// checkEmbedding checks what Embedding and its backward share: a table
// [V, D] of a float dtype, I32 ids of any shape, and rows [ids…, D] of the
// table's dtype.
func checkEmbedding(op string, tableName string, table *Tensor, rowsName string, rows, ids *Tensor) (EmbeddingDims, error) {
	ts := table.Shape()
	c := Check(op).DType(tableName, table, FloatTypes...).
		That(len(ts) == 2, ErrShape, "%s has shape %v, want [V D]", tableName, ts).
		DType("ids", ids, I32)
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

// CheckEmbedding validates the arguments of Ops.Embedding: table [V, D] of a
// float dtype, ids I32 of any shape, and out [ids…, D] of the table's dtype.
// The backend checks that the ids lie in [0, V).
func CheckEmbedding(op string, be Backend, out, table, ids *Tensor) (EmbeddingDims, error) {
	if err := Check(op).Tensor("out", out, be).Tensor("table", table, be).Tensor("ids", ids, be).Err(); err != nil {
		return EmbeddingDims{}, err
	}
	return checkEmbedding(op, "table", table, "out", out, ids)
}

// CheckEmbeddingBackward validates the arguments of Ops.EmbeddingBackward:
// dtable [V, D] of a float dtype, ids I32 of any shape, and dout [ids…, D]
// of dtable's dtype. The backend checks that the ids lie in [0, V).
func CheckEmbeddingBackward(op string, be Backend, dtable, dout, ids *Tensor) (EmbeddingDims, error) {
	if err := Check(op).Tensor("dtable", dtable, be).Tensor("dout", dout, be).Tensor("ids", ids, be).Err(); err != nil {
		return EmbeddingDims{}, err
	}
	return checkEmbedding(op, "dtable", dtable, "dout", dout, ids)
}

// checkCrossEntropy checks the arguments of CrossEntropy and its backward,
// out being loss or dlogits as outName says, and returns N and V.
func checkCrossEntropy(op string, be Backend, outName string, out, logits, targets *Tensor) (n, v int, err error) {
	c := Check(op).Tensor(outName, out, be).Tensor("logits", logits, be).Tensor("targets", targets, be)
	if err := c.Err(); err != nil {
		return 0, 0, err
	}
	ls := logits.Shape()
	c.DType("logits", logits, FloatTypes...).
		That(len(ls) == 2, ErrShape, "logits has shape %v, want [N V]", ls).
		DType("targets", targets, I32)
	if err := c.Err(); err != nil {
		return 0, 0, err
	}
	n, v = ls[0], ls[1]
	c.Shape("targets", targets, n)
	if outName == "loss" {
		c.DType("loss", out, F32).Shape("loss", out, n)
	} else {
		c.SameDType(outName, out, "logits", logits).Shape(outName, out, ls...)
	}
	if err := c.Err(); err != nil {
		return 0, 0, err
	}
	return n, v, nil
}

// CheckCrossEntropy validates the arguments of Ops.CrossEntropy: logits
// [N, V] of a float dtype, targets I32 [N] and loss F32 [N]. It returns N
// and V. The backend checks that each target lies in [0, V) or is
// IgnoreIndex.
func CheckCrossEntropy(op string, be Backend, loss, logits, targets *Tensor) (n, v int, err error) {
	return checkCrossEntropy(op, be, "loss", loss, logits, targets)
}

// CheckCrossEntropyBackward validates the arguments of
// Ops.CrossEntropyBackward: logits [N, V] of a float dtype, targets I32 [N]
// and dlogits of logits' dtype and shape. It returns N and V. The backend
// checks that each target lies in [0, V) or is IgnoreIndex.
func CheckCrossEntropyBackward(op string, be Backend, dlogits, logits, targets *Tensor, scale float32) (n, v int, err error) {
	return checkCrossEntropy(op, be, "dlogits", dlogits, logits, targets)
}

// finite reports whether v is neither infinite nor NaN.
func finite(v float32) bool { return !math.IsInf(float64(v), 0) && !math.IsNaN(float64(v)) }

// CheckAdamW validates the arguments of Ops.AdamW: param, grad, m and v F32
// with one shape, and hyper-parameters in range: Step ≥ 1, LR ≥ 0,
// 0 ≤ Beta1, Beta2 < 1, Eps > 0 and WeightDecay ≥ 0, all finite. It returns
// the number of elements.
func CheckAdamW(op string, be Backend, param, grad, m, v *Tensor, p AdamWParams) (n int, err error) {
	c := Check(op).Tensor("param", param, be).Tensor("grad", grad, be).Tensor("m", m, be).Tensor("v", v, be)
	if err := c.Err(); err != nil {
		return 0, err
	}
	shape := param.Shape()
	c.DType("param", param, F32).
		DType("grad", grad, F32).Shape("grad", grad, shape...).
		DType("m", m, F32).Shape("m", m, shape...).
		DType("v", v, F32).Shape("v", v, shape...).
		That(p.Step >= 1, ErrValue, "Step is %d, want ≥ 1 (the 1-based number of the update)", p.Step).
		That(finite(p.LR) && p.LR >= 0, ErrValue, "LR is %g, want a finite value ≥ 0", p.LR).
		That(finite(p.Beta1) && p.Beta1 >= 0 && p.Beta1 < 1, ErrValue, "Beta1 is %g, want it in [0, 1)", p.Beta1).
		That(finite(p.Beta2) && p.Beta2 >= 0 && p.Beta2 < 1, ErrValue, "Beta2 is %g, want it in [0, 1)", p.Beta2).
		That(finite(p.Eps) && p.Eps > 0, ErrValue, "Eps is %g, want a finite value > 0", p.Eps).
		That(finite(p.WeightDecay) && p.WeightDecay >= 0, ErrValue, "WeightDecay is %g, want a finite value ≥ 0", p.WeightDecay)
	if err := c.Err(); err != nil {
		return 0, err
	}
	return param.Len(), nil
}
