package cpu

import (
	"math"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

var _ kernels.DecoderBackward = (*Backend)(nil)

// dgammaCols is the number of columns of dgamma one task of
// RMSNormBackward sums over all rows: a run long enough to stream the rows,
// short enough for its accumulators to stay in L1.
const dgammaCols = 256

// RMSNormBackward computes dx and, when dgamma is not nil, dgamma from dy,
// the forward input x and gamma, recomputing each row's 1/rms as RMSNorm
// does. dgamma is summed over rows in row order in float64, so it does not
// depend on the number of threads.
func (b *Backend) RMSNormBackward(dx, dgamma, dy, x, gamma *kernels.Tensor, eps float32) error {
	dims, err := check.RMSNormBackward("cpu: RMSNormBackward", b, dx, dgamma, dy, x, gamma, eps)
	if err != nil {
		return err
	}
	d, rows := dims.D, dims.Rows
	xs, dys, g := in32(x), in32(dy), in32(gamma)

	// 1/rms of every row, as RMSNorm computes it.
	rs := make([]float32, rows)
	parallelFor(rows, d, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			rs[r] = float32(1 / math.Sqrt(sumSquares(xs[r*d:(r+1)*d], 0)/float64(d)+float64(eps)))
		}
	})

	// dgamma before dx: dx may be dy, and for F32 dys is dy's storage.
	if dgamma != nil {
		dg, flushG := out32(dgamma, false)
		cols := (d + dgammaCols - 1) / dgammaCols
		parallelFor(cols, rows*dgammaCols*2, func(lo, hi int) {
			acc := make([]float64, dgammaCols)
			for blk := lo; blk < hi; blk++ {
				c0, c1 := blk*dgammaCols, min(d, (blk+1)*dgammaCols)
				acc := acc[:c1-c0]
				clear(acc)
				for r, inv := range rs {
					xr, dyr := xs[r*d+c0:r*d+c1], dys[r*d+c0:r*d+c1]
					dyr = dyr[:len(xr)]
					for j, v := range xr {
						acc[j] += float64(dyr[j] * v * inv)
					}
				}
				for j, s := range acc {
					dg[c0+j] = float32(s)
				}
			}
		})
		flushG()
	}

	o, flush := out32(dx, false)
	parallelFor(rows, 4*d, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, dyr, dst := xs[r*d:(r+1)*d], dys[r*d:(r+1)*d], o[r*d:(r+1)*d]
			dyr, g, dst := dyr[:len(xr)], g[:len(xr)], dst[:len(xr)]
			var s float64
			for j, v := range xr {
				s += float64(dyr[j] * g[j] * v)
			}
			inv := rs[r]
			ri := float64(inv)
			c := float32(s / float64(d) * ri * ri * ri)
			// Each element's dy is read before its dx is written: dx may be dy.
			for j, v := range xr {
				dst[j] = inv*g[j]*dyr[j] - v*c
			}
		}
	})
	flush()
	return nil
}

// SwiGLUBackward sets dgate = dy·up·silu'(gate) and dup = dy·silu(gate).
// Each block's inputs are copied before its outputs are stored, so the
// outputs may be any of the inputs.
func (b *Backend) SwiGLUBackward(dgate, dup, dy, gate, up *kernels.Tensor) error {
	n, err := check.SwiGLUBackward("cpu: SwiGLUBackward", b, dgate, dup, dy, gate, up)
	if err != nil {
		return err
	}
	parallelFor(n, 32, func(lo, hi int) {
		var db, gb, ub, ga, ua [ewBlock]float32
		for s := lo; s < hi; s += ewBlock {
			e := min(s+ewBlock, hi)
			dyv, gv, uv := loadCopy(dy, s, e, db[:]), loadCopy(gate, s, e, gb[:]), loadCopy(up, s, e, ub[:])
			gv, uv = gv[:len(dyv)], uv[:len(dyv)]
			outG, outU := ga[:len(dyv)], ua[:len(dyv)]
			for i, g := range gv {
				outG[i] = dyv[i] * uv[i] * siluGrad(g)
				outU[i] = dyv[i] * silu(g)
			}
			storeRange(dgate, s, outG)
			storeRange(dup, s, outU)
		}
	})
	return nil
}

// Dropout sets out = x·s where DropoutKeep(seed, i, p), else 0, with
// s = kernels.DropoutScale(p).
func (b *Backend) Dropout(out, x *kernels.Tensor, p float32, seed uint64) error {
	if _, err := check.Dropout("cpu: Dropout", b, out, x, p); err != nil {
		return err
	}
	s := kernels.DropoutScale(p)
	mapBlocks(out, 8, func(dst []float32, lo, hi int, sc *ewScratch) {
		xb := &sc.a
		xv := loadRange(x, lo, hi, xb[:])
		xv = xv[:len(dst)]
		for i, v := range xv { // dst may be xv (out = x): element i is read first
			if kernels.DropoutUniform(seed, lo+i) >= p {
				dst[i] = v * s
			} else {
				dst[i] = 0
			}
		}
	})
	return nil
}

// loadCopy is loadRange into buf even for F32: a copy that stays valid
// when t is written.
func loadCopy(t *kernels.Tensor, lo, hi int, buf []float32) []float32 {
	if t.DType() == kernels.F32 {
		return buf[:copy(buf[:hi-lo], f32(t)[lo:hi])]
	}
	return loadRange(t, lo, hi, buf)
}

// storeRange rounds vals into t's elements from lo (a copy for F32).
func storeRange(t *kernels.Tensor, lo int, vals []float32) {
	if t.DType() == kernels.F32 {
		copy(f32(t)[lo:lo+len(vals)], vals)
		return
	}
	flushRange(t, lo, vals)
}
