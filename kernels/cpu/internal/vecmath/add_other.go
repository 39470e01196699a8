//go:build !amd64 || purego

package vecmath

// Add is the assembly addition, absent here; it panics.
func Add(dst, a, b []float32) { panic("vecmath: no assembly on this architecture") }

// DotBF16Available is false: no assembly here.
var DotBF16Available = false

// DotBF16 is the assembly dot product, absent here; it panics.
func DotBF16(a []float32, w []uint16) float32 { panic("vecmath: no assembly on this architecture") }

// MaxOf is the assembly maximum, absent here; it panics.
func MaxOf(dst, a, b []float32) { panic("vecmath: no assembly on this architecture") }
