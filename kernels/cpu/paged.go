package cpu

import (
	"errors"
	"fmt"
	"slices"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

var _ kernels.PagedKV = (*Backend)(nil)

// pagedBlocks checks that the blocks table row b names for positions
// [0, n) lie in [0, N), and that n is within the row's M·P positions; arg
// names the argument that gave n ("start[1] = 5").
func pagedBlocks(op string, g check.PagedDims, table []int32, b, n int, arg, what string) error {
	if n > g.M*g.P {
		return check.Op(op).That(false, kernels.ErrValue,
			"%s: %s reach position %d, past the %d of a table row (%d blocks of %d)", arg, what, n, g.M*g.P, g.M, g.P).Err()
	}
	for j := range (n + g.P - 1) / g.P {
		if blk := table[b*g.M+j]; blk < 0 || int(blk) >= g.N {
			return check.Op(op).That(false, kernels.ErrValue,
				"table[%d, %d] = %d, want a block in [0, %d)", b, j, blk, g.N).Err()
		}
	}
	return nil
}

// PagedCacheWrite copies x [B, S, H, D] into the pool's blocks that each
// sequence's table row names, from its start position.
func (b *Backend) PagedCacheWrite(pool, x, table, start *kernels.Tensor) error {
	const op = "cpu: PagedCacheWrite"
	g, err := check.PagedCacheWrite(op, b, pool, x, table, start)
	if err != nil {
		return err
	}
	tab, starts := i32(table)[:g.B*g.M], i32(start)[:g.B]
	for bi, s := range starts {
		if s < 0 {
			return check.Op(op).That(false, kernels.ErrValue, "start[%d] = %d is negative", bi, s).Err()
		}
		if err := pagedBlocks(op, g.PagedDims, tab, bi, int(s)+g.S, fmt.Sprintf("start[%d] = %d", bi, s), "the positions written"); err != nil {
			return err
		}
	}
	row := g.D * x.DType().Size()
	src, dst := bytesOf(x), bytesOf(pool)
	parallelFor(g.B*g.S, g.H*g.D, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			bi, s := t/g.S, t%g.S
			p := int(starts[bi]) + s
			blk, off := int(tab[bi*g.M+p/g.P]), p%g.P
			for h := range g.H {
				from := ((bi*g.S+s)*g.H + h) * row
				to := ((blk*g.H+h)*g.P + off) * row
				copy(dst[to:to+row], src[from:from+row])
			}
		}
	})
	return nil
}

