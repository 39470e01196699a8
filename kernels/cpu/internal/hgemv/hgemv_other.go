//go:build !amd64 || purego

// Package hgemv holds the matrix–vector kernels of package cpu's decode
// products in assembly, absent on this architecture or build.
package hgemv

// Available reports whether the kernels run on this CPU: never without
// the assembly.
var Available = false

// Dot4F32 is the assembly kernel, absent here; it panics.
func Dot4F32(x *float32, w *float32, ldw, k int, out *[4]float32) {
	panic("hgemv: no assembly kernel on this architecture")
}

// Dot4F16 is the assembly kernel, absent here; it panics.
func Dot4F16(x *float32, w *uint16, ldw, k int, out *[4]float32) {
	panic("hgemv: no assembly kernel on this architecture")
}

// Dot4BF16 is the assembly kernel, absent here; it panics.
func Dot4BF16(x *float32, w *uint16, ldw, k int, out *[4]float32) {
	panic("hgemv: no assembly kernel on this architecture")
}
