//go:build amd64 && !purego

package winograd

import "golang.org/x/sys/cpu"

// Available reports whether Input and Output run on this CPU (AVX-512F).
var Available = cpu.X86.HasAVX512F

// Input sets v[(4i+j)·vs + c] = (Bᵀ d B)[i][j] for the 4×4 tile d[i][j] =
// x[i·rs + j·cs + c] of n channels, n a positive multiple of 16; the
// caller vouches for the bounds.
func Input(n int, x *float32, rs, cs int, v *float32, vs int) {
	inputAVX512(n, x, rs, cs, v, vs)
}

// Output sets the 2×2 pixels y[a·rs + b·cs + c] = max(floor, (Aᵀ m A)[a][b]
// + bias[c] + r[a·rs + b·cs + c]) for the 4×4 tile m[i][j] = m[(4i+j)·ms +
// c] of n channels, n a positive multiple of 16, bias and r left out where
// nil (r may be y); the caller vouches for the bounds.
func Output(n int, m *float32, ms int, y *float32, rs, cs int, r, bias *float32, floor float32) {
	outputAVX512(n, m, ms, y, rs, cs, r, bias, floor)
}

//go:noescape
func inputAVX512(n int, x *float32, rs, cs int, v *float32, vs int)

//go:noescape
func outputAVX512(n int, m *float32, ms int, y *float32, rs, cs int, r, bias *float32, floor float32)
