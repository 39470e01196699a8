//go:build amd64 && !purego

// Package hgemv holds the dot products of package cpu's decode products
// in assembly (which a package using cgo cannot hold itself): a float32
// vector dotted with a row of a weight stored in float32, float16 or
// bfloat16, the 16-bit values widened in registers (VCVTPH2PS, or a
// 16-bit shift for bfloat16), so that the weight is read from memory at
// its own size, once, in order; and a bfloat16 vector dotted with a
// bfloat16 row two products a lane (VDPBF16PS, the pair kernels).
package hgemv

import "golang.org/x/sys/cpu"

// Available reports whether the kernels run on this CPU: AVX-512F.
var Available = cpu.X86.HasAVX512F

// Dot1F32 returns Σ_p x[p]·w[p] for p < k, summed in float32 over 32
// lanes: chunk c of 16 values into accumulator c mod 2, then the two
// added and their lanes reduced, the order every kernel here keeps. k is
// positive (the last k mod 16 values are read under a mask); the caller
// vouches for the bounds.
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

// Dot4F32 sets out[r·ldo] = Dot1F32(x[r·ldx:], w, k) for the four rows
// r < 4 of x (ldx float32 apart), reading w once for the four; each sum
// equals Dot1F32's bit for bit. It prefetches the weight at pre (k values,
// in the cache or not; the next rows a caller will read) as it reads w.
// The caller vouches for the bounds of x, w and out.
//
//go:noescape
func Dot4F32(x *float32, ldx int, w *float32, k int, out *float32, ldo int, pre *float32)

// Dot4F16 is Dot4F32 for float16 weights, each sum equal to Dot1F16's.
//
//go:noescape
func Dot4F16(x *float32, ldx int, w *uint16, k int, out *float32, ldo int, pre *uint16)

// Dot4BF16 is Dot4F32 for bfloat16 weights, each sum equal to Dot1BF16's.
//
//go:noescape
func Dot4BF16(x *float32, ldx int, w *uint16, k int, out *float32, ldo int, pre *uint16)

// Dot4x2F32 sets out[r·ldo+c] = Dot1F32(x[r·ldx:], w[c·ldw:], k) for the
// four rows r < 4 of x and the two rows c < 2 of w (ldw values apart),
// each row of x read once for the two and each of w once for the four;
// each sum equals Dot1F32's bit for bit. It prefetches the two rows of
// the weight at pre (ldw apart) as it reads w. The caller vouches for the
// bounds of x, w, pre and out.
//
//go:noescape
func Dot4x2F32(x *float32, ldx int, w *float32, ldw int, k int, out *float32, ldo int, pre *float32)

// Dot4x2F16 is Dot4x2F32 for float16 weights, each sum equal to Dot1F16's.
//
//go:noescape
func Dot4x2F16(x *float32, ldx int, w *uint16, ldw int, k int, out *float32, ldo int, pre *uint16)

// Dot4x2BF16 is Dot4x2F32 for bfloat16 weights, each sum equal to
// Dot1BF16's.
//
//go:noescape
func Dot4x2BF16(x *float32, ldx int, w *uint16, ldw int, k int, out *float32, ldo int, pre *uint16)

// AvailablePairs reports whether the pair kernels run on this CPU:
// AVX-512F, BW and BF16.
var AvailablePairs = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512BF16

// Dot1PairsBF16 returns Σ_p x[p]·w[p] for p < k, x and w in bfloat16,
// summed by VDPBF16PS in float32 over 16 lanes of two products each:
// chunk c of 32 values into accumulator c mod 2 (lane j adds values 2j+1,
// then 2j, subnormals flushed to zero), then the two added and their lanes
// reduced, the order every pair kernel keeps. k is positive (the last
// k mod 32 values are read under a mask); the caller vouches for the
// bounds.
//
//go:noescape
func Dot1PairsBF16(x *uint16, w *uint16, k int) float32

// Dot4PairsBF16 sets out[r·ldo] = Dot1PairsBF16(x[r·ldx:], w, k) for the
// four rows r < 4 of x (ldx values apart), reading w once for the four;
// each sum equals Dot1PairsBF16's bit for bit. It prefetches the weight
// at pre as it reads w. The caller vouches for the bounds of x, w and out.
//
//go:noescape
func Dot4PairsBF16(x *uint16, ldx int, w *uint16, k int, out *float32, ldo int, pre *uint16)

// Dot4x2PairsBF16 sets out[r·ldo+c] = Dot1PairsBF16(x[r·ldx:], w[c·ldw:],
// k) for the four rows r < 4 of x and the two rows c < 2 of w, each row
// read once for the others; each sum equals Dot1PairsBF16's bit for bit.
// It prefetches the two rows of the weight at pre (ldw apart) as it reads
// w. The caller vouches for the bounds of x, w, pre and out.
//
//go:noescape
func Dot4x2PairsBF16(x *uint16, ldx int, w *uint16, ldw int, k int, out *float32, ldo int, pre *uint16)
