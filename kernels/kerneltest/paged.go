package kerneltest

import (
	"math"

	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, pagedTests()) }

// paged returns the backend's PagedKV ops, skipping where it has none.
func (e *env) paged() kernels.PagedKV {
	e.Helper()
	return optionalGroup[kernels.PagedKV](e)
}

// pagedTable is a block table [B, M] naming distinct blocks of a pool of n
// in a shuffled order, as a pool that served other sequences leaves them.
func (e *env) pagedTable(B, M, n int) []int32 {
	perm := e.rng.Perm(n)
	t := make([]int32, B*M)
	for i := range t {
		t[i] = int32(perm[i])
	}
	return t
}

// unpage is the float64 cache [B, H, M·P, D] of pool [N, H, P, D] read
// through table [B, M].
func unpage(pool []float64, table []int32, B, M, H, P, D int) []float64 {
	T := M * P
	out := make([]float64, B*H*T*D)
	for b := range B {
		for h := range H {
			for p := range T {
				blk := int(table[b*M+p/P])
				copy(out[((b*H+h)*T+p)*D:][:D], pool[((blk*H+h)*P+p%P)*D:][:D])
			}
		}
	}
	return out
}

func pagedTests() []test {
	var ts []test
	for _, dt := range kernels.FloatTypes {
		for _, c := range []struct {
			B, S, H, N, P, M, D int
			start               []int32
		}{{1, 1, 1, 1, 1, 1, 2, []int32{0}}, {2, 1, 4, 9, 16, 4, 64, []int32{63, 17}}, {3, 20, 2, 12, 8, 4, 34, []int32{0, 7, 12}}} {
			ts = append(ts, test{name("PagedCacheWrite", "dtype", dt, "x", kernels.Shape{c.B, c.S, c.H, c.D}, "pool", kernels.Shape{c.N, c.H, c.P, c.D}), func(e *env) {
				pool, before := e.mutable(dt, c.N, c.H, c.P, c.D)
				x, xv := e.Input("x", dt, c.B, c.S, c.H, c.D)
				table := e.pagedTable(c.B, c.M, c.N)
				require.NoError(e, e.paged().PagedCacheWrite(pool, x, e.Ints("table", table, c.B, c.M), e.Ints("start", c.start, c.B)))
				want := append([]float64(nil), before...)
				for b := range c.B {
					for s := range c.S {
						p := int(c.start[b]) + s
						blk := int(table[b*c.M+p/c.P])
						for h := range c.H {
							copy(want[((blk*c.H+h)*c.P+p%c.P)*c.D:][:c.D], xv[((b*c.S+s)*c.H+h)*c.D:][:c.D])
						}
					}
				}
				require.NoError(e, e.b.Sync())
				got, err := kernels.ToFloat32(pool)
				require.NoError(e, err)
				require.Equal(e, want, widen(got), "a copy is exact, and the other positions are kept")
			}})
		}
		for _, c := range []struct {
			B, Hq, Hkv, Sq, N, P, M, D int
			lens                       []int32
			// seq, where set, names each row's sequence: rows of one
			// sequence read one table row, as a ragged step's tokens do.
			seq []int
		}{
			{1, 1, 1, 1, 1, 1, 1, 2, []int32{1}, nil},
			{1, 32, 4, 1, 80, 16, 70, 64, []int32{1037}, nil}, // TinyLlama's heads at batch 1
			{3, 8, 2, 1, 30, 8, 9, 128, []int32{1, 70, 33}, nil},
			{2, 6, 6, 9, 12, 16, 3, 34, []int32{9, 40}, nil}, // a prefill chunk after a cached prefix
			{2, 4, 1, 17, 8, 5, 4, 24, []int32{17, 20}, nil},
			// A ragged step: two single tokens, a chunk of four after a
			// cached prefix, a chunk of three from the start, a single.
			{10, 8, 2, 1, 40, 4, 6, 64, []int32{7, 21, 10, 11, 12, 13, 1, 2, 3, 5}, []int{0, 1, 2, 2, 2, 2, 3, 3, 3, 4}},
			// Only chunks, one right after the other.
			{5, 4, 4, 1, 12, 8, 3, 32, []int32{5, 6, 17, 18, 19}, []int{0, 0, 1, 1, 1}},
		} {
			ts = append(ts, test{name("PagedAttention", "dtype", dt, "q", kernels.Shape{c.B, c.Hq, c.Sq, c.D}, "pool", kernels.Shape{c.N, c.Hkv, c.P, c.D}), func(e *env) {
				q, qv := e.Input("q", dt, c.B, c.Hq, c.Sq, c.D)
				k, kv := e.Uniform("k", dt, -2, 2, c.N, c.Hkv, c.P, c.D)
				v, vv := e.Input("v", dt, c.N, c.Hkv, c.P, c.D)
				seq, seqs := c.seq, c.B
				if seq == nil {
					seq = make([]int, c.B)
					for b := range seq {
						seq[b] = b
					}
				} else {
					seqs = seq[len(seq)-1] + 1
				}
				// Blocks past each sequence's length may name any block:
				// they must not be read.
				longest := make([]int, seqs)
				for b, sq := range seq {
					longest[sq] = max(longest[sq], int(c.lens[b]))
				}
				seqTable := e.pagedTable(seqs, c.M, c.N)
				for sq, n := range longest {
					for j := (n + c.P - 1) / c.P; j < c.M; j++ {
						seqTable[sq*c.M+j] = -1
					}
				}
				table := make([]int32, c.B*c.M)
				for b, sq := range seq {
					copy(table[b*c.M:(b+1)*c.M], seqTable[sq*c.M:(sq+1)*c.M])
				}
				out := e.Output(dt, c.B, c.Hq, c.Sq, c.D)
				require.NoError(e, e.paged().PagedAttention(out, q, k, v, e.Ints("table", table, c.B, c.M), e.Ints("lens", c.lens, c.B), 0))
				for i := range table {
					table[i] = max(table[i], 0)
				}
				T := c.M * c.P
				e.Check("out", out, RefCachedAttention(qv, unpage(kv, table, c.B, c.M, c.Hkv, c.P, c.D), unpage(vv, table, c.B, c.M, c.Hkv, c.P, c.D),
					c.lens, c.B, c.Hq, c.Hkv, c.Sq, T, c.D, 1/math.Sqrt(float64(c.D))), 0)
			}})
		}
	}
	return append(ts, test{"paged/errors", pagedErrors})
}

