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

// TestAddRowPaths checks the vector addition against Go's float32
// addition bit for bit, at every tail length, with dst aliasing either
// operand, on NaN, infinities and signed zeros.
func TestAddRowPaths(t *testing.T) {
	vecmathPaths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(11, 12))
		special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
			float32(math.NaN()), math.MaxFloat32, 1e-45}
		value := func() float32 {
			if rng.IntN(4) == 0 {
				return special[rng.IntN(len(special))]
			}
			return float32(rng.NormFloat64() * 10)
		}
		for _, n := range append([]int{100, 1000}, func() []int {
			var ns []int
			for n := range 40 {
				ns = append(ns, n)
			}
			return ns
		}()...) {
			a, b := make([]float32, n), make([]float32, n)
			for i := range a {
				a[i], b[i] = value(), value()
			}
			want := make([]float32, n)
			for i := range want {
				want[i] = a[i] + b[i]
			}
			for _, alias := range []string{"none", "a", "b"} {
				x, y := append([]float32(nil), a...), append([]float32(nil), b...)
				dst := make([]float32, n)
				switch alias {
				case "a":
					dst = x
				case "b":
					dst = y
				}
				addRow(dst, x, y)
				for i := range want {
					if math.Float32bits(dst[i]) != math.Float32bits(want[i]) && !(want[i] != want[i] && dst[i] != dst[i]) {
						require.Failf(t, "sum differs", "n=%d, dst=%s: [%d] %v + %v = %v, want %v", n, alias, i, a[i], b[i], dst[i], want[i])
					}
				}
			}
		}
	})
}

// TestQConv2DPathsAgree checks QConv2D on the assembly kernels (VNNI
// products, vector rescale, addition and quantization) against the Go
// loops bit for bit, for every out dtype, with and without a residual.
func TestQConv2DPathsAgree(t *testing.T) {
	if !qgemm.Available || !useVecmath {
		t.Skip("no AVX-512 VNNI on this CPU (or -tags purego): the Go loops are the only path")
	}
	b := New()
	rng := rand.New(rand.NewPCG(13, 14))
	int8s := func(shape ...int) *kernels.Tensor {
		v := make([]float32, kernels.Shape(shape).Len())
		for i := range v {
			v[i] = float32(rng.IntN(255) - 127)
		}
		x, err := kernels.FromFloat32(b, kernels.I8, v, shape...)
		require.NoError(t, err)
		return x
	}
	floats := func(dt kernels.DType, lo, hi float64, shape ...int) *kernels.Tensor {
		v := make([]float32, kernels.Shape(shape).Len())
		for i := range v {
			v[i] = float32(lo + (hi-lo)*rng.Float64())
		}
		x, err := kernels.FromFloat32(b, dt, v, shape...)
		require.NoError(t, err)
		return x
	}
	for _, c := range []struct {
		h, w, ci, co, k, stride, pad int
	}{
		{9, 7, 64, 70, 3, 1, 1},
		{12, 12, 32, 136, 1, 1, 0},
		{11, 13, 3, 64, 7, 2, 3},
	} {
		x := int8s(2, c.h, c.w, c.ci)
		w := int8s(c.co, c.k, c.k, c.ci)
		p := kernels.QConvParams{Stride: [2]int{c.stride, c.stride}, Pad: [2]int{c.pad, c.pad},
			XScale: floats(kernels.F32, 0.002, 0.01, 1), WScale: floats(kernels.F32, 0.002, 0.01, c.co),
			Bias: floats(kernels.F32, -1, 1, c.co), Act: kernels.ActReLU}
		g := p.Conv().Dims(x.Shape(), w.Shape())
		for _, dt := range []kernels.DType{kernels.F32, kernels.BF16, kernels.I8} {
			for _, residual := range []bool{false, true} {
				if residual && dt == kernels.I8 {
					continue
				}
				t.Run(fmt.Sprintf("x=%v/w=%v/out=%v/residual=%v", x.Shape(), w.Shape(), dt, residual), func(t *testing.T) {
					q := p
					q.OutScale = nil
					if dt == kernels.I8 {
						q.OutScale = floats(kernels.F32, 0.05, 0.05, 1)
					}
					var res *kernels.Tensor
					if residual {
						res = floats(dt, -2, 2, g.N, g.Ho, g.Wo, g.Co)
					}
					run := func() []byte {
						out, err := b.Alloc(dt, g.N, g.Ho, g.Wo, g.Co)
						require.NoError(t, err)
						if res != nil {
							require.NoError(t, b.Upload(out, bytesOf(res)[:res.Bytes()]))
							q.Residual = out // in place, as ResNet runs it
						}
						require.NoError(t, b.QConv2D(out, x, w, q))
						return append([]byte(nil), bytesOf(out)[:out.Bytes()]...)
					}
					got := run()
					defer func(q, v bool) { qgemm.Available, useVecmath = q, v }(qgemm.Available, useVecmath)
					qgemm.Available, useVecmath = false, false
					require.Equal(t, run(), got)
				})
			}
		}
	}
}
