//go:build amd64 && !purego

package vecmath

import "golang.org/x/sys/cpu"

// The casts between float32 and the 16-bit float storage types. Each sets
// dst[i] from src[i] for i < len(dst), src being at least as long as dst,
// and gives the bits that package kernels' scalar conversions give (its
// F16ToFloat32, F16FromFloat32, BF16ToFloat32 and BF16FromFloat32), NaNs
// included. They run only where CastAvailable is true.

// CastAvailable reports whether the casts run on this CPU: AVX-512F, or
// AVX2 with F16C.
var CastAvailable = cpu.X86.HasAVX512F || cpu.X86.HasAVX2 && cpu.X86.HasF16C

// F16ToF32 widens the binary16 values src[i] to dst[i] exactly (VCVTPH2PS):
// subnormals are normalised and a signalling NaN is quieted, its payload
// kept.
func F16ToF32(dst []float32, src []uint16) {
	n := len(dst)
	if n == 0 {
		return
	}
	src = src[:n]
	if AVX512 {
		f16ToF32AVX512(&dst[0], &src[0], n)
		return
	}
	m := n &^ 7
	if m > 0 {
		f16ToF32AVX2(&dst[0], &src[0], m)
	}
	if m < n {
		var s [8]uint16
		var d [8]float32
		copy(s[:], src[m:])
		f16ToF32AVX2(&d[0], &s[0], 8)
		copy(dst[m:], d[:])
	}
}

// F32ToF16 rounds src[i] to the nearest binary16 in dst[i], ties to even
// (VCVTPS2PH): overflow gives ±Inf, gradual underflow to subnormals and
// ±0, and a NaN keeps its sign and the top 10 bits of its payload with the
// quiet bit set.
func F32ToF16(dst []uint16, src []float32) {
	n := len(dst)
	if n == 0 {
		return
	}
	src = src[:n]
	if AVX512 {
		f32ToF16AVX512(&dst[0], &src[0], n)
		return
	}
	m := n &^ 7
	if m > 0 {
		f32ToF16AVX2(&dst[0], &src[0], m)
	}
	if m < n {
		var s [8]float32
		var d [8]uint16
		copy(s[:], src[m:])
		f32ToF16AVX2(&d[0], &s[0], 8)
		copy(dst[m:], d[:])
	}
}

// BF16ToF32 widens the bfloat16 values src[i] to dst[i] exactly: the 16
// bits become the upper half of the float32, NaNs unchanged.
func BF16ToF32(dst []float32, src []uint16) {
	n := len(dst)
	if n == 0 {
		return
	}
	src = src[:n]
	if AVX512 {
		bf16ToF32AVX512(&dst[0], &src[0], n)
		return
	}
	m := n &^ 7
	if m > 0 {
		bf16ToF32AVX2(&dst[0], &src[0], m)
	}
	if m < n {
		var s [8]uint16
		var d [8]float32
		copy(s[:], src[m:])
		bf16ToF32AVX2(&d[0], &s[0], 8)
		copy(dst[m:], d[:])
	}
}

// F32ToBF16 rounds src[i] to the nearest bfloat16 in dst[i], ties to even,
// in integer arithmetic on the bits (b + 0x7fff + (b>>16)&1, shifted right
// by 16): overflow carries into ±Inf and float32 subnormals round to
// bfloat16 subnormals or ±0. A NaN keeps its sign and the top 7 bits of its
// payload with the quiet bit set.
func F32ToBF16(dst []uint16, src []float32) {
	n := len(dst)
	if n == 0 {
		return
	}
	src = src[:n]
	if AVX512 {
		f32ToBF16AVX512(&dst[0], &src[0], n)
		return
	}
	m := n &^ 7
	if m > 0 {
		f32ToBF16AVX2(&dst[0], &src[0], m)
	}
	if m < n {
		var s [8]float32
		var d [8]uint16
		copy(s[:], src[m:])
		f32ToBF16AVX2(&d[0], &s[0], 8)
		copy(dst[m:], d[:])
	}
}

// f16ToF32AVX512 sets dst[i] = F16ToF32(src[i]) for i < n, n ≥ 1.
//
//go:noescape
func f16ToF32AVX512(dst *float32, src *uint16, n int)

// f32ToF16AVX512 sets dst[i] = F32ToF16(src[i]) for i < n, n ≥ 1.
//
//go:noescape
func f32ToF16AVX512(dst *uint16, src *float32, n int)

// bf16ToF32AVX512 sets dst[i] = BF16ToF32(src[i]) for i < n, n ≥ 1.
//
//go:noescape
func bf16ToF32AVX512(dst *float32, src *uint16, n int)

// f32ToBF16AVX512 sets dst[i] = F32ToBF16(src[i]) for i < n, n ≥ 1.
//
//go:noescape
func f32ToBF16AVX512(dst *uint16, src *float32, n int)

// f16ToF32AVX2 sets dst[i] = F16ToF32(src[i]) for i < n, n a positive
// multiple of 8.
//
//go:noescape
func f16ToF32AVX2(dst *float32, src *uint16, n int)

// f32ToF16AVX2 sets dst[i] = F32ToF16(src[i]) for i < n, n a positive
// multiple of 8.
//
//go:noescape
func f32ToF16AVX2(dst *uint16, src *float32, n int)

// bf16ToF32AVX2 sets dst[i] = BF16ToF32(src[i]) for i < n, n a positive
// multiple of 8.
//
//go:noescape
func bf16ToF32AVX2(dst *float32, src *uint16, n int)

// f32ToBF16AVX2 sets dst[i] = F32ToBF16(src[i]) for i < n, n a positive
// multiple of 8.
//
//go:noescape
func f32ToBF16AVX2(dst *uint16, src *float32, n int)