// PagedAttention gathers each sequence's keys and values from the pools'
// blocks into caches of their own and attends as CachedAttention does.
// Where Sq is 1, consecutive rows that read one table row at consecutive
// lengths (a ragged step's tokens of one sequence) are one sequence's
// queries: its blocks are gathered once and attended with those rows as
// its Sq, which is the same arithmetic as one row at a time.
func (b *Backend) PagedAttention(out, q, k, v, table, lens *kernels.Tensor, scale float32) error {
	const op = "cpu: PagedAttention"
	g, err := check.PagedAttention(op, b, out, q, k, v, table, lens, scale)
	if err != nil {
		return err
	}
	tab, ls := i32(table)[:g.B*g.M], i32(lens)[:g.B]
	for bi, n := range ls {
		if int(n) < g.Sq {
			return check.Op(op).That(false, kernels.ErrValue,
				"lens[%d] = %d, want at least the %d queries", bi, n, g.Sq).Err()
		}
		if err := pagedBlocks(op, g.PagedDims, tab, bi, int(n), fmt.Sprintf("lens[%d] = %d", bi, n), "the keys attended"); err != nil {
			return err
		}
	}
	if g.Sq > 1 {
		return b.pagedAttend(out, q, k, v, tab, ls, g)
	}
	// Rows of one sequence, each run of more than one its own call; the
	// single rows between them go together.
	row := g.Hq * g.D * q.DType().Size()
	for lo := 0; lo < g.B; {
		hi, run := lo+1, pagedRun(tab, ls, g.M, lo)
		if run {
			for pagedRun(tab, ls, g.M, hi-1) {
				hi++
			}
		} else {
			for hi < g.B && !pagedRun(tab, ls, g.M, hi) {
				hi++
			}
		}
		qs, outs := rowsOf(q, lo, hi, row), rowsOf(out, lo, hi, row)
		if run {
			err = b.pagedAttendRun(outs, qs, k, v, tab[lo*g.M:(lo+1)*g.M], ls[lo:hi], g)
		} else {
			s := g
			s.B = hi - lo
			err = b.pagedAttend(outs, qs, k, v, tab[lo*g.M:hi*g.M], ls[lo:hi], s)
		}
		if err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// pagedRun reports whether row b of a Sq = 1 call starts a run: the next
// row reads the same table row one position further.
func pagedRun(tab, ls []int32, M, b int) bool {
	return b+1 < len(ls) && ls[b+1] == ls[b]+1 && slices.Equal(tab[(b+1)*M:(b+2)*M], tab[b*M:(b+1)*M])
}

// rowsOf is rows [lo, hi) of t's leading axis, rows of size bytes, as a
// tensor sharing t's memory, for the backend's own calls.
func rowsOf(t *kernels.Tensor, lo, hi, size int) *kernels.Tensor {
	s := append(kernels.Shape{hi - lo}, t.Shape()[1:]...)
	return kernels.NewTensor(t.Backend(), t.DType(), s, &storage{buf: bytesOf(t)[lo*size : hi*size]})
}

// pagedAttendRun attends the rows q and out (views [n, Hq, 1, D] of a
// Sq = 1 call's) of one sequence's consecutive queries (table row tab,
// lengths ls) as that sequence's n queries: SwapAxes lays them out [1,
// Hq, n, D] for the call and its output back.
func (b *Backend) pagedAttendRun(out, q, k, v *kernels.Tensor, tab, ls []int32, g check.PagedAttentionDims) error {
	n := len(ls)
	rows, err := q.Reshape(1, n, g.Hq, g.D)
	if err != nil {
		return err
	}
	outRows, err := out.Reshape(1, n, g.Hq, g.D)
	if err != nil {
		return err
	}
	qr, err := b.Alloc(q.DType(), 1, g.Hq, n, g.D)
	if err != nil {
		return err
	}
	or, err := b.Alloc(q.DType(), 1, g.Hq, n, g.D)
	if err != nil {
		return errors.Join(err, b.Free(qr))
	}
	s := g
	s.B, s.Sq = 1, n
	err = b.SwapAxes(qr, rows)
	if err == nil {
		err = b.pagedAttend(or, qr, k, v, tab, ls[n-1:], s)
	}
	if err == nil {
		err = b.SwapAxes(outRows, or)
	}
	return errors.Join(err, b.Free(qr), b.Free(or))
}

// pagedAttend is PagedAttention on checked arguments (tab and ls of g.B
// rows): each sequence's blocks gathered into caches [B, Hkv, T, D], T
// the longest length rounded up to a power of two so that a server's
// steps, whose lengths grow by one each, reuse a few sizes of buffers
// from the pool instead of leaving one of every size in it.
func (b *Backend) pagedAttend(out, q, k, v *kernels.Tensor, tab, ls []int32, g check.PagedAttentionDims) error {
	T := 1
	for _, n := range ls {
		for T < int(n) {
			T *= 2
		}
	}
	kc, err := b.Alloc(k.DType(), g.B, g.H, T, g.D)
	if err != nil {
		return err
	}
	vc, err := b.Alloc(v.DType(), g.B, g.H, T, g.D)
	if err != nil {
		return errors.Join(err, b.Free(kc))
	}
	row := g.D * k.DType().Size()
	for _, pair := range [][2]*kernels.Tensor{{k, kc}, {v, vc}} {
		src, dst := bytesOf(pair[0]), bytesOf(pair[1])
		parallelFor(g.B*g.H, T*g.D, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				bi, h := t/g.H, t%g.H
				n := int(ls[bi])
				for j := 0; j*g.P < n; j++ {
					cnt := min(g.P, n-j*g.P)
					from := ((int(tab[bi*g.M+j])*g.H + h) * g.P) * row
					to := ((bi*g.H+h)*T + j*g.P) * row
					copy(dst[to:to+cnt*row], src[from:from+cnt*row])
				}
			}
		})
	}
	attendCached(out, q, kc, vc, ls, kernels.AttentionDims{B: g.B, Hq: g.Hq, Hkv: g.H, Sq: g.Sq, Sk: T, D: g.D}, g.Scale)
	return errors.Join(b.Free(kc), b.Free(vc))
}
