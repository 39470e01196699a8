package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu/internal/qgemm"
)

// TestDotI8PathsAgree checks the VNNI kernels against the Go loop, bit for
// bit, over shapes that reach every tile edge and mask, random data and
// the extremes (−128 everywhere, a long K, where a lane's sum of shifted
// products is largest).
func TestDotI8PathsAgree(t *testing.T) {
	if !qgemm.Available {
		t.Skip("no AVX-512 VNNI on this CPU (or -tags purego): the Go loop is the only path")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	cases := []struct {
		m, n, k int
		fill    func() int8
	}{
		{1, 4, 4, nil}, {2, 8, 200, nil}, {3, 12, 4096, func() int8 { return -128 }}, {4, 4, 64, nil}, {5, 7, 68, nil}, {3, 5, 1, nil}, {6, 9, 37, nil}, {4, 4, 127, nil}, {9, 13, 132, nil}, {4, 8, 1020, nil}, {13, 17, 776, nil},
		{6, 6, 4096, func() int8 { return -128 }},
		{5, 9, 2048, func() int8 { return 127 }},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("m=%d/n=%d/k=%d", c.m, c.n, c.k), func(t *testing.T) {
			a, b := make([]int8, c.m*c.k), make([]int8, c.n*c.k)
			for _, s := range [][]int8{a, b} {
				for i := range s {
					if c.fill != nil {
						s[i] = c.fill()
					} else {
						s[i] = int8(rng.IntN(256) - 128)
					}
				}
			}
			got := make([]int32, c.m*c.n)
			dotI8(got, a, b, c.m, c.n, c.k)
			want := make([]int32, c.m*c.n)
			qgemm.Available = false
			defer func() { qgemm.Available = true }()
			dotI8(want, a, b, c.m, c.n, c.k)
			require.Equal(t, want, got)
		})
	}
}

// TestQuantizeRescalePathsAgree checks the assembly Quantize, Rescale and
// AbsMax (the dynamic scale) against the Go loops bit for bit, at every tail length, on ties, NaN,
// infinities and values beyond the clamp.
func TestQuantizeRescalePathsAgree(t *testing.T) {
	if !qgemm.Available {
		t.Skip("no AVX-512 VNNI on this CPU (or -tags purego): the Go loops are the only path")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	special := []float32{0.5, 1.5, 2.5, -0.5, -2.5, 126.5, -126.5, 127.5, 1e30, -1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0, float32(math.Copysign(0, -1))}
	for n := range 40 {
		src := make([]float32, n)
		acc := make([]int32, n)
		cs, bias := make([]float32, n), make([]float32, n)
		for i := range src {
			src[i] = float32(rng.NormFloat64() * 100)
			if rng.IntN(3) == 0 {
				src[i] = special[rng.IntN(len(special))]
			}
			acc[i] = int32(rng.Uint32())
			cs[i], bias[i] = float32(rng.Float64()), float32(rng.NormFloat64())
		}
		gotQ, wantQ := make([]int8, n), make([]int8, n)
		gotR, wantR := make([]float32, n), make([]float32, n)
		quantizeRow(gotQ, src, 1)
		rescale(gotR, acc, 3e-5, cs, bias)
		gotS := rowScale(src)
		qgemm.Available = false
		quantizeRow(wantQ, src, 1)
		rescale(wantR, acc, 3e-5, cs, bias)
		wantS := rowScale(src)
		qgemm.Available = true
		if wantS != wantS {
			require.True(t, gotS != gotS, "n=%d: rowScale of a row with a NaN: %v", n, gotS)
		} else {
			require.Equal(t, wantS, gotS, "n=%d: rowScale", n)
		}
		require.Equal(t, wantQ, gotQ, "n=%d: quantize %v", n, src)
		require.Equal(t, wantR, gotR, "n=%d: rescale", n)
	}
}

// BenchmarkDotI8 times the int32 sums of QMatMul alone (one goroutine) at
// TinyLlama's decode [1×2048]·[2048×5632], BERT's projection
// [128×768]·[768×768] and feed-forward [128×768]·[768×3072], and at
// 1024³.
func BenchmarkDotI8(b *testing.B) {
	for _, s := range [][3]int{{1, 5632, 2048}, {128, 768, 768}, {128, 3072, 768}, {1024, 1024, 1024}} {
		m, n, k := s[0], s[1], s[2]
		b.Run(fmt.Sprintf("m=%d/n=%d/k=%d", m, n, k), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			a, w := make([]int8, m*k), make([]int8, n*k)
			for i := range a {
				a[i] = int8(rng.IntN(255) - 127)
			}
			for i := range w {
				w[i] = int8(rng.IntN(255) - 127)
			}
			acc := make([]int32, m*n)
			for b.Loop() {
				dotI8(acc, a, w, m, n, k)
			}
			b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOP/s")
		})
	}
}

// TestDequantPathsAgree checks the assembly dequantization of weight-only
// rows (WMatMul's prefill path) against the Go loops bit for bit, in each
// format, at K with and without a tail of 16.
func TestDequantPathsAgree(t *testing.T) {
	if !qgemm.Available {
		t.Skip("no AVX-512 VNNI on this CPU (or -tags purego): the Go loops are the only path")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	be := New()
	for _, c := range []struct {
		f        kernels.WeightFormat
		k, group int
	}{{kernels.WInt8, 200, 0}, {kernels.WInt8, 64, 0}, {kernels.WInt4, 256, 32}, {kernels.WInt4, 384, 128}, {kernels.WNF4, 128, 64}} {
		t.Run(fmt.Sprintf("%v/k=%d", c.f, c.k), func(t *testing.T) {
			const n = 3
			bytes := n * c.k * c.f.Bits() / 8
			codes := make([]float32, bytes)
			for i := range codes {
				codes[i] = float32(rng.IntN(256) - 128)
			}
			scales := make([]float32, n)
			if c.f != kernels.WInt8 {
				scales = make([]float32, n*c.k/c.group)
			}
			for i := range scales {
				scales[i] = float32(rng.Float64())
			}
			data, err := kernels.FromFloat32(be, kernels.I8, codes, n, bytes/n)
			require.NoError(t, err)
			sc, err := kernels.FromFloat32(be, kernels.F32, scales, len(scales))
			require.NoError(t, err)
			w := kernels.QWeight{Format: c.f, Data: data, Scales: sc, Group: c.group}
			got, want := make([]float32, c.k), make([]float32, c.k)
			for row := range n {
				dequantRow(got, w, row, c.k)
				qgemm.Available = false
				dequantRow(want, w, row, c.k)
				qgemm.Available = true
				require.Equal(t, want, got, "row %d", row)
			}
		})
	}
}
