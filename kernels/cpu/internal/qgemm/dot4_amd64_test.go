//go:build amd64 && !purego

package qgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/x448/float16"
)

// dot4Case is a Dot4 kernel and the one-row kernel each of its sums must
// equal, at the lengths it takes.
type dot4Case struct {
	name string
	ks   []int
	dot1 func(x []float32, w []int8, k int, scales []float32) float32
	dot4 func(x []float32, ldx int, w []int8, k int, out []float32, ldo int, scales []float32)
}

var dot4Cases = []dot4Case{
	{"q8", []int{16, 32, 48, 64, 80, 112, 128, 2048, 5632},
		func(x []float32, w []int8, k int, _ []float32) float32 { return DotQ8(&x[0], &w[0], k) },
		func(x []float32, ldx int, w []int8, k int, out []float32, ldo int, _ []float32) {
			Dot4Q8(&x[0], ldx, &w[0], k, &out[0], ldo, &w[0])
		}},
	{"q8g32", []int{128, 256, 384, 2048, 5632},
		func(x []float32, w []int8, k int, s []float32) float32 { return DotQ8G(&x[0], &w[0], k, &s[0], 32) },
		func(x []float32, ldx int, w []int8, k int, out []float32, ldo int, s []float32) {
			Dot4Q8G32(&x[0], ldx, &w[0], k, &out[0], ldo, &w[0], &s[0])
		}},
}

// TestDot4EqualsDot1 checks that every row's sum from a Dot4 kernel is
// the one-row kernel's bit for bit, with rows of x padded apart, and
// that the kernel writes only the four sums.
func TestDot4EqualsDot1(t *testing.T) {
	if !Available {
		t.Skip("no AVX-512 VNNI")
	}
	rng := rand.New(rand.NewPCG(43, 44))
	for _, c := range dot4Cases {
		for _, k := range c.ks {
			t.Run(fmt.Sprintf("%s/k=%d", c.name, k), func(t *testing.T) {
				ldx, ldo := k+5, 3
				x := make([]float32, 4*ldx)
				for i := range x {
					x[i] = float32(2*rng.Float64() - 1)
				}
				w := randCodes(rng, k)
				s := randScales(rng, k/32, 0.01, 0.01)
				const sentinel = -7.5
				out := make([]float32, 4*ldo)
				for i := range out {
					out[i] = sentinel
				}
				c.dot4(x, ldx, w, k, out, ldo, s)
				for i, v := range out {
					if i%ldo != 0 {
						require.Equal(t, float32(sentinel), v, "out[%d] is not one of the sums and was written", i)
						continue
					}
					r := i / ldo
					want := c.dot1(x[r*ldx:], w, k, s)
					require.Equal(t, math.Float32bits(want), math.Float32bits(v), "row %d: Dot4 %v, one-row %v", r, v, want)
				}
			})
		}
	}
}

// TestRowsKernelsEqualOneRow checks that each row's result of DotQ8Rows
// and DotQ8GRows is the one-row kernel's (DotQ8 times the row's scale,
// DotQ8G) bit for bit, and that they write only their rows.
func TestRowsKernelsEqualOneRow(t *testing.T) {
	if !Available {
		t.Skip("no AVX-512 VNNI")
	}
	rng := rand.New(rand.NewPCG(45, 46))
	for _, c := range []struct {
		name  string
		group int // 0: one scale per row
		ks    []int
	}{
		{"q8", 0, []int{16, 48, 64, 80, 2048, 5632}},
		{"q8g32", 32, []int{32, 96, 128, 160, 2048, 5632}},
		{"q8g64", 64, []int{64, 192, 2048}},
	} {
		for _, k := range c.ks {
			for _, rows := range []int{1, 3, 17} {
				t.Run(fmt.Sprintf("%s/k=%d/rows=%d", c.name, k, rows), func(t *testing.T) {
					x := make([]float32, k)
					for i := range x {
						x[i] = float32(2*rng.Float64() - 1)
					}
					w := randCodes(rng, rows*k)
					perRow := 1
					if c.group > 0 {
						perRow = k / c.group
					}
					s := randScales(rng, rows*perRow, 0.01, 0.01)
					const sentinel = -7.5
					out := make([]float32, rows+1)
					out[rows] = sentinel
					if c.group == 0 {
						DotQ8Rows(&x[0], &w[0], k, rows, &s[0], &out[0])
					} else {
						DotQ8GRows(&x[0], &w[0], k, rows, &s[0], c.group, &out[0])
					}
					for r := range rows {
						want := DotQ8(&x[0], &w[r*k], k) * s[r]
						if c.group > 0 {
							want = DotQ8G(&x[0], &w[r*k], k, &s[r*perRow], c.group)
						}
						require.Equal(t, math.Float32bits(want), math.Float32bits(out[r]), "row %d: %v, one-row kernel %v", r, out[r], want)
					}
					require.Equal(t, float32(sentinel), out[rows], "wrote past its rows")
				})
			}
		}
	}
}

