package cpu_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/internal/golden"
	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/safetensors"
)

// TestFP8MatMulGolden runs the scaled GEMM cases of the FP8 golden
// (testdata/reference/fp8.py: the exact product of the decoded, scaled
// codes plus the bias, rounded once to float32): the float32 sums may
// differ from it by rounding only, within K·2⁻²⁴ of the sum of the terms'
// magnitudes (well below 1e-6 of the output's norm on these cases).
func TestFP8MatMulGolden(t *testing.T) {
	f := golden.Require(t, "fp8", "testdata/reference/fp8.py")
	be := cpu.New()
	cases := f.RequireOp(t, "fp8_gemm")
	require.Len(t, cases, 4)
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			ten := func(role string) safetensors.Tensor {
				x, err := f.Tensor(name + "/" + role)
				require.NoError(t, err)
				return x
			}
			up := func(role string, dt kernels.DType) *kernels.Tensor {
				x := ten(role)
				d, err := be.Alloc(dt, x.Shape...)
				require.NoError(t, err)
				require.NoError(t, be.Upload(d, x.Data))
				return d
			}
			bt := kernels.E4M3
			if strings.Contains(name, "e4m3_e5m2") {
				bt = kernels.E5M2
			}
			a, b := up("a", kernels.E4M3), up("b", bt)
			want := ten("out")
			out, err := be.Alloc(kernels.F32, want.Shape...)
			require.NoError(t, err)
			require.NoError(t, be.FP8MatMul(out, a, b, kernels.FP8MatMulParams{
				AScaleInv: up("a_scale_inv", kernels.F32), BScaleInv: up("b_scale_inv", kernels.F32), Bias: up("bias", kernels.F32)}))
			got, err := kernels.ToFloat32(out)
			require.NoError(t, err)
			w, err := want.Float32()
			require.NoError(t, err)
			rel, _ := kernels.RelErr(widen(got), widen(w))
			t.Logf("rel-err %.3g", rel)
			assert.Less(t, rel, 1e-6)
		})
	}
}

// widen widens float32 values.
func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// BenchmarkCastFP8 times CastFP8 with its amax over a million N(0, 1)
// float32 values into each FP8 format.
func BenchmarkCastFP8(b *testing.B) {
	be := cpu.New()
	const n = 1 << 20
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(math.Sin(float64(i))) * 3
	}
	x, err := kernels.FromFloat32(be, kernels.F32, vals, n)
	require.NoError(b, err)
	scale, err := kernels.FromFloat32(be, kernels.F32, []float32{100}, 1)
	require.NoError(b, err)
	amax, err := be.Alloc(kernels.F32, 1)
	require.NoError(b, err)
	for _, dt := range []kernels.DType{kernels.E4M3, kernels.E5M2} {
		q, err := be.Alloc(dt, n)
		require.NoError(b, err)
		b.Run("dtype="+dt.String(), func(b *testing.B) {
			b.SetBytes(5 * n)
			for b.Loop() {
				if err := be.CastFP8(q, amax, x, scale); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
