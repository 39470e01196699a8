package kernels

// PagedKV is the op group of a paged key-value cache, the cache of a
// server's continuous batching: every sequence's keys and values live in
// blocks of P positions of one preallocated pool [N, H, P, D] (N blocks),
// found through a block table per sequence, so that sequences of any
// length share the pool, and the blocks of a finished sequence return to
// it for the next. Row b of a table [B, M] lists sequence b's blocks in
// order: position p of sequence b is row p mod P of block table[b, p/P].
// A backend adopts the group by implementing both methods; kerneltest's
// PagedKV tests are its conformance suite. Callers get it with Group.
type PagedKV interface {
	// PagedCacheWrite copies x [B, S, H, D] into pool [N, H, P, D] at
	// positions start[b] … start[b]+S−1 of each sequence b:
	//
	//	pool[table[b, p/P], h, p mod P, :] = x[b, s, h, :], p = start[b]+s
	//
	// table is I32 [B, M] and start I32 [B]; a position at or past M·P, or
	// a block it names outside [0, N), is an error wrapping ErrValue.
	// Other positions of the pool are left as they are.
	PagedCacheWrite(pool, x, table, start *Tensor) error
	// PagedAttention is Decoder.CachedAttention with the keys and values
	// in pools k and v [N, Hkv, P, D], the first lens[b] positions of
	// sequence b read through table [B, M]: softmax(scale·q·kᵀ)·v for q
	// [B, Hq, Sq, D] into out [B, Hq, Sq, D], query s of sequence b at
	// position lens[b] − Sq + s seeing the keys up to its own. lens is I32
	// [B] with Sq ≤ lens[b] ≤ M·P, and the blocks of those positions must
	// lie in [0, N), else the error wraps ErrValue. scale 0 means 1/√D.
	PagedAttention(out, q, k, v, table, lens *Tensor, scale float32) error
}
