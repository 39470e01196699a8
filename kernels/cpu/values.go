package cpu

import "github.com/zbench/zbench/kernels"

// in32 returns t's values as float32: the storage itself for F32, a widened
// copy for F16 and BF16. Callers must not write to it.
func in32(t *kernels.Tensor) []float32 {
	switch t.DType() {
	case kernels.F32:
		return f32(t)
	case kernels.F16:
		src, dst := u16(t), make([]float32, t.Len())
		parallelFor(len(dst), 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				dst[i] = kernels.F16ToFloat32(src[i])
			}
		})
		return dst
	case kernels.BF16:
		src, dst := u16(t), make([]float32, t.Len())
		parallelFor(len(dst), 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				dst[i] = kernels.BF16ToFloat32(src[i])
			}
		})
		return dst
	}
	dst := make([]float32, t.Len())
	_ = kernels.DecodeFloat32(t.DType(), dst, bytesOf(t)) // sizes match by construction
	return dst
}

// out32 returns a float32 slice that receives t's new values and a function
// that stores them into t, rounding to its dtype. For F32 the slice is the
// storage itself and the function does nothing. The slice starts as a copy
// of t's values when keep is set (for ops that read their output, beta≠0).
func out32(t *kernels.Tensor, keep bool) ([]float32, func()) {
	if t.DType() == kernels.F32 {
		return f32(t), func() {}
	}
	var vals []float32
	if keep {
		vals = in32(t)
	} else {
		vals = make([]float32, t.Len())
	}
	return vals, func() { store(t, vals) }
}

// store rounds vals into t's storage.
func store(t *kernels.Tensor, vals []float32) {
	switch t.DType() {
	case kernels.F32:
		copy(f32(t), vals)
	case kernels.F16:
		dst := u16(t)
		parallelFor(len(vals), 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				dst[i] = kernels.F16FromFloat32(vals[i])
			}
		})
	case kernels.BF16:
		dst := u16(t)
		parallelFor(len(vals), 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				dst[i] = kernels.BF16FromFloat32(vals[i])
			}
		})
	default:
		_ = kernels.EncodeFloat32(t.DType(), bytesOf(t), vals) // sizes match by construction
	}
}
