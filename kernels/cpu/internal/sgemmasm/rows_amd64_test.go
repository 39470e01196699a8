//go:build amd64 && !purego

package sgemmasm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKernelRows12x32 checks the in-place kernels (12, 8 and 4 rows)
// against a float64 sum
// over the rows, segments, beta, bias and floor it is given, and that it
// writes only its tile and reads the residual only where beta is not 0.
func TestKernelRows12x32(t *testing.T) {
	if !Available512 {
		t.Skip("no AVX-512F on this CPU")
	}
	inf := float32(math.Inf(-1))
	for _, c := range []struct {
		k, lda, segs, segStride int
		beta, floor             float32
		bias, ownResidual       bool
	}{
		{k: 1, lda: 1, segs: 1, segStride: 1, floor: inf},
		{k: 3, lda: 3, segs: 1, segStride: 3, floor: inf, bias: true},
		{k: 64, lda: 64, segs: 1, segStride: 64, beta: 1, floor: 0, bias: true},
		{k: 192, lda: 64, segs: 3, segStride: 58 * 64, floor: 0, bias: true},
		{k: 21, lda: 6, segs: 7, segStride: 224 * 3, beta: 0.5, floor: inf, ownResidual: true},
		{k: 9, lda: 9, segs: 1, segStride: 9, beta: 1, floor: 0, bias: true, ownResidual: true},
		{k: 7, lda: 10, segs: 2, segStride: 100, beta: -2, floor: 0},
		{k: 5, lda: 300, segs: 1, segStride: 5, floor: 0, bias: true},
	} {
		for _, kern := range []struct {
			rows int
			fn   func(k int, a *float32, lda, segs, segStride int, b, c *float32, ldc int, r *float32, beta, floor float32, bias, next *float32)
		}{{12, KernelRows12x32}, {8, KernelRows8x32}, {4, KernelRows4x32}} {
			t.Run(fmt.Sprintf("rows=%d/k=%d/lda=%d/segs=%d/beta=%g/floor=%g/bias=%t", kern.rows, c.k, c.lda, c.segs, c.beta, c.floor, c.bias), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(c.k), uint64(c.lda)))
				an := 11*c.lda + (c.segs-1)*c.segStride + c.k
				a := make([]float32, an)
				for i := range a {
					a[i] = r.Float32()*2 - 1
				}
				b := make([]float32, c.segs*c.k*32)
				for i := range b {
					b[i] = r.Float32()*2 - 1
				}
				bias := make([]float32, 32)
				if c.bias {
					for i := range bias {
						bias[i] = r.Float32()*2 - 1
					}
				}
				const ldc = 40
				old := make([]float32, 12*ldc)
				for i := range old {
					old[i] = r.Float32()*2 - 1
					if c.beta == 0 {
						old[i] = float32(math.NaN())
					}
				}
				out := append([]float32(nil), old...)
				res := &out[0] // the residual is c itself, or a tile of its own
				if c.ownResidual {
					res = &old[0]
					for i := range out {
						out[i] = float32(math.NaN())
					}
				}
				next := &b[0] // a prefetch hint, with or without one
				if c.ownResidual {
					next = nil
				}
				kern.fn(c.k, &a[0], c.lda, c.segs, c.segStride, &b[0], &out[0], ldc, res, c.beta, c.floor, &bias[0], next)
				for i := range 12 {
					for j := range ldc {
						got := out[i*ldc+j]
						if j >= 32 || i >= kern.rows {
							want := old[i*ldc+j]
							if c.ownResidual {
								want = float32(math.NaN())
							}
							assert.True(t, math.IsNaN(float64(got)) && math.IsNaN(float64(want)) || got == want,
								"c[%d][%d] outside the %d-row tile was written", i, j, kern.rows)
							continue
						}
						var sum float64
						for s := range c.segs {
							for p := range c.k {
								sum += float64(a[i*c.lda+s*c.segStride+p]) * float64(b[(s*c.k+p)*32+j])
							}
						}
						if c.beta != 0 {
							sum += float64(c.beta) * float64(old[i*ldc+j])
						}
						sum = max(sum+float64(bias[j]), float64(c.floor))
						require.InDelta(t, sum, float64(got), 1e-5*float64(c.segs*c.k+2), "c[%d][%d]", i, j)
					}
				}
			})
		}
	}
}

// BenchmarkKernelRows12x32 times the in-place kernel against Kernel12x32
// on a packed panel, both over ResNet-50's first 3×3 convolution (64
// channels, a 58-pixel padded row): 12 output pixels by 64 filters, k 576;
// and the in-place kernels of 8 and 4 rows on the same.
func BenchmarkKernelRows12x32(b *testing.B) {
	if !Available512 {
		b.Skip("no AVX-512F on this CPU")
	}
	const ci, k, w = 64, 576, 58
	x := make([]float32, 3*w*ci)
	packed := make([]float32, 12*k)
	filters := make([]float32, 2*k*32)
	c := make([]float32, 12*64)
	bias := make([]float32, 32)
	flops := func(b *testing.B, rows int) {
		b.ReportMetric(float64(2*rows*64*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
	b.Run("kernel=packed", func(b *testing.B) {
		for b.Loop() {
			for j := range 2 {
				Kernel12x32(k, &packed[0], &filters[j*k*32], &c[j*32], 64, 1, 0, &filters[j*k*32])
			}
		}
		flops(b, 12)
	})
	b.Run("kernel=rows", func(b *testing.B) {
		for b.Loop() {
			for j := range 2 {
				KernelRows12x32(3*ci, &x[0], ci, 3, w*ci, &filters[j*k*32], &c[j*32], 64, &c[j*32], 0, 0, &bias[0], nil)
			}
		}
		flops(b, 12)
	})
	for _, r := range []struct {
		rows int
		fn   func(k int, a *float32, lda, segs, segStride int, b, c *float32, ldc int, r *float32, beta, floor float32, bias, next *float32)
	}{{8, KernelRows8x32}, {4, KernelRows4x32}} {
		b.Run(fmt.Sprintf("kernel=rows%d", r.rows), func(b *testing.B) {
			for b.Loop() {
				for j := range 2 {
					r.fn(3*ci, &x[0], ci, 3, w*ci, &filters[j*k*32], &c[j*32], 64, &c[j*32], 0, 0, &bias[0], nil)
				}
			}
			flops(b, r.rows)
		})
	}
}
