//go:build amd64 && !purego

// Package qgemm holds the int8 dot-product kernels of package cpu in
// assembly (which a package using cgo cannot hold itself): AVX-512 VNNI's
// VPDPBUSD, which multiplies unsigned by signed bytes and adds groups of
// four products into int32 lanes.
//
// VPDPBUSD needs one operand unsigned, so the kernels read a's bytes with
// their top bit flipped (a+128, in [0, 255]) and subtract 128·Σb per
// column, which the caller passes in corr (Sum gives Σb): the sums are
// exact, with no saturation, for any int8 values and any k below 2¹⁶.
package qgemm

import "golang.org/x/sys/cpu"

// Available reports whether the kernels run on this CPU: AVX-512F, BW
// and VNNI.
var Available = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI

// Dot4x4 sets out[i·ldo + j] = Σ_p (a[i·lda + p] + 128)·b[j·ldb + p] − corr[j]
// for i, j < 4 and p < k: with corr[j] = 128·Σ_p b[j·ldb + p] (from Sum),
// the exact int32 dot products of 4 rows of a with 4 rows of b. k is
// positive (the last k mod 64 bytes are read under a mask); the caller
// vouches for the bounds.
//
//go:noescape
func Dot4x4(a *int8, lda int, b *int8, ldb int, k int, out *int32, ldo int, corr *int32)

// Dot1x4 is Dot4x4 for one row of a: out[j] for j < 4.
//
//go:noescape
func Dot1x4(a *int8, b *int8, ldb int, k int, out *int32, corr *int32)

// Sum returns Σ b[p] for p < k, k positive.
//
//go:noescape
func Sum(b *int8, k int) int32

// Rescale sets dst[i] = float32(acc[i])·(s·cs[i]) + bias[i] for i < n,
// each operation rounded to float32 in turn: QMatMul's epilogue on one row.
// The caller vouches for the bounds.
//
//go:noescape
func Rescale(dst *float32, acc *int32, n int, s float32, cs *float32, bias *float32)

// Quantize sets dst[i] = clamp(round(src[i]/s), ±127) for i < n, rounding
// half to even (the MXCSR default), NaN giving 0. The caller vouches for
// the bounds.
//
//go:noescape
func Quantize(dst *int8, src *float32, n int, s float32)
