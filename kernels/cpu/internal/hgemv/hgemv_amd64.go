//go:build amd64 && !purego

// Package hgemv holds the dot products of package cpu's decode products
// in assembly (which a package using cgo cannot hold itself): a float32
// vector dotted with a row of a weight stored in float32, float16 or
// bfloat16, the 16-bit values widened in registers (VCVTPH2PS, or a
// 16-bit shift for bfloat16), so that the weight is read from memory at
// its own size, once, in order.
package hgemv

import "golang.org/x/sys/cpu"

// Available reports whether the kernels run on this CPU: AVX-512F.
var Available = cpu.X86.HasAVX512F

// Dot1F32 returns Σ_p x[p]·w[p] for p < k, summed in float32 over 64
// lanes. k is positive (the last k mod 16 values are read under a mask);
// the caller vouches for the bounds.
//
//go:noescape
func Dot1F32(x *float32, w *float32, k int) float32

// Dot1F16 is Dot1F32 for float16 weights, widened exactly to float32.
//
//go:noescape
func Dot1F16(x *float32, w *uint16, k int) float32

// Dot1BF16 is Dot1F32 for bfloat16 weights, widened exactly to float32
// (the bits shifted into the top half of a float32).
//
//go:noescape
func Dot1BF16(x *float32, w *uint16, k int) float32
