//go:build amd64 && !purego

package vecmath

import "golang.org/x/sys/cpu"

// HalfAvailable reports whether ReLU16 runs on this CPU: AVX2.
var HalfAvailable = cpu.X86.HasAVX2

// ReLU16 sets dst[i] = max(src[i], 0) on the bits of binary16 or bfloat16
// values, as widening to float32, ReLU and rounding back give it, without
// the float32 round trip: src[i] where its sign bit is clear, +0 where it
// is set (−0 included), and src[i] with the quiet bit quiet set where it is
// a NaN, its magnitude above inf (0x7c00 for binary16, 0x7f80 for
// bfloat16). Signed 16-bit maxima against 0, with the NaN lanes blended
// back, 32 values at a time (the rest through a buffer).
func ReLU16(dst, src []uint16, inf, quiet uint16) {
	n := len(dst)
	if n == 0 {
		return
	}
	src = src[:n]
	m := n &^ 31
	if m > 0 {
		relu16AVX2(&dst[0], &src[0], m, inf, quiet)
	}
	if m < n {
		var s, d [32]uint16
		copy(s[:], src[m:])
		relu16AVX2(&d[0], &s[0], 32, inf, quiet)
		copy(dst[m:], d[:])
	}
}

// relu16AVX2 is ReLU16 for n a positive multiple of 32.
//
//go:noescape
func relu16AVX2(dst, src *uint16, n int, inf, quiet uint16)
