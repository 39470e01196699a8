//go:build !amd64 || purego

// Package qgemm holds the int8 dot-product kernels of package cpu in
// assembly, absent on this architecture or build.
package qgemm

// Available reports whether the kernels run on this CPU: never without
// the assembly.
var Available = false

// Dot4x4 is the assembly kernel, absent here; it panics.
func Dot4x4(a *int8, lda int, b *int8, ldb int, k int, out *int32, ldo int, corr *int32) {
	panic("qgemm: no assembly kernel on this architecture")
}

// Sum is the assembly kernel, absent here; it panics.
func Sum(b *int8, k int) int32 { panic("qgemm: no assembly kernel on this architecture") }

// Rescale is the assembly kernel, absent here; it panics.
func Rescale(dst *float32, acc *int32, n int, s float32, cs *float32, bias *float32) {
	panic("qgemm: no assembly kernel on this architecture")
}

// Quantize is the assembly kernel, absent here; it panics.
func Quantize(dst *int8, src *float32, n int, s float32) {
	panic("qgemm: no assembly kernel on this architecture")
}

// DotQ8 is the assembly kernel, absent here; it panics.
func DotQ8(x *float32, w *int8, k int) float32 {
	panic("qgemm: no assembly kernel on this architecture")
}

// DotQ8Rows is the assembly kernel, absent here; it panics.
func DotQ8Rows(x *float32, w *int8, k int, rows int, scales *float32, out *float32) {
	panic("qgemm: no assembly kernel on this architecture")
}

// DotQ8G is the assembly kernel, absent here; it panics.
func DotQ8G(x *float32, w *int8, k int, scales *float32, group int) float32 {
	panic("qgemm: no assembly kernel on this architecture")
}

// DotQ8GRows is the assembly kernel, absent here; it panics.
func DotQ8GRows(x *float32, w *int8, k int, rows int, scales *float32, group int, out *float32) {
	panic("qgemm: no assembly kernel on this architecture")
}

// DotQ4 is the assembly kernel, absent here; it panics.
func DotQ4(x *float32, w *int8, k int, scales *float32, group int, levels *[16]float32) float32 {
	panic("qgemm: no assembly kernel on this architecture")
}

// Dot1x4S is the assembly kernel, absent here; it panics.
func Dot1x4S(a *int8, b *int8, ldb int, k int, out *int32) {
	panic("qgemm: no assembly kernel on this architecture")
}

// AbsMax is the assembly kernel, absent here; it panics.
func AbsMax(x *float32, n int) float32 { panic("qgemm: no assembly kernel on this architecture") }

// DequantQ8 is the assembly kernel, absent here; it panics.
func DequantQ8(dst *float32, w *int8, k int, s float32) {
	panic("qgemm: no assembly kernel on this architecture")
}

// DequantQ4 is the assembly kernel, absent here; it panics.
func DequantQ4(dst *float32, w *int8, k int, scales *float32, group int, levels *[16]float32) {
	panic("qgemm: no assembly kernel on this architecture")
}

// DotQ4L is the assembly kernel, absent here; it panics.
func DotQ4L(x *float32, w *int8, k int, s *ScaleWalk, levels *[16]float32) float32 {
	panic("qgemm: no assembly kernel on this architecture")
}

// Dot4Q8 is the assembly kernel, absent here; it panics.
func Dot4Q8(x *float32, ldx int, w *int8, k int, out *float32, ldo int, pre *int8) {
	panic("qgemm: no assembly kernel on this architecture")
}

// Dot4Q8G32 is the assembly kernel, absent here; it panics.
func Dot4Q8G32(x *float32, ldx int, w *int8, k int, out *float32, ldo int, pre *int8, scales *float32) {
	panic("qgemm: no assembly kernel on this architecture")
}

// DotQ8GRowsH is the assembly kernel, absent here; it panics.
func DotQ8GRowsH(x *float32, w *int8, k int, rows int, scales *uint16, group int, out *float32) {
	panic("qgemm: no assembly kernel on this architecture")
}

// Dot4Q8G32H is the assembly kernel, absent here; it panics.
func Dot4Q8G32H(x *float32, ldx int, w *int8, k int, out *float32, ldo int, pre *int8, scales *uint16) {
	panic("qgemm: no assembly kernel on this architecture")
}

// DotQ4LRows is the assembly kernel, absent here; it panics.
func DotQ4LRows(x *float32, w *int8, k int, rows int, s *ScaleWalk, levels *[16]float32, out *float32) {
	panic("qgemm: no assembly kernel on this architecture")
}
