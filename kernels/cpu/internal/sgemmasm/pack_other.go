//go:build !amd64 || purego

package sgemmasm

// PackA12 is the AVX-512 packing of a 12-row panel, absent here; it
// panics.
func PackA12(dst, a *float32, lda, kc int) {
	panic("sgemmasm: no assembly packing on this architecture")
}

// PackBT32 is the AVX-512 packing of a transposed 32-column panel,
// absent here; it panics.
func PackBT32(dst, b *float32, ldb, kc int) {
	panic("sgemmasm: no assembly packing on this architecture")
}

// PackPairs32 is the AVX-512 packing of bfloat16 pairs, absent here; it
// panics.
func PackPairs32(dst *uint32, b *uint16, ldb, k2 int) {
	panic("sgemmasm: no assembly packing on this architecture")
}

// PackQ8T32 is the AVX-512 dequantizing pack, absent here; it panics.
func PackQ8T32(dst *float32, codes *int8, ldc, kc int, scales *float32, per int) {
	panic("sgemmasm: no assembly packing on this architecture")
}

// PackQ4T32 is the AVX-512 dequantizing pack, absent here; it panics.
func PackQ4T32(dst *float32, codes *int8, ldc, kc int, scales *float32, per int, levels *[16]float32) {
	panic("sgemmasm: no assembly packing on this architecture")
}
