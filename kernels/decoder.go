package kernels

// Decoder is the op group of decoder-only language models (Llama and its
// family): rotary position embeddings, the SwiGLU gate, a key-value cache,
// attention of new queries against that cache, and the greedy pick of the
// sampling step. A backend adopts it by implementing every method;
// kerneltest's Decoder tests are its conformance suite. Callers get it with
// Group, whose error names the backend and the group where it is absent.
//
// Float tensors of one call share a dtype (F32, F16 or BF16) unless stated
// otherwise; arithmetic is in float32 and results are rounded once to the
// output's dtype.
type Decoder interface {
	// RoPE rotates x [B, S, H, D] IN PLACE (the exception to Ops' rule that
	// inputs are not modified), with Hugging Face's rotate-half layout: for
	// each i < D/2, with θ = float32(pos[b, s])·invFreq[i] (a float32
	// product, as HF computes it) and c, s its cosine and sine,
	//
	//	x[i]     ← x[i]·c − x[i+D/2]·s
	//	x[i+D/2] ← x[i+D/2]·c + x[i]·s
	//
	// pos is I32 [B, S]; invFreq is F32 [D/2] (RoPE scaling, linear or
	// llama3, is folded into it by the model). D must be even.
	RoPE(x, pos, invFreq *Tensor) error
	// SwiGLU sets out = silu(gate)·up elementwise: the gated feed-forward
	// product of Llama's MLP. out, gate and up have one shape; out may be
	// gate or up.
	SwiGLU(out, gate, up *Tensor) error
	// CacheWrite copies x [B, S, H, D] into cache [B, H, T, D] at positions
	// start[b] … start[b]+S−1 of each sequence b:
	//
	//	cache[b, h, start[b]+s, :] = x[b, s, h, :]
	//
	// start is I32 [B]; a start outside [0, T−S] is an error wrapping
	// ErrValue. Other positions of the cache are left as they are.
	CacheWrite(cache, x, start *Tensor) error
	// CachedAttention computes softmax(scale·q·kᵀ)·v for q [B, Hq, Sq, D]
	// against the first lens[b] positions of the caches k and v
	// [B, Hkv, T, D] into out [B, Hq, Sq, D]; Hq is a multiple of Hkv
	// (query head h reads KV head h/(Hq/Hkv)). Query s of sequence b sits
	// at position lens[b] − Sq + s and sees the keys at positions up to
	// its own (causal). lens is I32 [B] with Sq ≤ lens[b] ≤ T, else the
	// error wraps ErrValue. scale 0 means 1/√D. It serves the prefill
	// (Sq = S) and decode (Sq = 1) of a KV-cached model alike.
	CachedAttention(out, q, k, v, lens *Tensor, scale float32) error
	// Argmax sets out[r] (I32 [rows…]) to the index of the largest value
	// of row r of x [rows…, V], the first one on ties; a NaN counts as
	// larger than any number, as in torch.argmax.
	Argmax(out, x *Tensor) error
}

// IndexOfMax is Decoder.Argmax of one row on the host: the index of the
// largest value, the first on ties, NaN counting as the largest (the
// first NaN), as torch.argmax. It is -1 for an empty row.
func IndexOfMax(v []float32) int {
	if len(v) == 0 {
		return -1
	}
	best := 0
	for i, x := range v {
		if x != x {
			return i
		}
		if x > v[best] {
			best = i
		}
	}
	return best
}
