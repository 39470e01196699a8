//go:build !amd64 || purego

// Package sgemmasm holds the SGEMM micro-kernels of package cpu in
// assembly (which a package using cgo cannot hold itself).
package sgemmasm

// Available reports whether Kernel6x16 runs on this CPU: never without
// the assembly.
var Available = false

// Available512 reports whether Kernel12x32 runs on this CPU: never
// without the assembly.
var Available512 = false

// Kernel6x16 is the assembly micro-kernel, absent here; it panics.
func Kernel6x16(k int, a, b, c *float32, ldc int, alpha, beta float32) {
	panic("sgemmasm: no assembly kernel on this architecture")
}

// Kernel12x32 is the AVX-512 micro-kernel, absent here; it panics.
func Kernel12x32(k int, a, b, c *float32, ldc int, alpha, beta float32, next *float32) {
	panic("sgemmasm: no assembly kernel on this architecture")
}

// KernelEdge8x32 is an AVX-512 edge kernel, absent here; it panics.
func KernelEdge8x32(k int, a, b, c *float32, ldc int, alpha, beta float32) {
	panic("sgemmasm: no assembly kernel on this architecture")
}

// KernelEdge4x32 is an AVX-512 edge kernel, absent here; it panics.
func KernelEdge4x32(k int, a, b, c *float32, ldc int, alpha, beta float32) {
	panic("sgemmasm: no assembly kernel on this architecture")
}

// AvailableBF16 reports whether KernelBF16x12x32 runs on this CPU: never
// without the assembly.
var AvailableBF16 = false

// KernelBF16x12x32 is the AVX-512 BF16 micro-kernel, absent here; it
// panics.
func KernelBF16x12x32(k2 int, a, b *uint32, c *float32, ldc int, alpha, beta float32, next *uint32) {
	panic("sgemmasm: no assembly kernel on this architecture")
}

// KernelRows12x32 is the AVX-512 in-place micro-kernel, absent here; it
// panics.
func KernelRows12x32(k int, a *float32, lda, segs, segStride int, b, c *float32, ldc int, r *float32, beta, floor float32, bias, next *float32) {
	panic("sgemmasm: no assembly kernel on this architecture")
}

// KernelRows8x32 is an AVX-512 in-place kernel, absent here; it panics.
func KernelRows8x32(k int, a *float32, lda, segs, segStride int, b, c *float32, ldc int, r *float32, beta, floor float32, bias, next *float32) {
	panic("sgemmasm: no assembly kernel on this architecture")
}

// KernelRows4x32 is an AVX-512 in-place kernel, absent here; it panics.
func KernelRows4x32(k int, a *float32, lda, segs, segStride int, b, c *float32, ldc int, r *float32, beta, floor float32, bias, next *float32) {
	panic("sgemmasm: no assembly kernel on this architecture")
}
