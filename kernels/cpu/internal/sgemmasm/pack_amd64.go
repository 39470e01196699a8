//go:build amd64 && !purego

package sgemmasm

// PackA12 packs a 12-row panel of a row-major matrix for Kernel12x32:
// dst[p*12+i] = a[i*lda+p] for i < 12 and p < kc. It runs where
// Available512 holds; kc ≥ 1, and the caller vouches for the bounds
// (12·kc floats at dst, 11·lda+kc at a).
//
//go:noescape
func PackA12(dst, a *float32, lda, kc int)

// PackBT32 packs a 32-column panel of the transpose of a row-major
// matrix for Kernel12x32: dst[p*32+j] = b[j*ldb+p] for j < 32 and p < kc.
// It runs where Available512 holds; kc ≥ 1, and the caller vouches for
// the bounds (32·kc floats at dst, 31·ldb+kc at b).
//
//go:noescape
func PackBT32(dst, b *float32, ldb, kc int)

// PackPairs32 packs a 32-column panel of bfloat16 pairs for
// KernelBF16x12x32 from a row-major matrix whose k runs down the columns:
// dst[p*32+j] holds b[2p*ldb+j] in its low half and b[(2p+1)*ldb+j] in its
// high half, for j < 32 and p < k2. It runs where Available512 holds;
// k2 ≥ 1, and the caller vouches for the bounds (32·k2 words at dst,
// (2k2−1)·ldb+32 values at b).
//
//go:noescape
func PackPairs32(dst *uint32, b *uint16, ldb, k2 int)

// PackQ8T32 packs a 32-column panel of the transpose of int8 codes for
// Kernel12x32, dequantized: dst[p*32+j] = float32(codes[j*ldc+p])·
// scales[(p/16/per)*32+j] for j < 32 and p < kc, each value one float32
// product (as a row dequantized and then packed by PackBT32). Every per
// chunks of 16 codes along k share a vector of 32 scales (per 2 for
// groups of 32). It runs where Available512 holds; kc is a positive
// multiple of 16 and per positive, and the caller vouches for the bounds
// (32·kc floats at dst, 31·ldc+kc bytes at codes, 32·⌈kc/16/per⌉ scales).
//
//go:noescape
func PackQ8T32(dst *float32, codes *int8, ldc, kc int, scales *float32, per int)

// PackQ4T32 is PackQ8T32 for 4-bit codes, two a byte (ldc bytes a row):
// each 32 values of a row, 16 bytes, are the levels of their low nibbles
// then of their high ones (dequantRow's order), times the row's scale:
// dst[p*32+j] = levels[nibble(j, p)]·scales[(p/32/per)*32+j] for j < 32
// and p < kc, every per chunks of 32 values sharing a vector of 32
// scales. kc is a positive multiple of 32.
//
//go:noescape
func PackQ4T32(dst *float32, codes *int8, ldc, kc int, scales *float32, per int, levels *[16]float32)
