package check

import "github.com/zbench/zbench/kernels"

// Argument checks of the Decoder op group. Checks of values (start positions
// and lengths in range) read the data and are left to the backends.

// RoPEDims is the geometry of a valid RoPE call: x [B, S, H, D].
type RoPEDims struct{ B, S, H, D int }

// RoPE validates the arguments of kernels.Decoder.RoPE: x [B, S, H, D] of a
// float dtype with D even, pos I32 [B, S] and invFreq F32 [D/2].
func RoPE(op string, be kernels.Backend, x, pos, invFreq *kernels.Tensor) (RoPEDims, error) {
	c := Op(op).Tensor("x", x, be).Tensor("pos", pos, be).Tensor("invFreq", invFreq, be)
	if err := c.Err(); err != nil {
		return RoPEDims{}, err
	}
	xs := x.Shape()
	c.DType("x", x, kernels.FloatTypes...).
		That(len(xs) == 4, kernels.ErrShape, "x has shape %v, want [B S H D]", xs)
	if err := c.Err(); err != nil {
		return RoPEDims{}, err
	}
	g := RoPEDims{B: xs[0], S: xs[1], H: xs[2], D: xs[3]}
	c.That(g.D%2 == 0, kernels.ErrShape, "x has head dimension %d, want it even (pairs i, i+D/2 are rotated)", g.D).
		DType("pos", pos, kernels.I32).Shape("pos", pos, g.B, g.S).
		DType("invFreq", invFreq, kernels.F32).Shape("invFreq", invFreq, g.D/2)
	if err := c.Err(); err != nil {
		return RoPEDims{}, err
	}
	return g, nil
}

// SwiGLU validates the arguments of kernels.Decoder.SwiGLU: gate of a float
// dtype, up and out of its dtype and shape. It returns the element count.
func SwiGLU(op string, be kernels.Backend, out, gate, up *kernels.Tensor) (n int, err error) {
	c := Op(op).Tensor("out", out, be).Tensor("gate", gate, be).Tensor("up", up, be)
	if err := c.Err(); err != nil {
		return 0, err
	}
	c.DType("gate", gate, kernels.FloatTypes...).
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

// CacheWrite validates the arguments of kernels.Decoder.CacheWrite: cache
// [B, H, T, D] of a float dtype, x [B, S, H, D] of its dtype with S ≤ T,
// start I32 [B]. The backend checks that each start lies in [0, T−S].
func CacheWrite(op string, be kernels.Backend, cache, x, start *kernels.Tensor) (CacheWriteDims, error) {
	c := Op(op).Tensor("cache", cache, be).Tensor("x", x, be).Tensor("start", start, be)
	if err := c.Err(); err != nil {
		return CacheWriteDims{}, err
	}
	cs, xs := cache.Shape(), x.Shape()
	c.DType("cache", cache, kernels.FloatTypes...).SameDType("x", x, "cache", cache).
		That(len(cs) == 4, kernels.ErrShape, "cache has shape %v, want [B H T D]", cs).
		That(len(xs) == 4, kernels.ErrShape, "x has shape %v, want [B S H D]", xs)
	if err := c.Err(); err != nil {
		return CacheWriteDims{}, err
	}
	g := CacheWriteDims{B: cs[0], H: cs[1], T: cs[2], D: cs[3], S: xs[1]}
	c.That(xs[0] == g.B && xs[2] == g.H && xs[3] == g.D, kernels.ErrShape,
		"x has shape %v, want [%d S %d %d] to match cache %v", xs, g.B, g.H, g.D, cs).
		That(g.S <= g.T, kernels.ErrShape, "x has %d positions, more than the cache's %d", g.S, g.T).
		DType("start", start, kernels.I32).Shape("start", start, g.B)
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

// CachedAttention validates the arguments of kernels.Decoder.CachedAttention:
// q [B, Hq, Sq, D] of a float dtype, k and v [B, Hkv, T, D] of its dtype
// with Hq a multiple of Hkv and Sq ≤ T, lens I32 [B], out of q's dtype and
// shape, and a finite scale. The backend checks that each length lies in
// [Sq, T].
func CachedAttention(op string, be kernels.Backend, out, q, k, v, lens *kernels.Tensor, scale float32) (CachedAttentionDims, error) {
	c := Op(op).Tensor("out", out, be).Tensor("q", q, be).Tensor("k", k, be).Tensor("v", v, be).Tensor("lens", lens, be)
	if err := c.Err(); err != nil {
		return CachedAttentionDims{}, err
	}
	qs, ks := q.Shape(), k.Shape()
	c.DType("q", q, kernels.FloatTypes...).
		That(len(qs) == 4, kernels.ErrShape, "q has shape %v, want [B Hq Sq D]", qs).
		SameDType("k", k, "q", q).
		That(len(ks) == 4, kernels.ErrShape, "k has shape %v, want [B Hkv T D]", ks)
	if err := c.Err(); err != nil {
		return CachedAttentionDims{}, err
	}
	g := CachedAttentionDims{B: qs[0], Hq: qs[1], Sq: qs[2], D: qs[3], Hkv: ks[1], T: ks[2], Scale: scale}
	c.That(ks[0] == g.B && ks[3] == g.D, kernels.ErrShape, "k has shape %v, want [%d Hkv T %d] to match q %v", ks, g.B, g.D, qs).
		That(g.Hq%g.Hkv == 0, kernels.ErrShape, "q has %d heads, not a multiple of the %d KV heads of k", g.Hq, g.Hkv).
		That(g.Sq <= g.T, kernels.ErrShape, "q has %d positions, more than the cache's %d", g.Sq, g.T).
		SameDType("v", v, "q", q).Shape("v", v, ks...).
		DType("lens", lens, kernels.I32).Shape("lens", lens, g.B).
		SameDType("out", out, "q", q).Shape("out", out, qs...).
		That(finite(scale), kernels.ErrValue, "scale %v is not finite", scale)
	if err := c.Err(); err != nil {
		return CachedAttentionDims{}, err
	}
	if g.Scale == 0 {
		g.Scale = kernels.AttentionScale(kernels.AttentionParams{}, kernels.AttentionDims{D: g.D})
	}
	return g, nil
}

// Argmax validates the arguments of kernels.Decoder.Argmax: x [rows…, V] of a
// float dtype, at least 1-D, and out I32 [rows…]. It returns the number of
// rows and V.
func Argmax(op string, be kernels.Backend, out, x *kernels.Tensor) (rows, v int, err error) {
	c := Op(op).Tensor("out", out, be).Tensor("x", x, be)
	if err := c.Err(); err != nil {
		return 0, 0, err
	}
	xs := x.Shape()
	c.DType("x", x, kernels.FloatTypes...).Rank("x", x, 1).DType("out", out, kernels.I32)
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
