//go:build amd64 && !purego

// Package vecmath holds vectorised float32 elementwise functions of package
// cpu (exp and the activations built on it, softmax's and LayerNorm's row
// passes, and the casts between float32 and float16/bfloat16) in assembly,
// which a package using cgo cannot hold itself.
//
// Each elementwise function sets dst[i] = f(src[i]) for i < len(dst); src
// (and gamma and beta) must be at least as long as dst, and dst may be src.
// The reductions (Max, Sum64, SumSqDev64) read all of src. The functions run
// only where Available is true (the caller checks it and keeps a scalar
// fallback): with AVX-512 where AVX512 is set and with AVX2 and FMA
// otherwise, the elementwise results the same bit for bit.
package vecmath

import (
	"math"

	"golang.org/x/sys/cpu"
)

// Available reports whether the functions run on this CPU: AVX-512F, or
// AVX2 with FMA.
var Available = cpu.X86.HasAVX512F || cpu.X86.HasAVX2 && cpu.X86.HasFMA

// AVX512 reports whether the functions use AVX-512 (16 lanes, the tail
// under a mask register, the scaling by 2^n one VSCALEFPS) rather than AVX2
// and FMA (8 lanes, the tail under a mask vector, the scaling two
// multiplications that round once; the casts: AVX2 and F16C, the tail
// through a buffer of 8). It starts as whether the CPU has AVX-512F; a test
// may clear it to run the AVX2 code on an AVX-512 CPU.
var AVX512 = cpu.X86.HasAVX512F

// Exp sets dst[i] = e^src[i]. The exponential is range-reduced
// (x = n·ln2 + r, |r| ≤ ln2/2, ln2 in two parts), e^r is the degree-7 Taylor
// polynomial and the scaling by 2^n is VSCALEFPS (with AVX2, two
// multiplications, the first exact, that give its result): +Inf above
// 88.72, gradual underflow to denormals and then 0 below −87.34, NaN
// propagated.
func Exp(dst, src []float32) {
	if len(dst) > 0 {
		if AVX512 {
			expAVX512(&dst[0], &src[:len(dst)][0], len(dst))
			return
		}
		expAVX2(&dst[0], &src[:len(dst)][0], len(dst))
	}
}

// SiLU sets dst[i] = x/(1+e^{−x}), x = src[i].
func SiLU(dst, src []float32) {
	if len(dst) > 0 {
		if AVX512 {
			siluAVX512(&dst[0], &src[:len(dst)][0], len(dst))
			return
		}
		siluAVX2(&dst[0], &src[:len(dst)][0], len(dst))
	}
}

// GELUTanh sets dst[i] = x·σ(2u), u = √(2/π)·(x+0.044715x³), x = src[i]:
// the tanh form of GELU, 0.5·x·(1+tanh u), without its cancellation.
func GELUTanh(dst, src []float32) {
	if len(dst) > 0 {
		if AVX512 {
			geluTanhAVX512(&dst[0], &src[:len(dst)][0], len(dst))
			return
		}
		geluTanhAVX2(&dst[0], &src[:len(dst)][0], len(dst))
	}
}

// GELU sets dst[i] = x·Φ(x), x = src[i], with the exact error function:
// Φ(x) = 1 − erfc(z)/2 for z = x/√2 ≥ 0 and erfc(−z)/2 below, erfc being
// the Chebyshev fit of Numerical Recipes §6.2 (package cpu's erfcf).
func GELU(dst, src []float32) {
	if len(dst) > 0 {
		if AVX512 {
			geluAVX512(&dst[0], &src[:len(dst)][0], len(dst))
			return
		}
		geluAVX2(&dst[0], &src[:len(dst)][0], len(dst))
	}
}

