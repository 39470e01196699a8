//go:build !amd64 || purego

package winograd

// Available reports whether Input and Output run on this CPU: never
// without the assembly.
var Available = false

// Input is the assembly input transform, absent here; it panics.
func Input(n int, x *float32, rs, cs int, v *float32, vs int) {
	panic("winograd: no assembly on this architecture")
}

// Output is the assembly output transform, absent here; it panics.
func Output(n int, m *float32, ms int, y *float32, rs, cs int, r, bias *float32, floor float32) {
	panic("winograd: no assembly on this architecture")
}
