//go:build amd64 && !purego

// Package vecmath holds vectorised float32 elementwise functions of package
// cpu (exp and the activations built on it) in assembly, which a package
// using cgo cannot hold itself.
//
// Each function sets dst[i] = f(src[i]) for i < len(dst); src must be at
// least as long as dst, and dst may be src. The functions run only where
// Available is true: the caller checks it and keeps a scalar fallback.
package vecmath

import "golang.org/x/sys/cpu"

// Available reports whether the functions run on this CPU (AVX-512F).
var Available = cpu.X86.HasAVX512F

// Exp sets dst[i] = e^src[i]. The exponential is range-reduced
// (x = n·ln2 + r, |r| ≤ ln2/2, ln2 in two parts), e^r is the degree-7 Taylor
// polynomial and the scaling by 2^n is VSCALEFPS: +Inf above 88.72, gradual
// underflow to denormals and then 0 below −87.34, NaN propagated.
func Exp(dst, src []float32) {
	if len(dst) > 0 {
		expAVX512(&dst[0], &src[:len(dst)][0], len(dst))
	}
}

// SiLU sets dst[i] = x/(1+e^{−x}), x = src[i].
func SiLU(dst, src []float32) {
	if len(dst) > 0 {
		siluAVX512(&dst[0], &src[:len(dst)][0], len(dst))
	}
}

// GELUTanh sets dst[i] = x·σ(2u), u = √(2/π)·(x+0.044715x³), x = src[i]:
// the tanh form of GELU, 0.5·x·(1+tanh u), without its cancellation.
func GELUTanh(dst, src []float32) {
	if len(dst) > 0 {
		geluTanhAVX512(&dst[0], &src[:len(dst)][0], len(dst))
	}
}

// GELU sets dst[i] = x·Φ(x), x = src[i], with the exact error function:
// Φ(x) = 1 − erfc(z)/2 for z = x/√2 ≥ 0 and erfc(−z)/2 below, erfc being
// the Chebyshev fit of Numerical Recipes §6.2 (package cpu's erfcf).
func GELU(dst, src []float32) {
	if len(dst) > 0 {
		geluAVX512(&dst[0], &src[:len(dst)][0], len(dst))
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
	expScaledSumAVX512(&dst[0], &src[:len(dst)][0], len(dst), scale, -m, &acc)
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
