//go:build !amd64 || purego

// Package vecmath holds vectorised float32 elementwise functions of package
// cpu (exp and the activations built on it, softmax's and LayerNorm's row
// passes, and the casts between float32 and float16/bfloat16) in assembly,
// which a package using cgo cannot hold itself.
package vecmath

// Available reports whether the functions run on this CPU: never without
// the assembly.
var Available = false

// AVX512 reports whether the functions use AVX-512 rather than AVX2: never
// without the assembly.
var AVX512 = false

// Exp is the assembly exponential, absent here; it panics.
func Exp(dst, src []float32) { panic("vecmath: no assembly on this architecture") }

// SiLU is the assembly SiLU, absent here; it panics.
func SiLU(dst, src []float32) { panic("vecmath: no assembly on this architecture") }

// GELUTanh is the assembly tanh-form GELU, absent here; it panics.
func GELUTanh(dst, src []float32) { panic("vecmath: no assembly on this architecture") }

// GELU is the assembly erf-form GELU, absent here; it panics.
func GELU(dst, src []float32) { panic("vecmath: no assembly on this architecture") }

// ExpScaledSum is the assembly softmax exponential, absent here; it panics.
func ExpScaledSum(dst, src []float32, scale, m float32) float64 {
	panic("vecmath: no assembly on this architecture")
}

// Scale is the assembly scaling, absent here; it panics.
func Scale(dst, src []float32, s float32) { panic("vecmath: no assembly on this architecture") }

// ReLU is the assembly ReLU, absent here; it panics.
func ReLU(dst, src []float32) { panic("vecmath: no assembly on this architecture") }

// Max is the assembly maximum, absent here; it panics.
func Max(src []float32) float32 { panic("vecmath: no assembly on this architecture") }

// Sum64 is the assembly float64 sum, absent here; it panics.
func Sum64(src []float32) float64 { panic("vecmath: no assembly on this architecture") }

// SumSqDev64 is the assembly float64 sum of squared deviations, absent
// here; it panics.
func SumSqDev64(src []float32, c float64) float64 {
	panic("vecmath: no assembly on this architecture")
}

// Normalize is the assembly LayerNorm row, absent here; it panics.
func Normalize(dst, src, gamma, beta []float32, mean, rstd float32) {
	panic("vecmath: no assembly on this architecture")
}
