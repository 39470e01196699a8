package quant_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/quant"
)

// TestQuantizeWeightOnly4 checks the 4-bit formats on Gaussian weights:
// every value within half a step of its group's grid (int4) or of its
// nearest level (nf4), zero and each group's largest magnitude kept, and
// the SQNR of each format in the range the format is known for.
func TestQuantizeWeightOnly4(t *testing.T) {
	const n, k = 16, 256
	rng := rand.New(rand.NewPCG(1, 2))
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.02)
	}
	w[0], w[1] = 0, 0
	cases := []struct {
		f        kernels.WeightFormat
		group    int
		sqnrLow  float64
		sqnrHigh float64
	}{{kernels.WInt4, 128, 15, 22}, {kernels.WNF4, 64, 18, 24}, {kernels.WInt4, 32, 17, 24}}
	for _, c := range cases {
		t.Run(c.f.String(), func(t *testing.T) {
			data, scales, err := quant.QuantizeWeightOnly(c.f, w, n, k, c.group)
			require.NoError(t, err)
			require.Len(t, data, n*k/2)
			require.Len(t, scales, n*k/c.group)
			got, err := quant.DequantizeWeightOnly(c.f, data, scales, n, k, c.group)
			require.NoError(t, err)
			assert.Zero(t, got[0], "zero stays zero")
			for g := range scales {
				var amax, gmax float32
				for i := g * c.group; i < (g+1)*c.group; i++ {
					amax = max(amax, float32(math.Abs(float64(w[i]))))
					gmax = max(gmax, float32(math.Abs(float64(got[i]))))
				}
				assert.InEpsilon(t, amax, gmax, 1e-6, "group %d: the largest magnitude is kept", g)
				for i := g * c.group; i < (g+1)*c.group; i++ {
					step := scales[g] // int4: the grid step; nf4: the widest gap is 0.30·scale
					if c.f == kernels.WNF4 {
						step = 0.31 * scales[g]
					}
					require.LessOrEqual(t, math.Abs(float64(got[i]-w[i])), float64(step)/2+1e-9, "w[%d]", i)
				}
			}
			sqnr, err := quant.SQNR(w, got)
			require.NoError(t, err)
			t.Logf("%v group %d: SQNR %.1f dB", c.f, c.group, sqnr)
			assert.Greater(t, sqnr, c.sqnrLow)
			assert.Less(t, sqnr, c.sqnrHigh)
		})
	}
	_, _, err := quant.QuantizeWeightOnly(kernels.WInt4, w, n, k, 48)
	require.ErrorIs(t, err, kernels.ErrShape)
	w[5] = float32(math.NaN())
	_, _, err = quant.QuantizeWeightOnly(kernels.WNF4, w, n, k, 64)
	require.ErrorIs(t, err, kernels.ErrValue)
	assert.Contains(t, err.Error(), "w[0, 5]")
}
