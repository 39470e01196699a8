//go:build amd64 && !purego

// Package hgemv holds the matrix–vector kernels of package cpu's decode
// products in assembly (which a package using cgo cannot hold itself):
// a float32 vector dotted with four rows of a weight stored in float32,
// float16 or bfloat16, the 16-bit values widened in registers (VCVTPH2PS,
// or a 16-bit shift for bfloat16) so that the weight is read from memory
// at its own size, once.
package hgemv

import "golang.org/x/sys/cpu"

// Available reports whether the kernels run on this CPU: AVX-512F.
var Available = cpu.X86.HasAVX512F

// Dot4F32 sets out[r] = Σ_p x[p]·w[r·ldw + p] for r < 4 and p < k, summed
// in float32 over 32 lanes per row; ldw 0 dots one row four times. k is
// positive (the last k mod 16 values are read under a mask); the caller
// vouches for the bounds.
//
//go:noescape
func Dot4F32(x *float32, w *float32, ldw, k int, out *[4]float32)

// Dot4F16 is Dot4F32 for float16 weights, widened exactly to float32.
//
//go:noescape
func Dot4F16(x *float32, w *uint16, ldw, k int, out *[4]float32)

// Dot4BF16 is Dot4F32 for bfloat16 weights, widened exactly to float32
// (the bits shifted into the top half of a float32).
//
//go:noescape
func Dot4BF16(x *float32, w *uint16, ldw, k int, out *[4]float32)
