//go:build cuda

package cuda

import (
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

var _ kernels.PagedKV = (*Backend)(nil)

// PagedCacheWrite copies x into the pool's blocks that each sequence's
// table row names, from its start; a start out of range, or a block
// outside the pool, is reported at the next Sync and not written.
func (b *Backend) PagedCacheWrite(pool, x, table, start *kernels.Tensor) error {
	g, err := check.PagedCacheWrite("cuda: PagedCacheWrite", b, pool, x, table, start)
	if err != nil {
		return err
	}
	last := g.M*g.P - g.S
	if err := b.checkRange(checkPagedCacheWriteStart, start, 0, int32(last+1), 0, last); err != nil {
		return wrap("PagedCacheWrite", err)
	}
	n := int64(g.B) * int64(g.S) * int64(g.H) * int64(g.D)
	return wrap("PagedCacheWrite", b.launch("paged_cache_write_"+x.DType().String(), b.gridFor(n), dim3{x: block}, 0,
		ptrOf(pool), ptrOf(x), ptrOf(table), ptrOf(start), int32(g.B), int32(g.S), int32(g.H), int32(g.D),
		int32(g.N), int32(g.P), int32(g.M), b.errorSlot(checkPagedCacheWriteTable, g.N)))
}

// PagedAttention is CachedAttention's two passes with the keys and values
// read through the block table: the partial pass finds key j of sequence b
// in row j mod P of block table[b, j/P]. A length out of range, or a block
// outside the pool, is reported at the next Sync.
func (b *Backend) PagedAttention(out, q, k, v, table, lens *kernels.Tensor, scale float32) error {
	g, err := check.PagedAttention("cuda: PagedAttention", b, out, q, k, v, table, lens, scale)
	if err != nil {
		return err
	}
	if g.D > decodeMaxD {
		return fmt.Errorf("cuda: PagedAttention: head dimension %d > %d: %w", g.D, decodeMaxD, kernels.ErrUnsupported)
	}
	t := g.M * g.P
	if err := b.checkRange(checkPagedAttentionLens, lens, int32(g.Sq), int32(t+1), int32(g.Sq), t); err != nil {
		return wrap("PagedAttention", err)
	}
	rows := g.B * g.Hq * g.Sq
	nchunks := b.decodeChunks(rows, t)
	chunk := (t + nchunks - 1) / nchunks
	partO := int64(rows) * int64(nchunks) * int64(g.D) * 4
	ws, err := b.workspace(partO + int64(rows)*int64(nchunks)*8)
	if err != nil {
		return wrap("PagedAttention", err)
	}
	dt := q.DType().String()
	if err := b.launch("paged_attn_decode_partial_"+dt, dim3{x: rows, y: nchunks}, dim3{x: 128}, 0,
		ptrOf(q), ptrOf(k), ptrOf(v), ptrOf(lens), ws, ws+devptr(partO),
		int32(g.Hq), int32(g.H), int32(g.Sq), int32(t), int32(g.D), int32(chunk), g.Scale,
		ptrOf(table), int32(g.N), int32(g.P), b.errorSlot(checkPagedAttentionTable, g.N)); err != nil {
		return wrap("PagedAttention", err)
	}
	return wrap("PagedAttention", b.launch("attn_decode_combine_"+dt, dim3{x: rows}, dim3{x: min(128, (g.D+31)&^31)}, 0,
		ptrOf(out), ws, ws+devptr(partO), int32(nchunks), int32(g.D)))
}
