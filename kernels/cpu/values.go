package cpu

import "github.com/zbench/zbench/kernels"

// in32 returns t's values as float32: the storage itself for F32, a widened
// copy for other dtypes. Callers must not write to it.
func in32(t *kernels.Tensor) []float32 {
	if t.DType() == kernels.F32 {
		return f32(t)
	}
	dst := make([]float32, t.Len())
	parallelFor(len(dst), 1, func(lo, hi int) { loadRange(t, lo, hi, dst[lo:hi]) })
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
	return vals, func() {
		parallelFor(len(vals), 1, func(lo, hi int) { flushRange(t, lo, vals[lo:hi]) })
	}
}
