package quant_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/quant"
)

// floatOnly is a backend without the int8 ops.
type floatOnly struct{ kernels.Backend }

// TestQuantizeWeight quantizes weights on the CPU backend in every float
// dtype and checks the int8 values and scales against the host's
// per-channel quantization and the report against Measure.
func TestQuantizeWeight(t *testing.T) {
	be := cpu.New()
	r := rand.New(rand.NewPCG(3, 4))
	const n, k = 12, 37
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32(r.NormFloat64() * math.Exp(float64(i/k-6)))
	}
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			wt, err := kernels.FromFloat32(be, dt, w, n, k)
			require.NoError(t, err)
			q, err := be.Alloc(kernels.I8, n, k)
			require.NoError(t, err)
			scale, err := be.Alloc(kernels.F32, n)
			require.NoError(t, err)
			defer func() {
				for _, x := range []*kernels.Tensor{wt, q, scale} {
					require.NoError(t, be.Free(x))
				}
			}()
			rep, err := quant.QuantizeWeight(be, q, scale, wt, "layer.0.proj")
			require.NoError(t, err)

			stored, err := kernels.ToFloat32(wt) // w rounded to dt
			require.NoError(t, err)
			wantQ, wantScale, err := quant.QuantizePerChannel(stored, n, k)
			require.NoError(t, err)
			gotScale, err := kernels.ToFloat32(scale)
			require.NoError(t, err)
			assert.Equal(t, wantScale, gotScale)
			gotQ, err := kernels.ToFloat32(q)
			require.NoError(t, err)
			for i, v := range wantQ {
				require.Equal(t, float32(v), gotQ[i], "q[%d]", i)
			}
			deq := make([]float32, n*k)
			require.NoError(t, quant.Dequantize(deq, wantQ, wantScale))
			want, err := quant.Measure(stored, deq)
			require.NoError(t, err)
			assert.Equal(t, quant.LinearReport{
				Name: "layer.0.proj", WeightMSE: want.MSE, WeightSQNR: want.SQNR,
				Bytes: n*k + 4*n, F32Bytes: 4 * n * k, F16Bytes: 2 * n * k,
			}, rep)
			assert.Greater(t, rep.WeightSQNR, 38.0)
		})
	}
}

func TestQuantizeWeightErrors(t *testing.T) {
	be := cpu.New()
	w, err := kernels.FromFloat32(be, kernels.F32, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	require.NoError(t, err)
	q, err := be.Alloc(kernels.I8, 2, 3)
	require.NoError(t, err)
	scale, err := be.Alloc(kernels.F32, 2)
	require.NoError(t, err)
	flat, err := kernels.FromFloat32(be, kernels.F32, []float32{1, 2, 3, 4, 5, 6}, 6)
	require.NoError(t, err)
	nan, err := kernels.FromFloat32(be, kernels.F32, []float32{1, 2, float32(math.NaN()), 4, 5, 6}, 2, 3)
	require.NoError(t, err)
	badScale, err := be.Alloc(kernels.F32, 3)
	require.NoError(t, err)
	defer func() {
		for _, x := range []*kernels.Tensor{w, q, scale, flat, nan, badScale} {
			require.NoError(t, be.Free(x))
		}
	}()
	for _, tc := range []struct {
		name         string
		be           kernels.Backend
		q, scale, w  *kernels.Tensor
		want, target string
		is           error
	}{
		{"no int8 ops", floatOnly{be}, q, scale, w, "w.0: the cpu backend has no Quant ops (kernels.Quant)", "", kernels.ErrUnsupported},
		{"not a matrix", be, q, scale, flat, "w.0: weight of shape", "", kernels.ErrShape},
		{"scale of the wrong shape", be, q, badScale, w, "w.0: ", "scale", kernels.ErrShape},
		{"NaN", be, q, scale, nan, "w.0: ", "is NaN", kernels.ErrValue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := quant.QuantizeWeight(tc.be, tc.q, tc.scale, tc.w, "w.0")
			require.ErrorIs(t, err, tc.is)
			assert.ErrorContains(t, err, tc.want)
			assert.ErrorContains(t, err, tc.target)
		})
	}
}
