package cpu

import (
	"math"
	"runtime"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
	"github.com/zbench/zbench/kernels/cpu/internal/vecmath"
)

// LayerNorm normalises the rows of x with gamma and the optional beta,
// saving the row statistics into mean and rstd when they are not nil.
func (b *Backend) LayerNorm(out, mean, rstd, x, gamma, beta *kernels.Tensor, eps float32) error {
	dims, err := check.LayerNorm("cpu: LayerNorm", b, out, mean, rstd, x, gamma, beta, eps)
	if err != nil {
		return err
	}
	d, rows := dims.D, dims.Rows

	g := in32(gamma)
	var bt, mu, rs []float32
	if beta != nil {
		bt = in32(beta)
	}
	if mean != nil {
		mu = f32(mean)
	}
	if rstd != nil {
		rs = f32(rstd)
	}
	mapRows(out, x, rows, d, 4*d, func(r int, dst, row []float32) {
		m, v := rowMeanVar(row)
		mf, inv := float32(m), float32(1/math.Sqrt(v+float64(eps)))
		if mu != nil {
			mu[r] = mf
		}
		if rs != nil {
			rs[r] = inv
		}
		normalizeRow(dst, row, g, bt, mf, inv)
	})
	return nil
}

// rowMeanVar returns the mean and the biased variance of row, in two passes
// accumulated in float64 (four partial sums each, to keep the adds from
// waiting on one another; one per vector lane in package vecmath's assembly).
func rowMeanVar(row []float32) (mean, variance float64) {
	if useVecmath {
		mean = vecmath.Sum64(row) / float64(len(row))
		return mean, sumSquares(row, mean) / float64(len(row))
	}
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(row); i += 4 {
		s0 += float64(row[i])
		s1 += float64(row[i+1])
		s2 += float64(row[i+2])
		s3 += float64(row[i+3])
	}
	for ; i < len(row); i++ {
		s0 += float64(row[i])
	}
	mean = ((s0 + s1) + (s2 + s3)) / float64(len(row))
	return mean, sumSquares(row, mean) / float64(len(row))
}

// sumSquares returns Σ (v − c)² over row in float64, each term as in
// package vecmath's SumSqDev64, which it uses where useVecmath is set.
func sumSquares(row []float32, c float64) float64 {
	if useVecmath {
		return vecmath.SumSqDev64(row, c)
	}
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(row); i += 4 {
		d0, d1 := float64(row[i])-c, float64(row[i+1])-c
		d2, d3 := float64(row[i+2])-c, float64(row[i+3])-c
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(row); i++ {
		d := float64(row[i]) - c
		s0 += d * d
	}
	return (s0 + s1) + (s2 + s3)
}

// LayerNormBackward computes dx and, when they are not nil, dgamma and dbeta
// from dy, the forward input x, gamma and the saved row statistics.
func (b *Backend) LayerNormBackward(dx, dgamma, dbeta, dy, x, gamma, mean, rstd *kernels.Tensor) error {
	dims, err := check.LayerNormBackward("cpu: LayerNormBackward", b, dx, dgamma, dbeta, dy, x, gamma, mean, rstd)
	if err != nil {
		return err
	}
	d, rows := dims.D, dims.Rows

	xs, dys, g, mu, rs := in32(x), in32(dy), in32(gamma), f32(mean), f32(rstd)
	o, flush := out32(dx, false)
	params := dgamma != nil || dbeta != nil

	// Rows are split into blocks, each with its own float64 partial sums of
	// dgamma and dbeta, added up in block order so the result does not
	// depend on scheduling.
	blocks := min(rows, runtime.GOMAXPROCS(0))
	per := (rows + blocks - 1) / blocks
	var part []float64
	if params {
		part = make([]float64, blocks*2*d)
	}
	parallelFor(blocks, per*d*6, func(lo, hi int) {
		for blk := lo; blk < hi; blk++ {
			var pg, pb []float64
			if params {
				pg = part[blk*2*d : blk*2*d+d]
				pb = part[blk*2*d+d : (blk+1)*2*d]
			}
			for r := blk * per; r < min(rows, (blk+1)*per); r++ {
				row, dyr, dst := xs[r*d:(r+1)*d], dys[r*d:(r+1)*d], o[r*d:(r+1)*d]
				m, inv := mu[r], rs[r]
				dyr, g, dst := dyr[:len(row)], g[:len(row)], dst[:len(row)]
				var sg, sgx float64
				for j, xv := range row {
					xh := (xv - m) * inv
					gj := dyr[j] * g[j]
					sg += float64(gj)
					sgx += float64(gj * xh)
				}
				if params {
					pg, pb := pg[:len(row)], pb[:len(row)]
					for j, xv := range row {
						pg[j] += float64(dyr[j] * ((xv - m) * inv))
						pb[j] += float64(dyr[j])
					}
				}
				a, bx := float32(sg/float64(d)), float32(sgx/float64(d))
				for j, xv := range row {
					xh := (xv - m) * inv
					dst[j] = inv * (dyr[j]*g[j] - a - xh*bx)
				}
			}
		}
	})
	flush()

	if !params {
		return nil
	}
	var dg, db []float32
	var flushG, flushB func()
	if dgamma != nil {
		dg, flushG = out32(dgamma, false)
	}
	if dbeta != nil {
		db, flushB = out32(dbeta, false)
	}
	parallelFor(d, blocks, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			var sg, sb float64
			for blk := range blocks {
				sg += part[blk*2*d+j]
				sb += part[blk*2*d+d+j]
			}
			if dg != nil {
				dg[j] = float32(sg)
			}
			if db != nil {
				db[j] = float32(sb)
			}
		}
	})
	if flushG != nil {
		flushG()
	}
	if flushB != nil {
		flushB()
	}
	return nil
}

// RMSNorm sets each row of out to x·rsqrt(mean(x²) + eps)·gamma, computed in
// float32 with the mean of squares accumulated in float64.
func (b *Backend) RMSNorm(out, x, gamma *kernels.Tensor, eps float32) error {
	dims, err := check.RMSNorm("cpu: RMSNorm", b, out, x, gamma, eps)
	if err != nil {
		return err
	}
	d, rows := dims.D, dims.Rows

	g := in32(gamma)
	// x·inv·g is LayerNorm's normalisation about a mean of 0.
	mapRows(out, x, rows, d, 3*d, func(_ int, dst, row []float32) {
		inv := float32(1 / math.Sqrt(sumSquares(row, 0)/float64(d)+float64(eps)))
		normalizeRow(dst, row, g, nil, 0, inv)
	})
	return nil
}

// normalizeRow sets dst[j] = (row[j]−m)·inv·g[j] (+ bt[j] when bt is not
// nil).
func normalizeRow(dst, row, g, bt []float32, m, inv float32) {
	if useVecmath {
		vecmath.Normalize(dst, row, g, bt, m, inv)
		return
	}
	g, dst = g[:len(row)], dst[:len(row)]
	if bt == nil {
		for j, xv := range row {
			dst[j] = (xv - m) * inv * g[j]
		}
		return
	}
	bt = bt[:len(row)]
	for j, xv := range row {
		dst[j] = (xv-m)*inv*g[j] + bt[j]
	}
}
