//go:build !amd64 || purego

package vecmath

// CastAvailable reports whether the casts run on this CPU: never without
// the assembly.
var CastAvailable = false

// F16ToF32 is the assembly binary16 widening, absent here; it panics.
func F16ToF32(dst []float32, src []uint16) { panic("vecmath: no assembly on this architecture") }

// F32ToF16 is the assembly binary16 rounding, absent here; it panics.
func F32ToF16(dst []uint16, src []float32) { panic("vecmath: no assembly on this architecture") }

// BF16ToF32 is the assembly bfloat16 widening, absent here; it panics.
func BF16ToF32(dst []float32, src []uint16) { panic("vecmath: no assembly on this architecture") }

// F32ToBF16 is the assembly bfloat16 rounding, absent here; it panics.
func F32ToBF16(dst []uint16, src []float32) { panic("vecmath: no assembly on this architecture") }

// HalfAvailable reports whether ReLU16 runs on this CPU: never without the
// assembly.
var HalfAvailable = false

// ReLU16 is the assembly ReLU on 16-bit floats, absent here; it panics.
func ReLU16(dst, src []uint16, inf, quiet uint16) { panic("vecmath: no assembly on this architecture") }
