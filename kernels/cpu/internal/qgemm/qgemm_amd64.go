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

// DotQ8 returns Σ x[p]·float32(w[p]) for p < k, k a non-negative
// multiple of 16, summed in float32 in 4 interleaved lanes of 16.
//
//go:noescape
func DotQ8(x *float32, w *int8, k int) float32

// DotQ8Rows sets out[r] = DotQ8(x, w[r·k:], k)·scales[r] for the rows r
// < rows of w (k codes each, one after another), each bit for bit as
// DotQ8's sum times the scale in float32: the rows of a decode product
// taken in one call. k is a positive multiple of 16 and rows positive;
// the caller vouches for the bounds.
//
//go:noescape
func DotQ8Rows(x *float32, w *int8, k int, rows int, scales *float32, out *float32)

// DotQ8G returns Σ_g Σ_{p in group g} x[p]·w[p]·scales[g] over k values
// (a multiple of group, itself a multiple of 32) of int8 codes: in groups
// of 32 each x[p] times w[p]·scales[g] rounded to float32 (the weight as
// dequantized), in other groups each group's sum times its scale.
//
//go:noescape
func DotQ8G(x *float32, w *int8, k int, scales *float32, group int) float32

// DotQ8GRows sets out[r] = DotQ8G(x, w[r·k:], k, scales[r·k/group:],
// group) for the rows r < rows of w (k codes each, one after another,
// their scales too), each bit for bit: the rows of a decode product taken
// in one call. rows is positive; the caller vouches for the bounds.
//
//go:noescape
func DotQ8GRows(x *float32, w *int8, k int, rows int, scales *float32, group int, out *float32)

// DotQ4 returns Σ_g scales[g]·Σ_{p in group g} x'[p]·levels[code(p)] over
// k values (a multiple of group, itself a multiple of 32) of 4-bit codes
// packed two per byte of w (low nibble first). x is permuted per chunk of
// 32: the 16 values of the even positions, then the 16 of the odd ones
// (PermuteQ4), which the low and high nibbles of 16 bytes meet in order.
//
//go:noescape
func DotQ4(x *float32, w *int8, k int, scales *float32, group int, levels *[16]float32) float32

// Dot1x4S sets out[j] = Σ_p a[p]·b[j·ldb + p] for j < 4 and p < k: one
// row of a against 4 rows of b, the exact int32 dot products. It computes
// its own corrections, 128·Σb of each row of b accumulating beside the
// products from the same loads, so that a single row of a (decode) reads
// each weight once.
//
//go:noescape
func Dot1x4S(a *int8, b *int8, ldb int, k int, out *int32)

// AbsMax returns max |x[i]| for i < n, or NaN when x holds a NaN.
//
//go:noescape
func AbsMax(x *float32, n int) float32

// DequantQ8 sets dst[p] = float32(w[p])·s for p < k, k a non-negative
// multiple of 16.
//
//go:noescape
func DequantQ8(dst *float32, w *int8, k int, s float32)

// DequantQ4 sets dst to k values (a multiple of group, itself a multiple
// of 32) of 4-bit codes packed two per byte of w (low nibble first),
// levels[code]·scales[g], in DotQ4's order: per chunk of 32 the 16 values
// of the low nibbles (the even positions), then the 16 of the high ones.
//
//go:noescape
func DequantQ4(dst *float32, w *int8, k int, scales *float32, group int, levels *[16]float32)

// DotQ4L returns Σ_p x[p]·levels[code(p)]·scale(p) over k values (a
// positive multiple of Chunk4) of 4-bit codes packed two per byte of w (low nibble
// first), x in LaneOrder4's order and the scales met through s: one row
// of DotQ4LRows.
func DotQ4L(x *float32, w *int8, k int, s *ScaleWalk, levels *[16]float32) float32 {
	var out float32
	DotQ4LRows(x, w, k, 1, s, levels, &out)
	return out
}

// Dot4Q8 sets out[r·ldo] = DotQ8(x[r·ldx:], w, k) for the four rows r < 4
// of x (ldx float32 apart), reading w once for the four; each sum equals
// DotQ8's bit for bit. It prefetches the codes at pre (k of them, in the
// cache or not; the next row a caller will read) as it reads w. The
// caller vouches for the bounds of x, w and out.
//
//go:noescape
func Dot4Q8(x *float32, ldx int, w *int8, k int, out *float32, ldo int, pre *int8)

// Dot4Q8G32 is Dot4Q8 for DotQ8G with groups of 32 (GGUF's Q8_0 blocks),
// k a positive multiple of 128, each sum equal to DotQ8G's.
//
//go:noescape
func Dot4Q8G32(x *float32, ldx int, w *int8, k int, out *float32, ldo int, pre *int8, scales *float32)

// DotQ8GRowsH is DotQ8GRows over float16 scales (GGUF's Q8_0 blocks keep
// theirs so), each sum equal to DotQ8GRows' over the same scales widened
// to float32.
//
//go:noescape
func DotQ8GRowsH(x *float32, w *int8, k int, rows int, scales *uint16, group int, out *float32)

// Dot4Q8G32H is Dot4Q8G32 over float16 scales, each sum equal to
// Dot4Q8G32's over the same scales widened to float32.
//
//go:noescape
func Dot4Q8G32H(x *float32, ldx int, w *int8, k int, out *float32, ldo int, pre *int8, scales *uint16)

// DotQ4LRows sets out[r] = DotQ4L(x, w[r·k/2:], k, s', levels) for the
// rows r < rows of w (k codes each, a positive multiple of Chunk4, one
// row after another, their scales too), s' being s with P at row r's
// scales: the rows of a decode product taken in one call. s.P is row 0's
// scales, and with more than one row a row's steps are a whole number of
// s.Per; the caller vouches for the bounds.
//
//go:noescape
func DotQ4LRows(x *float32, w *int8, k int, rows int, s *ScaleWalk, levels *[16]float32, out *float32)
