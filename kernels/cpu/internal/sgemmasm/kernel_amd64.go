//go:build amd64 && !purego

// Package sgemmasm holds the SGEMM micro-kernels of package cpu in
// assembly (which a package using cgo cannot hold itself).
package sgemmasm

import "golang.org/x/sys/cpu"

// Available reports whether Kernel6x16 runs on this CPU (AVX2 and FMA).
var Available = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// Available512 reports whether Kernel12x32 runs on this CPU (AVX-512F).
var Available512 = cpu.X86.HasAVX512F

// Kernel6x16 is the 6×16 micro-kernel in AVX2+FMA: for packed panels a
// (k·6 floats, a[p*6+i]) and b (k·16 floats, b[p*16+j]) it sets the 6×16
// tile at c, of row stride ldc, to alpha·a·b + beta·c, without reading c
// when beta is 0. k ≥ 1, and the caller vouches for the bounds.
//
//go:noescape
func Kernel6x16(k int, a, b, c *float32, ldc int, alpha, beta float32)

// Kernel12x32 is Kernel6x16's 12×32 counterpart in AVX-512F, for panels
// a of k·12 floats and b of k·32. Unless next is nil, it prefetches a
// 64-byte line every four steps of k from next on (the following panel of
// b, as the caller spreads it over its tiles); next is only a hint, and
// any address will do.
//
//go:noescape
func Kernel12x32(k int, a, b, c *float32, ldc int, alpha, beta float32, next *float32)

// KernelEdge8x32 is Kernel12x32 over the first 8 rows of its panel a
// (k·12 floats, a[p*12+i] for i < 8): the 8×32 tile at c. It and
// KernelEdge4x32 (the first 4 rows) multiply the last, partial panel of a
// product whose rows are not a multiple of 12.
//
//go:noescape
func KernelEdge8x32(k int, a, b, c *float32, ldc int, alpha, beta float32)

// KernelEdge4x32 is KernelEdge8x32 over the first 4 rows of a.
//
//go:noescape
func KernelEdge4x32(k int, a, b, c *float32, ldc int, alpha, beta float32)

// AvailableBF16 reports whether KernelBF16x12x32 runs on this CPU
// (AVX-512F and AVX-512 BF16).
var AvailableBF16 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BF16

// KernelBF16x12x32 is Kernel12x32 on bfloat16 pairs, in AVX-512 BF16
// (VDPBF16PS): for packed panels a (k2·12 pairs, a[p*12+i] holding
// op(a)[i][2p] in its low half and op(a)[i][2p+1] in its high half) and b
// (k2·32 pairs, b[p*32+j] likewise op(b)[2p][j] and op(b)[2p+1][j]) it
// sets the 12×32 tile at c to alpha·a·b + beta·c, summing in float32
// (each pair's two exact products added in turn, odd then even, with
// bfloat16 and float32 subnormals flushed to zero). It prefetches from
// next as Kernel12x32 does. k2 ≥ 1, and the caller vouches for the bounds.
//
//go:generate go run gen_bf16.go
//go:noescape
func KernelBF16x12x32(k2 int, a, b *uint32, c *float32, ldc int, alpha, beta float32, next *uint32)

// KernelRows12x32 is the 12×32 AVX-512 micro-kernel over a read in place:
// row i of the tile reads a[i*lda:], segs segments of k values each, the
// segments segStride apart along a's rows, against b packed as
// Kernel12x32's (segs·k rows of 32, contiguous). It sets the tile at c (row
// stride ldc) to max(floor, Σ + beta·r + bias[j]) for the tile at r (the
// same stride; c itself, or a residual), reading r only where beta is not
// 0; bias points at 32 values, and a floor of 0 is a ReLU, of -Inf none.
// Unless next is nil, it prefetches two 64-byte lines every four steps of
// k from next on (what the caller multiplies after this tile; only a hint,
// any address will do). k, segs ≥ 1, and the caller vouches for the
// bounds.
//
//go:generate go run gen_rows.go
//go:noescape
func KernelRows12x32(k int, a *float32, lda, segs, segStride int, b, c *float32, ldc int, r *float32, beta, floor float32, bias, next *float32)

// KernelRows8x32 is KernelRows12x32 over the first 8 rows: an 8×32 tile.
// It and KernelRows4x32 (the first 4) multiply the last few rows of a
// product.
//
//go:noescape
func KernelRows8x32(k int, a *float32, lda, segs, segStride int, b, c *float32, ldc int, r *float32, beta, floor float32, bias, next *float32)

// KernelRows4x32 is KernelRows12x32 over the first 4 rows: a 4×32 tile.
//
//go:noescape
func KernelRows4x32(k int, a *float32, lda, segs, segStride int, b, c *float32, ldc int, r *float32, beta, floor float32, bias, next *float32)