// ExpScaledSum sets dst[i] = e^(scale·src[i] − m), the exponent rounded
// once (an FMA), as Exp does, and returns the sum of the dst[i] accumulated
// in float64: the exponentials of a softmax row.
func ExpScaledSum(dst, src []float32, scale, m float32) float64 {
	if len(dst) == 0 {
		return 0
	}
	var acc [8]float64
	if AVX512 {
		expScaledSumAVX512(&dst[0], &src[:len(dst)][0], len(dst), scale, -m, &acc)
	} else {
		expScaledSumAVX2(&dst[0], &src[:len(dst)][0], len(dst), scale, -m, &acc)
	}
	return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

// expAVX512 sets dst[i] = e^src[i] for i < n, n ≥ 1.
//
//go:noescape
func expAVX512(dst, src *float32, n int)

// siluAVX512 sets dst[i] = SiLU(src[i]) for i < n, n ≥ 1.
//
//go:noescape
func siluAVX512(dst, src *float32, n int)

// geluTanhAVX512 sets dst[i] = GELUTanh(src[i]) for i < n, n ≥ 1.
//
//go:noescape
func geluTanhAVX512(dst, src *float32, n int)

// geluAVX512 sets dst[i] = GELU(src[i]) for i < n, n ≥ 1.
//
//go:noescape
func geluAVX512(dst, src *float32, n int)

// expScaledSumAVX512 sets dst[i] = e^(scale·src[i] + negm) for i < n, n ≥ 1,
// and acc to 8 partial sums of them in float64.
//
//go:noescape
func expScaledSumAVX512(dst, src *float32, n int, scale, negm float32, acc *[8]float64)

// Scale sets dst[i] = src[i]·s.
func Scale(dst, src []float32, s float32) {
	if len(dst) > 0 {
		if AVX512 {
			scaleAVX512(&dst[0], &src[:len(dst)][0], len(dst), s)
			return
		}
		scaleAVX2(&dst[0], &src[:len(dst)][0], len(dst), s)
	}
}

// ReLU sets dst[i] = max(src[i], 0) as Go's max gives it: +0 for ±0, NaN
// for NaN.
func ReLU(dst, src []float32) {
	if len(dst) > 0 {
		if AVX512 {
			reluAVX512(&dst[0], &src[:len(dst)][0], len(dst))
			return
		}
		reluAVX2(&dst[0], &src[:len(dst)][0], len(dst))
	}
}

// Max returns the largest src[i], as Go's max folded from −Inf does: −Inf
// for no values, NaN where one of them is NaN, and otherwise the largest
// (max(−0, +0) being either zero).
func Max(src []float32) float32 {
	m := float32(math.Inf(-1))
	if len(src) == 0 {
		return m
	}
	if AVX512 {
		return maxAVX512(&src[0], len(src))
	}
	var acc [8]float32
	maxAVX2(&src[0], len(src), &acc)
	for _, v := range acc {
		m = max(m, v)
	}
	return m
}

// Sum64 returns Σ src[i] accumulated in float64.
func Sum64(src []float32) float64 {
	if len(src) == 0 {
		return 0
	}
	var acc [8]float64
	if AVX512 {
		sumAVX512(&src[0], len(src), &acc)
	} else {
		sumAVX2(&src[0], len(src), &acc)
	}
	return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

// SumSqDev64 returns Σ (src[i] − c)², each term and the sum in float64:
// the second pass of a two-pass variance.
func SumSqDev64(src []float32, c float64) float64 {
	if len(src) == 0 {
		return 0
	}
	var acc [8]float64
	if AVX512 {
		sumSqDevAVX512(&src[0], len(src), c, &acc)
	} else {
		sumSqDevAVX2(&src[0], len(src), c, &acc)
	}
	return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

// Normalize sets dst[i] = (src[i] − mean)·rstd·gamma[i] + beta[i], or
// without the + beta[i] where beta is nil, rounding after each operation:
// a LayerNorm row. gamma and beta must be at least as long as dst.
func Normalize(dst, src, gamma, beta []float32, mean, rstd float32) {
	n := len(dst)
	if n == 0 {
		return
	}
	switch {
	case beta == nil && AVX512:
		normNoBetaAVX512(&dst[0], &src[:n][0], &gamma[:n][0], n, mean, rstd)
	case beta == nil:
		normNoBetaAVX2(&dst[0], &src[:n][0], &gamma[:n][0], n, mean, rstd)
	case AVX512:
		normAVX512(&dst[0], &src[:n][0], &gamma[:n][0], &beta[:n][0], n, mean, rstd)
	default:
		normAVX2(&dst[0], &src[:n][0], &gamma[:n][0], &beta[:n][0], n, mean, rstd)
	}
}

// scaleAVX512 sets dst[i] = src[i]·s for i < n, n ≥ 1.
//
//go:noescape
func scaleAVX512(dst, src *float32, n int, s float32)

// reluAVX512 sets dst[i] = max(src[i], 0) for i < n, n ≥ 1.
//
//go:noescape
func reluAVX512(dst, src *float32, n int)

// maxAVX512 returns the largest src[i], i < n, n ≥ 1, or NaN where one is
// NaN.
//
//go:noescape
func maxAVX512(src *float32, n int) float32

// sumAVX512 sets acc to 8 partial sums of src[i], i < n, n ≥ 1, in float64.
//
//go:noescape
func sumAVX512(src *float32, n int, acc *[8]float64)

// sumSqDevAVX512 sets acc to 8 partial sums of (src[i] − c)², i < n, n ≥ 1,
// in float64.
//
//go:noescape
func sumSqDevAVX512(src *float32, n int, c float64, acc *[8]float64)

// normAVX512 sets dst[i] = (src[i] − mean)·rstd·gamma[i] + beta[i] for
// i < n, n ≥ 1.
//
//go:noescape
func normAVX512(dst, src, gamma, beta *float32, n int, mean, rstd float32)

// normNoBetaAVX512 sets dst[i] = (src[i] − mean)·rstd·gamma[i] for i < n,
// n ≥ 1.
//
//go:noescape
func normNoBetaAVX512(dst, src, gamma *float32, n int, mean, rstd float32)

// expAVX2 sets dst[i] = e^src[i] for i < n, n ≥ 1.
//
//go:noescape
func expAVX2(dst, src *float32, n int)

// siluAVX2 sets dst[i] = SiLU(src[i]) for i < n, n ≥ 1.
//
//go:noescape
func siluAVX2(dst, src *float32, n int)

// geluTanhAVX2 sets dst[i] = GELUTanh(src[i]) for i < n, n ≥ 1.
//
//go:noescape
func geluTanhAVX2(dst, src *float32, n int)

// geluAVX2 sets dst[i] = GELU(src[i]) for i < n, n ≥ 1.
//
//go:noescape
func geluAVX2(dst, src *float32, n int)

// expScaledSumAVX2 sets dst[i] = e^(scale·src[i] + negm) for i < n, n ≥ 1,
// and acc to 8 partial sums of them in float64.
//
//go:noescape
func expScaledSumAVX2(dst, src *float32, n int, scale, negm float32, acc *[8]float64)

// scaleAVX2 sets dst[i] = src[i]·s for i < n, n ≥ 1.
//
//go:noescape
func scaleAVX2(dst, src *float32, n int, s float32)

// reluAVX2 sets dst[i] = max(src[i], 0) for i < n, n ≥ 1.
//
//go:noescape
func reluAVX2(dst, src *float32, n int)

// maxAVX2 sets acc to 8 partial maxima of src[i], i < n, n ≥ 1, NaN in the
// lanes that met a NaN.
//
//go:noescape
func maxAVX2(src *float32, n int, acc *[8]float32)

// sumAVX2 sets acc to 8 partial sums of src[i], i < n, n ≥ 1, in float64.
//
//go:noescape
func sumAVX2(src *float32, n int, acc *[8]float64)

// sumSqDevAVX2 sets acc to 8 partial sums of (src[i] − c)², i < n, n ≥ 1,
// in float64.
//
//go:noescape
func sumSqDevAVX2(src *float32, n int, c float64, acc *[8]float64)

// normAVX2 sets dst[i] = (src[i] − mean)·rstd·gamma[i] + beta[i] for
// i < n, n ≥ 1.
//
//go:noescape
func normAVX2(dst, src, gamma, beta *float32, n int, mean, rstd float32)

// normNoBetaAVX2 sets dst[i] = (src[i] − mean)·rstd·gamma[i] for i < n,
// n ≥ 1.
//
//go:noescape
func normNoBetaAVX2(dst, src, gamma *float32, n int, mean, rstd float32)
