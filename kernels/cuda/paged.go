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
	n := int64(g.B) * int64(g.S) * int64(g.H) * int64(g.D)
	return wrap("PagedCacheWrite", b.launch("paged_cache_write_"+x.DType().String(), b.gridFor(n), dim3{x: block}, 0,
		ptrOf(pool), ptrOf(x), ptrOf(table), ptrOf(start), int32(g.B), int32(g.S), int32(g.H), int32(g.D),
		int32(g.N), int32(g.P), int32(g.M), b.errorSlot(checkPagedCacheWriteTable, g.N),
		b.errorSlot(checkPagedCacheWriteStart, g.M*g.P-g.S)))
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
	sp, err := b.splitDecode(g.B*g.Hq*g.Sq, t, g.D)
	if err != nil {
		return wrap("PagedAttention", err)
	}
	if err := b.launch("paged_attn_decode_partial_"+q.DType().String(), sp.grid(), dim3{x: 128}, 0,
		ptrOf(q), ptrOf(k), ptrOf(v), ptrOf(lens), sp.partO, sp.partML,
		int32(g.Hq), int32(g.H), int32(g.Sq), int32(t), int32(g.D), int32(sp.chunk), g.Scale,
		ptrOf(table), int32(g.N), int32(g.P), b.errorSlot(checkPagedAttentionTable, g.N),
		b.errorSlot(checkPagedAttentionLens, t)); err != nil {
		return wrap("PagedAttention", err)
	}
	return wrap("PagedAttention", b.decodeCombine(out, sp, g.D))
}
