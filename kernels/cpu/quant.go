package cpu

import (
	"unsafe"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
	"github.com/zbench/zbench/kernels/cpu/internal/qgemm"
)

var _ kernels.Quant = (*Backend)(nil)

// i8 views an I8 tensor's storage.
func i8(t *kernels.Tensor) []int8 {
	buf := bytesOf(t)
	return unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf))
}

// quantizeRow sets dst[i] = clamp(round(src[i]/s), ±QMax), half to even,
// NaN giving 0 (kernels.QuantizeValue, without its float64 rounding).
func quantizeRow(dst []int8, src []float32, s float32) {
	dst = dst[:len(src)]
	if qgemm.Available && len(src) > 0 {
		qgemm.Quantize(&dst[0], &src[0], len(src), s)
		return
	}
	for i, v := range src {
		y := v / s
		switch {
		case y >= kernels.QMax:
			dst[i] = kernels.QMax
		case y <= -kernels.QMax:
			dst[i] = -kernels.QMax
		case y == y:
			dst[i] = int8((y + roundMagic) - roundMagic)
		default:
			dst[i] = 0
		}
	}
}

// rowScale is the dynamic scale of a row: max |x| / QMax, 1 for a row of
// zeros, NaN when the row holds a NaN.
func rowScale(row []float32) float32 {
	if qgemm.Available && len(row) > 0 {
		amax := qgemm.AbsMax(&row[0], len(row))
		switch {
		case amax != amax:
			return amax
		case amax == 0:
			return 1
		}
		return amax / kernels.QMax
	}
	var amax float32
	for _, v := range row {
		if v != v {
			return v
		}
		amax = max(amax, v, -v)
	}
	if amax == 0 {
		return 1
	}
	return amax / kernels.QMax
}

// Quantize sets q to x divided by its scale, rounded half to even and
// clamped to ±127, computing per-row scales first when dynamic.
func (b *Backend) Quantize(q, scale, x *kernels.Tensor, dynamic bool) error {
	g, err := check.Quantize("cpu: quantize", b, q, scale, x, dynamic)
	if err != nil {
		return err
	}
	qs, ss := i8(q), f32(scale)
	parallelFor(g.Rows, 2*g.K, func(lo, hi int) {
		var buf []float32
		if x.DType() != kernels.F32 {
			buf = make([]float32, g.K)
		}
		for r := lo; r < hi; r++ {
			row := loadRange(x, r*g.K, (r+1)*g.K, buf)
			s := ss[0]
			switch {
			case dynamic:
				s = rowScale(row)
				ss[r] = s
			case g.PerRow:
				s = ss[r]
			}
			quantizeRow(qs[r*g.K:(r+1)*g.K], row, s)
		}
	})
	return nil
}

// Dequantize sets out = q·scale, per tensor or per row.
func (b *Backend) Dequantize(out, q, scale *kernels.Tensor) error {
	g, err := check.Dequantize("cpu: dequantize", b, out, q, scale)
	if err != nil {
		return err
	}
	qs, ss := i8(q), f32(scale)
	parallelFor(g.Rows, g.K, func(lo, hi int) {
		buf := make([]float32, g.K)
		for r := lo; r < hi; r++ {
			s := ss[0]
			if g.PerRow {
				s = ss[r]
			}
			dst := destRange(out, r*g.K, (r+1)*g.K, buf)
			for i, v := range qs[r*g.K : (r+1)*g.K] {
				dst[i] = float32(v) * s
			}
			flushRange(out, r*g.K, dst)
		}
	})
	return nil
}

// qcols is the width of the column blocks QMatMul hands to its workers.
const qcols = 64

// QMatMul multiplies int8 a by the transpose of int8 b with exact int32
// sums (AVX-512 VNNI where the CPU has it, else Go) and applies the
// epilogue of kernels.Quant.QMatMul, one block of columns per worker.
func (b *Backend) QMatMul(out, a, bt *kernels.Tensor, p kernels.QMatMulParams) error {
	g, err := check.QMatMul("cpu: qmatmul", b, out, a, bt, p)
	if err != nil {
		return err
	}
	av, bv := i8(a), i8(bt)
	blocks := (g.N + qcols - 1) / qcols
	parallelFor(blocks, g.M*qcols*g.K/16, func(lo, hi int) {
		acc := make([]int32, g.M*qcols)
		y, cs, bias := make([]float32, qcols), make([]float32, qcols), make([]float32, qcols)
		for blk := lo; blk < hi; blk++ {
			n0 := blk * qcols
			w := min(qcols, g.N-n0)
			dotI8(acc[:g.M*w], av, bv[n0*g.K:(n0+w)*g.K], g.M, w, g.K)
			qepilogue(out, acc, y[:w], cs[:w], bias[:w], g, p, n0)
		}
	})
	return nil
}

