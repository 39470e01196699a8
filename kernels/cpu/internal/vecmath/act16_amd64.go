//go:build amd64 && !purego

package vecmath

// The activations on 16-bit floats (binary16, or bfloat16 where bf16 is
// set), fused: dst[i] = f(src[i]) with the same bits as widening (F16ToF32
// or BF16ToF32), the float32 function and rounding back (F32ToF16 or
// F32ToBF16), without the float32 values leaving the registers. They need
// AVX-512 (where AVX512 is set; the caller checks, and keeps the float32
// round trip for AVX2).

// GELU16 is GELU on 16-bit floats.
func GELU16(dst, src []uint16, bf16 bool) {
	act16(dst, src, bf16, geluBF16AVX512, geluF16AVX512)
}

// GELUTanh16 is GELUTanh on 16-bit floats.
func GELUTanh16(dst, src []uint16, bf16 bool) {
	act16(dst, src, bf16, geluTanhBF16AVX512, geluTanhF16AVX512)
}

// SiLU16 is SiLU on 16-bit floats.
func SiLU16(dst, src []uint16, bf16 bool) {
	act16(dst, src, bf16, siluBF16AVX512, siluF16AVX512)
}

func act16(dst, src []uint16, bf16 bool, b, h func(dst, src *uint16, n int)) {
	if !AVX512 {
		panic("vecmath: the fused 16-bit activations need AVX-512")
	}
	if len(dst) == 0 {
		return
	}
	f := h
	if bf16 {
		f = b
	}
	f(&dst[0], &src[:len(dst)][0], len(dst))
}

// geluBF16AVX512 and the functions below set dst[i] = f(src[i]) for i < n,
// n ≥ 1, on bfloat16 (BF16) or binary16 (F16) values.
//
//go:noescape
func geluBF16AVX512(dst, src *uint16, n int)

//go:noescape
func geluF16AVX512(dst, src *uint16, n int)

//go:noescape
func geluTanhBF16AVX512(dst, src *uint16, n int)

//go:noescape
func geluTanhF16AVX512(dst, src *uint16, n int)

//go:noescape
func siluBF16AVX512(dst, src *uint16, n int)

//go:noescape
func siluF16AVX512(dst, src *uint16, n int)
