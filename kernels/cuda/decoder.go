//go:build cuda

package cuda

import (
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

var _ kernels.Decoder = (*Backend)(nil)

// RoPE rotates x in place, one thread per rotated pair.
func (b *Backend) RoPE(x, pos, invFreq *kernels.Tensor) error {
	g, err := check.RoPE("cuda: RoPE", b, x, pos, invFreq)
	if err != nil {
		return err
	}
	tokens := int64(g.B) * int64(g.S)
	return wrap("RoPE", b.launch("rope_"+x.DType().String(), b.gridFor(tokens*int64(g.H*g.D/2)), dim3{x: block}, 0,
		ptrOf(x), ptrOf(pos), ptrOf(invFreq), tokens, int32(g.H), int32(g.D)))
}

// SwiGLU sets out = silu(gate)·up.
func (b *Backend) SwiGLU(out, gate, up *kernels.Tensor) error {
	n, err := check.SwiGLU("cuda: SwiGLU", b, out, gate, up)
	if err != nil {
		return err
	}
	return wrap("SwiGLU", b.launch("swiglu_"+out.DType().String(), b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(out), ptrOf(gate), ptrOf(up), int64(n)))
}

// CacheWrite copies x into the cache from each sequence's start; a start
// out of range is reported at the next Sync and writes nothing.
func (b *Backend) CacheWrite(cache, x, start *kernels.Tensor) error {
	g, err := check.CacheWrite("cuda: CacheWrite", b, cache, x, start)
	if err != nil {
		return err
	}
	n := int64(g.B) * int64(g.S) * int64(g.H) * int64(g.D)
	return wrap("CacheWrite", b.launch("cache_write_"+x.DType().String(), b.gridFor(n), dim3{x: block}, 0,
		ptrOf(cache), ptrOf(x), ptrOf(start), int32(g.B), int32(g.S), int32(g.H), int32(g.T), int32(g.D),
		b.errorSlot(checkCacheWriteStart, g.T-g.S)))
}

// decodeMaxD is the widest head the cached attention kernel holds in
// registers (32 lanes × 8).
const decodeMaxD = 256

// decodeChunks is the number of key chunks each query row is split into:
// enough blocks to fill the multiprocessors twice over, each chunk at
// least 64 keys. It depends on the cache's capacity, not on the lengths
// (which stay on the device), so a captured graph serves every step.
func (b *Backend) decodeChunks(rows, t int) int {
	want := (2*max(b.info.Cores, 1) + rows - 1) / rows
	return max(1, min(want, (t+63)/64, 65535))
}

// CachedAttention runs the queries against the cache in two passes:
// partial softmax states over key chunks (split-K, "flash decoding", which
// keeps the multiprocessors busy at batch 1), then their combination.
func (b *Backend) CachedAttention(out, q, k, v, lens *kernels.Tensor, scale float32) error {
	g, err := check.CachedAttention("cuda: CachedAttention", b, out, q, k, v, lens, scale)
	if err != nil {
		return err
	}
	if g.D > decodeMaxD {
		return fmt.Errorf("cuda: CachedAttention: head dimension %d > %d: %w", g.D, decodeMaxD, kernels.ErrUnsupported)
	}
	sp, err := b.splitDecode(g.B*g.Hq*g.Sq, g.T, g.D)
	if err != nil {
		return wrap("CachedAttention", err)
	}
	dt := q.DType().String()
	if err := b.launch("attn_decode_partial_"+dt, sp.grid(), dim3{x: 128}, 0,
		ptrOf(q), ptrOf(k), ptrOf(v), ptrOf(lens), sp.partO, sp.partML,
		int32(g.Hq), int32(g.Hkv), int32(g.Sq), int32(g.T), int32(g.D), int32(sp.chunk), g.Scale,
		b.errorSlot(checkCachedAttentionLens, g.T)); err != nil {
		return wrap("CachedAttention", err)
	}
	return wrap("CachedAttention", b.decodeCombine(out, sp, g.D))
}

// A decodeSplit is the split-K layout of attention of rows query rows
// over a cache of t keys: nchunks chunks of chunk keys a row, and the
// workspace of the partial passes' outputs and (max, sum) pairs.
type decodeSplit struct {
	rows, nchunks, chunk int
	partO, partML        devptr
}

// splitDecode lays out the split-K attention of rows query rows of width d
// over t keys, taking the workspace.
func (b *Backend) splitDecode(rows, t, d int) (decodeSplit, error) {
	sp := decodeSplit{rows: rows, nchunks: b.decodeChunks(rows, t)}
	sp.chunk = (t + sp.nchunks - 1) / sp.nchunks
	partO := int64(rows) * int64(sp.nchunks) * int64(d) * 4
	ws, err := b.workspace(partO + int64(rows)*int64(sp.nchunks)*8)
	sp.partO, sp.partML = ws, ws+devptr(partO)
	return sp, err
}

// grid is the partial pass's grid: a block per row and chunk.
func (sp decodeSplit) grid() dim3 { return dim3{x: sp.rows, y: sp.nchunks} }

// decodeCombine launches the pass that merges each row's chunks into out.
func (b *Backend) decodeCombine(out *kernels.Tensor, sp decodeSplit, d int) error {
	return b.launch("attn_decode_combine_"+out.DType().String(), dim3{x: sp.rows}, dim3{x: min(128, (d+31)&^31)}, 0,
		ptrOf(out), sp.partO, sp.partML, int32(sp.nchunks), int32(d))
}

// Argmax finds each row's largest value with one block per row.
func (b *Backend) Argmax(out, x *kernels.Tensor) error {
	rows, n, err := check.Argmax("cuda: Argmax", b, out, x)
	if err != nil {
		return err
	}
	return wrap("Argmax", b.launch("argmax_"+x.DType().String(), dim3{x: rows}, dim3{x: 256}, 0,
		ptrOf(out), ptrOf(x), int32(n)))
}