// dotI8 sets acc [m, n] to the int32 dot products of the rows of a
// [m, k] with the rows of b [n, k]. Below 4 rows (decode) each weight is
// read once, its correction summed beside the products (Dot1x4S); from 4
// rows on, the corrections are summed once per block of 4 columns and
// the 4×4 tiles share them (Dot1x4S takes the rows left over).
func dotI8(acc []int32, a, b []int8, m, n, k int) {
	n4 := 0
	if qgemm.Available {
		n4 = n &^ 3
		var corr [4]int32
		for j := 0; j < n4; j += 4 {
			if m < 4 {
				for i := range m {
					qgemm.Dot1x4S(&a[i*k], &b[j*k], k, k, &acc[i*n+j])
				}
				continue
			}
			for c := range corr {
				corr[c] = 128 * qgemm.Sum(&b[(j+c)*k], k)
			}
			i := 0
			for ; i+4 <= m; i += 4 {
				qgemm.Dot4x4(&a[i*k], k, &b[j*k], k, k, &acc[i*n+j], n, &corr[0])
			}
			for ; i < m; i++ {
				qgemm.Dot1x4S(&a[i*k], &b[j*k], k, k, &acc[i*n+j])
			}
		}
	}
	for j := n4; j < n; j++ {
		br := b[j*k : (j+1)*k]
		for i := range m {
			acc[i*n+j] = dotRow(a[i*k:(i+1)*k], br)
		}
	}
}

// dotRow is the int32 dot product of two int8 rows, in Go.
func dotRow(a, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	p := 0
	for ; p+4 <= len(a); p += 4 {
		s0 += int32(a[p]) * int32(b[p])
		s1 += int32(a[p+1]) * int32(b[p+1])
		s2 += int32(a[p+2]) * int32(b[p+2])
		s3 += int32(a[p+3]) * int32(b[p+3])
	}
	for ; p < len(a); p++ {
		s0 += int32(a[p]) * int32(b[p])
	}
	return s0 + s1 + s2 + s3
}

// qepilogue writes the columns [n0, n0+len(y)) of every row of out from
// the int32 sums acc [M, len(y)]: the raw sums for an I32 out, else the
// rescaled, biased and activated values (computed in y) rounded to out's
// dtype or requantized. cs and bias, of y's length, are the worker's
// buffers for the block's column scales and bias.
func qepilogue(out *kernels.Tensor, acc []int32, y, cs, bias []float32, g check.QMatMulDims, p kernels.QMatMulParams, n0 int) {
	w := len(y)
	if out.DType() == kernels.I32 {
		o := i32(out)
		for m := range g.M {
			copy(o[m*g.N+n0:][:w], acc[m*w:][:w])
		}
		return
	}
	sa, sb := f32(p.AScale), f32(p.BScale)
	// The column scales and bias of the block, broadcast where shared.
	if g.BRowScale {
		copy(cs, sb[n0:])
	} else {
		for j := range cs {
			cs[j] = sb[0]
		}
	}
	if p.Bias != nil {
		copy(bias, f32(p.Bias)[n0:])
	} else {
		clear(bias)
	}
	for m := range g.M {
		am := sa[0]
		if g.ARowScale {
			am = sa[m]
		}
		dst := destRange(out, m*g.N+n0, m*g.N+n0+w, y)
		rescale(dst, acc[m*w:][:w], am, cs, bias)
		if p.Act != kernels.ActNone {
			applyAct(dst, dst, p.Act)
		}
		if out.DType() == kernels.I8 {
			quantizeRow(i8(out)[m*g.N+n0:][:w], dst, f32(p.OutScale)[0])
			continue
		}
		flushRange(out, m*g.N+n0, dst)
	}
}

// rescale sets dst[j] = float32(acc[j])·(s·cs[j]) + bias[j], each
// operation rounded to float32.
func rescale(dst []float32, acc []int32, s float32, cs, bias []float32) {
	if qgemm.Available && len(dst) > 0 {
		_, _, _ = acc[len(dst)-1], cs[len(dst)-1], bias[len(dst)-1]
		qgemm.Rescale(&dst[0], &acc[0], len(dst), s, &cs[0], &bias[0])
		return
	}
	for j, v := range acc[:len(dst)] {
		dst[j] = float32(float32(v)*float32(s*cs[j])) + bias[j]
	}
}
