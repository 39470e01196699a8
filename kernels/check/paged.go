package check

import "github.com/zbench/zbench/kernels"

// PagedDims is the geometry of a paged cache: pools [N, H, P, D] (N
// blocks of P positions) and a block table [B, M].
type PagedDims struct {
	N, H, P, D, B, M int
}

// PagedCacheWriteDims is the geometry of a valid PagedCacheWrite call: x
// [B, S, H, D] into a pool [N, H, P, D] through a table [B, M].
type PagedCacheWriteDims struct {
	PagedDims
	S int
}

// PagedCacheWrite validates the arguments of
// kernels.PagedKV.PagedCacheWrite: pool [N, H, P, D] of a float dtype, x
// [B, S, H, D] of its dtype, table I32 [B, M] and start I32 [B]. The
// backend checks the positions and the blocks they name.
func PagedCacheWrite(op string, be kernels.Backend, pool, x, table, start *kernels.Tensor) (PagedCacheWriteDims, error) {
	c := Op(op).Tensor("pool", pool, be).Tensor("x", x, be).Tensor("table", table, be).Tensor("start", start, be)
	if err := c.Err(); err != nil {
		return PagedCacheWriteDims{}, err
	}
	ps, xs, ts := pool.Shape(), x.Shape(), table.Shape()
	c.DType("pool", pool, kernels.FloatTypes...).SameDType("x", x, "pool", pool).
		That(len(ps) == 4, kernels.ErrShape, "pool has shape %v, want [N H P D]", ps).
		That(len(xs) == 4, kernels.ErrShape, "x has shape %v, want [B S H D]", xs).
		DType("table", table, kernels.I32).
		That(len(ts) == 2, kernels.ErrShape, "table has shape %v, want [B M]", ts)
	if err := c.Err(); err != nil {
		return PagedCacheWriteDims{}, err
	}
	g := PagedCacheWriteDims{PagedDims: PagedDims{N: ps[0], H: ps[1], P: ps[2], D: ps[3], B: ts[0], M: ts[1]}, S: xs[1]}
	c.That(xs[0] == g.B && xs[2] == g.H && xs[3] == g.D, kernels.ErrShape,
		"x has shape %v, want [%d S %d %d] to match table %v and pool %v", xs, g.B, g.H, g.D, ts, ps).
		DType("start", start, kernels.I32).Shape("start", start, g.B)
	if err := c.Err(); err != nil {
		return PagedCacheWriteDims{}, err
	}
	return g, nil
}

// PagedAttentionDims is the geometry of a valid PagedAttention call: q
// [B, Hq, Sq, D] against pools [N, Hkv, P, D] through a table [B, M].
type PagedAttentionDims struct {
	PagedDims
	Hq, Sq int
	Scale  float32 // resolved: 1/√D when the call passed 0
}

// PagedAttention validates the arguments of kernels.PagedKV.PagedAttention:
// q [B, Hq, Sq, D] of a float dtype, k and v [N, Hkv, P, D] of its dtype
// with Hq a multiple of Hkv, table I32 [B, M], lens I32 [B], out of q's
// dtype and shape, and a finite scale. The backend checks each length
// and the blocks it reads.
func PagedAttention(op string, be kernels.Backend, out, q, k, v, table, lens *kernels.Tensor, scale float32) (PagedAttentionDims, error) {
	c := Op(op).Tensor("out", out, be).Tensor("q", q, be).Tensor("k", k, be).Tensor("v", v, be).
		Tensor("table", table, be).Tensor("lens", lens, be)
	if err := c.Err(); err != nil {
		return PagedAttentionDims{}, err
	}
	qs, ks, ts := q.Shape(), k.Shape(), table.Shape()
	c.DType("q", q, kernels.FloatTypes...).
		That(len(qs) == 4, kernels.ErrShape, "q has shape %v, want [B Hq Sq D]", qs).
		SameDType("k", k, "q", q).
		That(len(ks) == 4, kernels.ErrShape, "k has shape %v, want [N Hkv P D]", ks).
		DType("table", table, kernels.I32).
		That(len(ts) == 2, kernels.ErrShape, "table has shape %v, want [B M]", ts)
	if err := c.Err(); err != nil {
		return PagedAttentionDims{}, err
	}
	g := PagedAttentionDims{PagedDims: PagedDims{N: ks[0], H: ks[1], P: ks[2], D: ks[3], B: ts[0], M: ts[1]},
		Hq: qs[1], Sq: qs[2], Scale: scale}
	c.That(qs[0] == g.B && qs[3] == g.D, kernels.ErrShape, "q has shape %v, want [%d Hq Sq %d] to match table %v and k %v", qs, g.B, g.D, ts, ks).
		That(g.Hq%g.H == 0, kernels.ErrShape, "q has %d heads, not a multiple of the %d KV heads of k", g.Hq, g.H).
		That(g.Sq <= g.M*g.P, kernels.ErrShape, "q has %d positions, more than a table row's %d", g.Sq, g.M*g.P).
		SameDType("v", v, "q", q).Shape("v", v, ks...).
		DType("lens", lens, kernels.I32).Shape("lens", lens, g.B).
		SameDType("out", out, "q", q).Shape("out", out, qs...).
		That(finite(scale), kernels.ErrValue, "scale %v is not finite", scale)
	if err := c.Err(); err != nil {
		return PagedAttentionDims{}, err
	}
	if g.Scale == 0 {
		g.Scale = kernels.AttentionScale(kernels.AttentionParams{}, kernels.AttentionDims{D: g.D})
	}
	return g, nil
}
