package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu/internal/sgemmasm"
)

// bf16Kernels are the bfloat16 micro-kernels this CPU runs: the Go
// reference, and the assembly where the processor has AVX-512 BF16.
func bf16Kernels() []bf16Kernel {
	ks := []bf16Kernel{goBF16Kernel}
	if sgemmasm.AvailableBF16 {
		ks = append(ks, asmBF16Kernel)
	}
	return ks
}

// randBF16 returns n random bfloat16 values in [-1, 1).
func randBF16(r *rand.Rand, n int) []uint16 {
	s := make([]uint16, n)
	for i := range s {
		s[i] = kernels.BF16FromFloat32(float32(2*r.Float64() - 1))
	}
	return s
}

// TestBF16Kernel checks the AVX-512 BF16 micro-kernel against the Go
// reference, which does VDPBF16PS's arithmetic in the same order: the
// same bits, over depths either side of its unrolling by four, with and
// without beta, and with subnormal and special inputs.
func TestBF16Kernel(t *testing.T) {
	if !sgemmasm.AvailableBF16 {
		t.Skip("no AVX-512 BF16: only the Go kernel runs, and TestBF16Gemm checks it")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, k2 := range []int{1, 2, 3, 4, 5, 8, 33, 128} {
		for _, ab := range [][2]float32{{1, 0}, {0.5, 1}, {-2, 0.25}} {
			a, b := make([]uint32, k2*12), make([]uint32, k2*32)
			for i := range a {
				a[i] = r.Uint32()&0xbfffbfff | 0x3c003c00 // finite, |x| in [2^-7, 4)
			}
			for i := range b {
				b[i] = r.Uint32()&0xbfffbfff | 0x3c003c00
			}
			// Subnormals and zeros, which VDPBF16PS reads as zero.
			a[0], b[1] = 0x00010001, 0x80000003
			const ldc = 37
			c0 := make([]float32, 11*ldc+32)
			for i := range c0 {
				c0[i] = float32(r.Float64())
			}
			want, got := append([]float32(nil), c0...), append([]float32(nil), c0...)
			kernelGoBF16x12x32(k2, a, b, want, ldc, ab[0], ab[1], nil)
			kernelAsmBF16x12x32(k2, a, b, got, ldc, ab[0], ab[1], a)
			for i := range want {
				require.Equal(t, want[i], got[i], "k2 %d alpha %g beta %g at %d", k2, ab[0], ab[1], i)
			}
		}
	}
}

// TestBF16Gemm checks our bfloat16 GEMM, with each micro-kernel, against
// gonum's SGEMM of the widened values (the products are exact, so only
// the order of the sums differs): every transpose, odd depths (a pair
// half past k), sizes off the tile, padded strides, operands starting at
// odd elements (the unaligned packs) and sizes that split over
// goroutines.
func TestBF16Gemm(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var ref gonum.Implementation
	for _, kern := range bf16Kernels() {
		g := bf16Gemm{kern}
		for _, tc := range []struct {
			m, n, k, pad, off int
			alpha, beta       float32
		}{
			{1, 1, 1, 0, 0, 1, 0}, {12, 32, 2, 0, 0, 1, 0}, {7, 5, 3, 2, 1, 2, 1}, {24, 64, 64, 0, 0, 0.125, 0},
			{64, 48, 97, 1, 1, 1, 0.5}, {130, 67, 257, 3, 0, -1, 0}, {33, 300, 513, 0, 1, 1, 1},
		} {
			for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
					name := fmt.Sprintf("%s/%dx%dx%d/pad%d/off%d/%c%c", kern.name, tc.m, tc.n, tc.k, tc.pad, tc.off, tA, tB)
					ar, ac := tc.m, tc.k
					if tA == blas.Trans {
						ar, ac = tc.k, tc.m
					}
					br, bc := tc.k, tc.n
					if tB == blas.Trans {
						br, bc = tc.n, tc.k
					}
					lda, ldb, ldc := ac+tc.pad, bc+tc.pad, tc.n+tc.pad
					a := randBF16(r, tc.off+ar*lda)[tc.off:]
					b := randBF16(r, tc.off+br*ldb)[tc.off:]
					widen := func(s []uint16) []float32 {
						w := make([]float32, len(s))
						for i, h := range s {
							w[i] = kernels.BF16ToFloat32(h)
						}
						return w
					}
					c := make([]float32, tc.m*ldc)
					for i := range c {
						c[i] = float32(r.Float64())
					}
					want := append([]float32(nil), c...)
					ref.Sgemm(tA, tB, tc.m, tc.n, tc.k, tc.alpha, widen(a), lda, widen(b), ldb, tc.beta, want, ldc)
					g.Bf16gemm(tA, tB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc)
					for i := range c {
						require.InDelta(t, want[i], c[i], 1e-5*float64(tc.k), "%s at %d", name, i)
					}
				}
			}
		}
		// Arguments that do not fit their slices are SGEMM's panic.
		assert.Panics(t, func() {
			g.Bf16gemm(blas.NoTrans, blas.NoTrans, 4, 4, 4, 1, make([]uint16, 15), 4, make([]uint16, 16), 4, 0, make([]float32, 16), 4)
		})
	}
}

// TestPackPairs checks the pair packs against their definition, the
// aligned assembly path against the element-wise one, at odd depths and
// partial panels.
func TestPackPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, w := range []int{12, 32} {
		for _, kc := range []int{1, 2, 7, 64, 256} {
			for _, n := range []int{1, w - 1, w} {
				const ld = 300
				src := randBF16(r, 2+ld*max(n, kc))
				for _, off := range []int{0, 1, 2} { // 2: aligned; 1: not
					s := src[off:]
					along := make([]uint32, (kc+1)/2*w)
					packPairsAlong(along, s, ld, n, kc, w)
					across := make([]uint32, (kc+1)/2*w)
					packPairsAcross(across, s, ld, kc, n, w)
					for p := range (kc + 1) / 2 {
						for i := range w {
							var wa, wc uint32
							if i < n {
								wa, wc = uint32(s[i*ld+2*p]), uint32(s[2*p*ld+i])
								if 2*p+1 < kc {
									wa |= uint32(s[i*ld+2*p+1]) << 16
									wc |= uint32(s[(2*p+1)*ld+i]) << 16
								}
							}
							require.Equal(t, wa, along[p*w+i], "along w %d kc %d n %d off %d at p %d i %d", w, kc, n, off, p, i)
							require.Equal(t, wc, across[p*w+i], "across w %d kc %d n %d off %d at p %d i %d", w, kc, n, off, p, i)
						}
					}
				}
			}
		}
	}
}
