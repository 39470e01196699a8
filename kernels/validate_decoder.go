package kernels

// Argument checks of the Decoder op group, shared by its backends like the
// CheckX functions of validate.go. Checks of values (start positions and
// lengths in range) read the data and are left to the backends.

// RoPEDims is the geometry of a valid RoPE call: x [B, S, H, D].
type RoPEDims struct{ B, S, H, D int }

// CheckRoPE validates the arguments of Decoder.RoPE: x [B, S, H, D] of a
// float dtype with D even, pos I32 [B, S] and invFreq F32 [D/2].
func CheckRoPE(op string, be Backend, x, pos, invFreq *Tensor) (RoPEDims, error) {
	c := Check(op).Tensor("x", x, be).Tensor("pos", pos, be).Tensor("invFreq", invFreq, be)
	if err := c.Err(); err != nil {
		return RoPEDims{}, err
	}
	xs := x.Shape()
	c.DType("x", x, FloatTypes...).
		That(len(xs) == 4, ErrShape, "x has shape %v, want [B S H D]", xs)
	if err := c.Err(); err != nil {
		return RoPEDims{}, err
	}
	g := RoPEDims{B: xs[0], S: xs[1], H: xs[2], D: xs[3]}
	c.That(g.D%2 == 0, ErrShape, "x has head dimension %d, want it even (pairs i, i+D/2 are rotated)", g.D).
		DType("pos", pos, I32).Shape("pos", pos, g.B, g.S).
		DType("invFreq", invFreq, F32).Shape("invFreq", invFreq, g.D/2)
	if err := c.Err(); err != nil {
		return RoPEDims{}, err
	}
	return g, nil
}

// CheckSwiGLU validates the arguments of Decoder.SwiGLU: gate of a float
// dtype, up and out of its dtype and shape. It returns the element count.
func CheckSwiGLU(op string, be Backend, out, gate, up *Tensor) (n int, err error) {
	c := Check(op).Tensor("out", out, be).Tensor("gate", gate, be).Tensor("up", up, be)
	if err := c.Err(); err != nil {
		return 0, err
	}
	c.DType("gate", gate, FloatTypes...).
		SameDType("up", up, "gate", gate).Shape("up", up, gate.Shape()...).
		SameDType("out", out, "gate", gate).Shape("out", out, gate.Shape()...)
	if err := c.Err(); err != nil {
		return 0, err
	}
	return gate.Len(), nil
}

// CacheWriteDims is the geometry of a valid CacheWrite call: x
// [B, S, H, D] into cache [B, H, T, D].
type CacheWriteDims struct{ B, S, H, T, D int }

// CheckCacheWrite validates the arguments of Decoder.CacheWrite: cache
// [B, H, T, D] of a float dtype, x [B, S, H, D] of its dtype with S ≤ T,
// start I32 [B]. The backend checks that each start lies in [0, T−S].
func CheckCacheWrite(op string, be Backend, cache, x, start *Tensor) (CacheWriteDims, error) {
	c := Check(op).Tensor("cache", cache, be).Tensor("x", x, be).Tensor("start", start, be)
	if err := c.Err(); err != nil {
		return CacheWriteDims{}, err
	}
	cs, xs := cache.Shape(), x.Shape()
	c.DType("cache", cache, FloatTypes...).SameDType("x", x, "cache", cache).
		That(len(cs) == 4, ErrShape, "cache has shape %v, want [B H T D]", cs).
		That(len(xs) == 4, ErrShape, "x has shape %v, want [B S H D]", xs)
	if err := c.Err(); err != nil {
		return CacheWriteDims{}, err
	}
	g := CacheWriteDims{B: cs[0], H: cs[1], T: cs[2], D: cs[3], S: xs[1]}
	c.That(xs[0] == g.B && xs[2] == g.H && xs[3] == g.D, ErrShape,
		"x has shape %v, want [%d S %d %d] to match cache %v", xs, g.B, g.H, g.D, cs).
		That(g.S <= g.T, ErrShape, "x has %d positions, more than the cache's %d", g.S, g.T).
		DType("start", start, I32).Shape("start", start, g.B)
	if err := c.Err(); err != nil {
		return CacheWriteDims{}, err
	}
	return g, nil
}

