//go:build !amd64 || purego

package vecmath

// Add is the assembly addition, absent here; it panics.
func Add(dst, a, b []float32) { panic("vecmath: no assembly on this architecture") }

// MaxOf is the assembly maximum, absent here; it panics.
func MaxOf(dst, a, b []float32) { panic("vecmath: no assembly on this architecture") }

// MaxWindows is the assembly windowed maximum, absent here; it panics.
func MaxWindows(dst, src []float32, c, n, step, taps, tapStep int) {
	panic("vecmath: no assembly on this architecture")
}
