package cpu

import (
	"math"
	"sync"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

var _ kernels.FP8 = (*Backend)(nil)

// e4m3Values and e5m2Values are the values of every code of the two FP8
// formats, by which FP8 tensors are widened exactly.
var e4m3Values, e5m2Values = fp8Table(kernels.E4M3ToFloat32), fp8Table(kernels.E5M2ToFloat32)

// fp8Table tabulates dec over the 256 codes.
func fp8Table(dec func(uint8) float32) *[256]float32 {
	var t [256]float32
	for c := range t {
		t[c] = dec(uint8(c))
	}
	return &t
}

// fp8Values is the table of an FP8 dtype.
func fp8Values(dt kernels.DType) *[256]float32 {
	if dt == kernels.E5M2 {
		return e5m2Values
	}
	return e4m3Values
}

// FP8Supported is nil: the CPU emulates FP8 exactly.
func (b *Backend) FP8Supported() error { return nil }

// CastFP8 casts x, scaled, into q's FP8 format and records x's amax (see
// kernels.FP8), in parallel blocks whose amaxes are merged.
func (b *Backend) CastFP8(q, amax, x, scale *kernels.Tensor) error {
	if err := check.CastFP8("cpu: castfp8", b, q, amax, x, scale); err != nil {
		return err
	}
	s, dt := f32(scale)[0], q.DType()
	codes := bytesOf(q)
	var mu sync.Mutex
	var m float32
	parallelFor(x.Len(), 16, func(lo, hi int) {
		var buf []float32
		if x.DType() != kernels.F32 {
			buf = make([]float32, min(hi-lo, ewBlock))
		}
		var bm float32
		for i := lo; i < hi; i += ewBlock {
			j := min(i+ewBlock, hi)
			a, _ := kernels.EncodeFP8(dt, codes[i:j], loadRange(x, i, j, buf), s) // dtypes and lengths checked
			bm = max(bm, a)                                                       // max keeps a NaN
		}
		mu.Lock()
		m = max(m, bm)
		mu.Unlock()
	})
	if amax != nil {
		f32(amax)[0] = m
	}
	return nil
}

// FP8MatMul is the scaled FP8 GEMM (see kernels.FP8): a and b widened
// exactly to float32 (b a block of rows at a time, never whole),
// multiplied by the SGEMM (float32 accumulation), then each sum times
// aScaleInv·bScaleInv (the two scales' float32 product), the bias and the
// activation.
func (b *Backend) FP8MatMul(out, a, bt *kernels.Tensor, p kernels.FP8MatMulParams) error {
	g, err := check.FP8MatMul("cpu: fp8matmul", b, out, a, bt, p)
	if err != nil {
		return err
	}
	a32 := in32(a)
	cv, done := out32(out, false)
	// b widened a block of rows at a time, never whole.
	table, codes := fp8Values(bt.DType()), bytesOf(bt)
	blockedGemmT(cv, a32, g.M, g.N, g.K, 1, 0, widenedRows(g.K, func(dst []float32, r int) {
		for i, c := range codes[r*g.K : (r+1)*g.K] {
			dst[i] = table[c]
		}
	}))
	sa, sb := f32(p.AScaleInv), f32(p.BScaleInv)
	var bias []float32
	if p.Bias != nil {
		bias = f32(p.Bias)
	}
	parallelFor(g.M, g.N, func(lo, hi int) {
		for m := lo; m < hi; m++ {
			row := cv[m*g.N : (m+1)*g.N]
			a := sa[0]
			if len(sa) > 1 {
				a = sa[m]
			}
			for n := range row {
				b := sb[0]
				if len(sb) > 1 {
					b = sb[n]
				}
				row[n] *= a * b
			}
		}
		biasAct(cv[lo*g.N:hi*g.N], g.N, bias, p.Act)
	})
	done()
	return nil
}

// CastFP8Rows casts each row of x with its own current scale (see
// kernels.FP8).
func (b *Backend) CastFP8Rows(q, scaleInv, x *kernels.Tensor) error {
	if err := check.CastFP8Rows("cpu: castfp8rows", b, q, scaleInv, x); err != nil {
		return err
	}
	rows, k := x.Shape().Rows(), x.Shape().Last()
	dt := q.DType()
	fmax := kernels.FP8Max(dt)
	codes, inv := bytesOf(q), f32(scaleInv)
	parallelFor(rows, k, func(lo, hi int) {
		buf := make([]float32, k)
		for r := lo; r < hi; r++ {
			v := loadRange(x, r*k, (r+1)*k, buf)
			var amax float32
			for _, xv := range v {
				amax = max(amax, float32(math.Abs(float64(xv))))
			}
			s := float32(1)
			if amax > 0 && !math.IsInf(float64(amax), 0) {
				s = min(fmax/amax, math.MaxFloat32) // float32's largest where the division overflows
			}
			inv[r] = 1 / s
			_, _ = kernels.EncodeFP8(dt, codes[r*k:(r+1)*k], v, s) // dtypes and lengths checked
		}
	})
	return nil
}
