//go:build !amd64 || purego

// Package hgemv holds the dot products of package cpu's decode products
// in assembly, absent on this architecture or build.
package hgemv

// Available reports whether the kernels run on this CPU: never without
// the assembly.
var Available = false

// Dot1F32 is the assembly kernel, absent here; it panics.
func Dot1F32(x *float32, w *float32, k int) float32 {
	panic("hgemv: no assembly kernel on this architecture")
}

// Dot1F16 is the assembly kernel, absent here; it panics.
func Dot1F16(x *float32, w *uint16, k int) float32 {
	panic("hgemv: no assembly kernel on this architecture")
}

// Dot1BF16 is the assembly kernel, absent here; it panics.
func Dot1BF16(x *float32, w *uint16, k int) float32 {
	panic("hgemv: no assembly kernel on this architecture")
}

// Dot4F32 is the assembly kernel, absent here; it panics.
func Dot4F32(x *float32, ldx int, w *float32, k int, out *float32, ldo int, pre *float32) {
	panic("hgemv: no assembly kernel on this architecture")
}

// Dot4F16 is the assembly kernel, absent here; it panics.
func Dot4F16(x *float32, ldx int, w *uint16, k int, out *float32, ldo int, pre *uint16) {
	panic("hgemv: no assembly kernel on this architecture")
}

// Dot4BF16 is the assembly kernel, absent here; it panics.
func Dot4BF16(x *float32, ldx int, w *uint16, k int, out *float32, ldo int, pre *uint16) {
	panic("hgemv: no assembly kernel on this architecture")
}

// Dot4x2F32 is the assembly kernel, absent here; it panics.
func Dot4x2F32(x *float32, ldx int, w *float32, ldw int, k int, out *float32, ldo int, pre *float32) {
	panic("hgemv: no assembly kernel on this architecture")
}

// Dot4x2F16 is the assembly kernel, absent here; it panics.
func Dot4x2F16(x *float32, ldx int, w *uint16, ldw int, k int, out *float32, ldo int, pre *uint16) {
	panic("hgemv: no assembly kernel on this architecture")
}

// Dot4x2BF16 is the assembly kernel, absent here; it panics.
func Dot4x2BF16(x *float32, ldx int, w *uint16, ldw int, k int, out *float32, ldo int, pre *uint16) {
	panic("hgemv: no assembly kernel on this architecture")
}

// AvailablePairs reports whether the pair kernels run on this CPU: never
// without the assembly.
var AvailablePairs = false

// Dot1PairsBF16 is the assembly kernel, absent here; it panics.
func Dot1PairsBF16(x *uint16, w *uint16, k int) float32 {
	panic("hgemv: no assembly kernel on this architecture")
}

// Dot4PairsBF16 is the assembly kernel, absent here; it panics.
func Dot4PairsBF16(x *uint16, ldx int, w *uint16, k int, out *float32, ldo int, pre *uint16) {
	panic("hgemv: no assembly kernel on this architecture")
}

// Dot4x2PairsBF16 is the assembly kernel, absent here; it panics.
func Dot4x2PairsBF16(x *uint16, ldx int, w *uint16, ldw int, k int, out *float32, ldo int, pre *uint16) {
	panic("hgemv: no assembly kernel on this architecture")
}