// CachedAttentionDims is the geometry of a valid CachedAttention call: q
// [B, Hq, Sq, D] against caches [B, Hkv, T, D].
type CachedAttentionDims struct {
	B, Hq, Hkv, Sq, T, D int
	Scale                float32 // resolved: 1/√D when the call passed 0
}

// CheckCachedAttention validates the arguments of Decoder.CachedAttention:
// q [B, Hq, Sq, D] of a float dtype, k and v [B, Hkv, T, D] of its dtype
// with Hq a multiple of Hkv and Sq ≤ T, lens I32 [B], out of q's dtype and
// shape, and a finite scale. The backend checks that each length lies in
// [Sq, T].
func CheckCachedAttention(op string, be Backend, out, q, k, v, lens *Tensor, scale float32) (CachedAttentionDims, error) {
	c := Check(op).Tensor("out", out, be).Tensor("q", q, be).Tensor("k", k, be).Tensor("v", v, be).Tensor("lens", lens, be)
	if err := c.Err(); err != nil {
		return CachedAttentionDims{}, err
	}
	qs, ks := q.Shape(), k.Shape()
	c.DType("q", q, FloatTypes...).
		That(len(qs) == 4, ErrShape, "q has shape %v, want [B Hq Sq D]", qs).
		SameDType("k", k, "q", q).
		That(len(ks) == 4, ErrShape, "k has shape %v, want [B Hkv T D]", ks)
	if err := c.Err(); err != nil {
		return CachedAttentionDims{}, err
	}
	g := CachedAttentionDims{B: qs[0], Hq: qs[1], Sq: qs[2], D: qs[3], Hkv: ks[1], T: ks[2], Scale: scale}
	c.That(ks[0] == g.B && ks[3] == g.D, ErrShape, "k has shape %v, want [%d Hkv T %d] to match q %v", ks, g.B, g.D, qs).
		That(g.Hq%g.Hkv == 0, ErrShape, "q has %d heads, not a multiple of the %d KV heads of k", g.Hq, g.Hkv).
		That(g.Sq <= g.T, ErrShape, "q has %d positions, more than the cache's %d", g.Sq, g.T).
		SameDType("v", v, "q", q).Shape("v", v, ks...).
		DType("lens", lens, I32).Shape("lens", lens, g.B).
		SameDType("out", out, "q", q).Shape("out", out, qs...).
		That(finite(scale), ErrValue, "scale %v is not finite", scale)
	if err := c.Err(); err != nil {
		return CachedAttentionDims{}, err
	}
	if g.Scale == 0 {
		g.Scale = AttentionScale(AttentionParams{}, AttentionDims{D: g.D})
	}
	return g, nil
}

// CheckArgmax validates the arguments of Decoder.Argmax: x [rows…, V] of a
// float dtype, at least 1-D, and out I32 [rows…]. It returns the number of
// rows and V.
func CheckArgmax(op string, be Backend, out, x *Tensor) (rows, v int, err error) {
	c := Check(op).Tensor("out", out, be).Tensor("x", x, be)
	if err := c.Err(); err != nil {
		return 0, 0, err
	}
	xs := x.Shape()
	c.DType("x", x, FloatTypes...).Rank("x", x, 1).DType("out", out, I32)
	if err := c.Err(); err != nil {
		return 0, 0, err
	}
	lead := []int(xs[:len(xs)-1])
	if len(lead) == 0 {
		lead = []int{1}
	}
	if err := c.Shape("out", out, lead...).Err(); err != nil {
		return 0, 0, err
	}
	return xs.Rows(), xs.Last(), nil
}
