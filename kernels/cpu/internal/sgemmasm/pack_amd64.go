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