// BenchmarkDot4 times the Dot4 kernels against four one-row calls on rows
// of TinyLlama's width (2048), codes and x in cache: GFLOP/s.
func BenchmarkDot4(b *testing.B) {
	if !Available {
		b.Skip("no AVX-512 VNNI")
	}
	const k = 2048
	x := make([]float32, 4*k)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	w := make([]int8, k)
	for i := range w {
		w[i] = int8(i%11 - 5)
	}
	s := make([]float32, k/32)
	for i := range s {
		s[i] = 0.01
	}
	out := make([]float32, 4)
	for _, c := range dot4Cases {
		b.Run(c.name+"/dot4", func(b *testing.B) {
			for b.Loop() {
				c.dot4(x, k, w, k, out, 1, s)
			}
			b.ReportMetric(8*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(c.name+"/dot1x4", func(b *testing.B) {
			for b.Loop() {
				for r := range 4 {
					out[r] = c.dot1(x[r*k:], w, k, s)
				}
			}
			b.ReportMetric(8*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// TestHalfScaleKernels checks that the kernels over float16 scales give
// the float32 kernels' sums over the same scales widened, bit for bit:
// normal, subnormal, negative and zero scales, groups of 32 and 64, one
// row of x and four.
func TestHalfScaleKernels(t *testing.T) {
	if !Available {
		t.Skip("no AVX-512 VNNI")
	}
	rng := rand.New(rand.NewPCG(47, 48))
	for _, c := range []struct{ group, k int }{{32, 32}, {32, 96}, {32, 128}, {32, 2048}, {32, 5632}, {64, 192}, {64, 2048}} {
		const rows = 5
		k, group := c.k, c.group
		t.Run(fmt.Sprintf("group=%d/k=%d", group, k), func(t *testing.T) {
			x := make([]float32, 4*k)
			for i := range x {
				x[i] = float32(2*rng.Float64() - 1)
			}
			w := randCodes(rng, rows*k)
			h := make([]uint16, rows*k/group)
			s := make([]float32, len(h))
			special := []uint16{0x0000, 0x8000, 0x0001, 0x83ff, 0x7bff, 0xfbff}
			for i := range h {
				h[i] = float16.Fromfloat32(float32((2*rng.Float64() - 1) * 0.02)).Bits()
				if i < len(special) {
					h[i] = special[i]
				}
				s[i] = float16.Frombits(h[i]).Float32()
			}
			want, got := make([]float32, rows), make([]float32, rows)
			DotQ8GRows(&x[0], &w[0], k, rows, &s[0], group, &want[0])
			DotQ8GRowsH(&x[0], &w[0], k, rows, &h[0], group, &got[0])
			for r := range rows {
				require.Equal(t, math.Float32bits(want[r]), math.Float32bits(got[r]), "DotQ8GRowsH row %d: %v, float32 scales %v", r, got[r], want[r])
			}
			if group != 32 || k%128 != 0 {
				return
			}
			for r := range rows {
				var want4, got4 [4]float32
				Dot4Q8G32(&x[0], k, &w[r*k], k, &want4[0], 1, &w[0], &s[r*k/32])
				Dot4Q8G32H(&x[0], k, &w[r*k], k, &got4[0], 1, &w[0], &h[r*k/32])
				for i := range want4 {
					require.Equal(t, math.Float32bits(want4[i]), math.Float32bits(got4[i]), "Dot4Q8G32H weight row %d, x row %d: %v, float32 scales %v", r, i, got4[i], want4[i])
				}
			}
		})
	}
}