// pagedErrors checks that bad calls fail with errors naming the op and
// what is wrong.
func pagedErrors(e *env) {
	p := e.paged()
	f32 := kernels.F32
	pool, _ := e.mutable(f32, 4, 2, 3, 6) // 4 blocks of 3 positions
	x, _ := e.Input("x", f32, 2, 2, 2, 6)
	table := e.Ints("table", []int32{0, 1, 2, 3}, 2, 2) // 6 positions a sequence
	e.requireDataErr(p.PagedCacheWrite(pool, x, table, e.Ints("start", []int32{0, 5}, 2)), kernels.ErrValue, "PagedCacheWrite", "start[1] = 5")
	e.requireDataErr(p.PagedCacheWrite(pool, x, table, e.Ints("start-", []int32{-1, 0}, 2)), kernels.ErrValue, "PagedCacheWrite", "start[0] = -1")
	bad := e.Ints("bad", []int32{0, 4, 2, 3}, 2, 2)
	e.requireDataErr(p.PagedCacheWrite(pool, x, bad, e.Ints("start0", []int32{2, 0}, 2)), kernels.ErrValue, "PagedCacheWrite", "table[0, 1] = 4")
	e.requireOpErr(p.PagedCacheWrite(pool, x, e.Ints("t3", []int32{0, 1, 2}, 3, 1), e.Ints("s3", []int32{0, 0, 0}, 3)), kernels.ErrShape, "PagedCacheWrite", "x has shape")
	e.requireOpErr(p.PagedCacheWrite(pool, x, e.Output(f32, 2, 2), e.Ints("s2", []int32{0, 0}, 2)), kernels.ErrDType, "PagedCacheWrite", "table")

	q, _ := e.Input("q", f32, 2, 4, 2, 6)
	out := e.Output(f32, 2, 4, 2, 6)
	e.requireDataErr(p.PagedAttention(out, q, pool, pool, table, e.Ints("lens", []int32{1, 3}, 2), 0), kernels.ErrValue, "PagedAttention", "lens[0] = 1")
	e.requireDataErr(p.PagedAttention(out, q, pool, pool, table, e.Ints("lens7", []int32{2, 7}, 2), 0), kernels.ErrValue, "PagedAttention", "lens[1] = 7")
	e.requireDataErr(p.PagedAttention(out, q, pool, pool, bad, e.Ints("lens4", []int32{4, 2}, 2), 0), kernels.ErrValue, "PagedAttention", "table[0, 1] = 4")
	q3, _ := e.Input("q3", f32, 2, 3, 2, 6)
	e.requireOpErr(p.PagedAttention(e.Output(f32, 2, 3, 2, 6), q3, pool, pool, table, e.Ints("lens2", []int32{2, 2}, 2), 0),
		kernels.ErrShape, "PagedAttention", "not a multiple")
	e.requireOpErr(p.PagedAttention(out, q, pool, pool, table, e.Ints("lensInf", []int32{2, 2}, 2), float32(math.Inf(1))),
		kernels.ErrValue, "PagedAttention", "scale")
}
