package cpu

import (
	"math"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
	"github.com/zbench/zbench/kernels/cpu/internal/vecmath"
)

var _ kernels.Decoder = (*Backend)(nil)

// RoPE rotates the pairs (i, i+D/2) of every head of x in place by
// pos·invFreq[i] (Hugging Face's rotate-half layout).
func (b *Backend) RoPE(x, pos, invFreq *kernels.Tensor) error {
	g, err := check.RoPE("cpu: RoPE", b, x, pos, invFreq)
	if err != nil {
		return err
	}
	half := g.D / 2
	ps, freq := i32(pos)[:pos.Len()], f32(invFreq)[:half]
	// One token (b, s) at a time: its angles once, then every head.
	parallelFor(g.B*g.S, g.H*g.D*4, func(lo, hi int) {
		cos, sin := make([]float32, half), make([]float32, half)
		buf := make([]float32, g.H*g.D)
		for t := lo; t < hi; t++ {
			p := float32(ps[t])
			for i, f := range freq {
				s, c := math.Sincos(float64(p * f)) // the angle is a float32 product, as in HF
				cos[i], sin[i] = float32(c), float32(s)
			}
			base := t * g.H * g.D
			row := loadRange(x, base, base+g.H*g.D, buf)
			for h := range g.H {
				v := row[h*g.D : (h+1)*g.D]
				for i := range half {
					a, bb := v[i], v[i+half]
					v[i] = a*cos[i] - bb*sin[i]
					v[i+half] = bb*cos[i] + a*sin[i]
				}
			}
			flushRange(x, base, row)
		}
	})
	return nil
}

// SwiGLU sets out = silu(gate)·up.
func (b *Backend) SwiGLU(out, gate, up *kernels.Tensor) error {
	if _, err := check.SwiGLU("cpu: SwiGLU", b, out, gate, up); err != nil {
		return err
	}
	mapBlocks(out, 16, func(dst []float32, lo, hi int, sc *ewScratch) {
		gb, ub := &sc.a, &sc.b
		gv, uv := loadRange(gate, lo, hi, gb[:]), loadRange(up, lo, hi, ub[:])
		uv = uv[:len(dst)]
		if useVecmath {
			// silu(gate) into gb (where a 16-bit gate already is), then
			// the product: dst may be gv or uv (out = gate or up).
			sg := gb[:len(dst)]
			vecmath.SiLU(sg, gv)
			for i, u := range uv {
				dst[i] = sg[i] * u
			}
			return
		}
		for i := range dst {
			dst[i] = silu(gv[i]) * uv[i]
		}
	})
	return nil
}

// CacheWrite copies x [B, S, H, D] into cache [B, H, T, D] from each
// sequence's start position.
func (b *Backend) CacheWrite(cache, x, start *kernels.Tensor) error {
	const op = "cpu: CacheWrite"
	g, err := check.CacheWrite(op, b, cache, x, start)
	if err != nil {
		return err
	}
	starts := i32(start)[:g.B]
	for i, s := range starts {
		if s < 0 || int(s) > g.T-g.S {
			return check.Op(op).That(false, kernels.ErrValue,
				"start[%d] = %d, want it in [0, %d] for %d positions in a cache of %d", i, s, g.T-g.S, g.S, g.T).Err()
		}
	}
	sz := x.DType().Size()
	row := g.D * sz
	src, dst := bytesOf(x), bytesOf(cache)
	parallelFor(g.B*g.S, g.H*g.D, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			bi, s := t/g.S, t%g.S
			p := int(starts[bi]) + s
			for h := range g.H {
				from := ((bi*g.S+s)*g.H + h) * row
				to := ((bi*g.H+h)*g.T + p) * row
				copy(dst[to:to+row], src[from:from+row])
			}
		}
	})
	return nil
}

// CachedAttention runs every query against its sequence's cached keys up
// to its own position (attend).
func (b *Backend) CachedAttention(out, q, k, v, lens *kernels.Tensor, scale float32) error {
	const op = "cpu: CachedAttention"
	g, err := check.CachedAttention(op, b, out, q, k, v, lens, scale)
	if err != nil {
		return err
	}
	ls := i32(lens)[:g.B]
	for i, n := range ls {
		if int(n) < g.Sq || int(n) > g.T {
			return check.Op(op).That(false, kernels.ErrValue,
				"lens[%d] = %d, want it in [%d, %d]: at least the %d queries, at most the cache's capacity", i, n, g.Sq, g.T, g.Sq).Err()
		}
	}
	attendCached(out, q, k, v, ls, kernels.AttentionDims{B: g.B, Hq: g.Hq, Hkv: g.Hkv, Sq: g.Sq, Sk: g.T, D: g.D}, g.Scale)
	return nil
}

// attendCached attends as CachedAttention: query s of sequence b, at
// position lens[b] − Sq + s, sees the keys up to its own.
func attendCached(out, q, k, v *kernels.Tensor, lens []int32, dims kernels.AttentionDims, scale float32) {
	attend(out, q, k, v, attnRun{AttentionDims: dims, scale: scale, visible: func(s, bi int) int {
		return int(lens[bi]) - dims.Sq + s + 1
	}})
}

// Argmax sets out[r] to the index of row r's largest value, the first on
// ties, NaN counting as the largest.
func (b *Backend) Argmax(out, x *kernels.Tensor) error {
	rows, n, err := check.Argmax("cpu: Argmax", b, out, x)
	if err != nil {
		return err
	}
	dst := i32(out)[:rows]
	parallelFor(rows, n, func(lo, hi int) {
		buf := make([]float32, n)
		for r := lo; r < hi; r++ {
			dst[r] = int32(kernels.IndexOfMax(loadRange(x, r*n, (r+1)*n, buf)))
		}
	})
	return nil
}
