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

func TestMeasure(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name     string
		ref, got []float32
		want     quant.Errors
	}{
		{"one off", []float32{1, 2, 3, 4}, []float32{1, 2, 3, 5},
			quant.Errors{MSE: 0.25, SQNR: 10 * math.Log10(30), RelL2: 1 / math.Sqrt(30), MaxAbs: 1}},
		{"exact", []float32{1, -2}, []float32{1, -2}, quant.Errors{SQNR: inf}},
		{"zero signal", []float32{0, 0}, []float32{0, 2}, quant.Errors{MSE: 2, SQNR: -inf, RelL2: inf, MaxAbs: 2}},
		{"zeros", []float32{0}, []float32{0}, quant.Errors{SQNR: inf}},
		{"float64 sums", []float32{0x3p64, 0x4p64}, []float32{0x3p64, 0x3p64}, // squares beyond float32
			quant.Errors{MSE: 0x1p127, SQNR: 10 * math.Log10(25), RelL2: 0.2, MaxAbs: 0x1p64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := quant.Measure(tc.ref, tc.got)
			require.NoError(t, err)
			for _, f := range []struct {
				name      string
				want, got float64
			}{{"MSE", tc.want.MSE, e.MSE}, {"SQNR", tc.want.SQNR, e.SQNR}, {"RelL2", tc.want.RelL2, e.RelL2}, {"MaxAbs", tc.want.MaxAbs, e.MaxAbs}} {
				if f.want == f.got {
					continue
				}
				assert.LessOrEqual(t, math.Abs(f.want-f.got), 1e-12*math.Abs(f.want), "%s: want %v, got %v", f.name, f.want, f.got)
			}
			mse, err := quant.MSE(tc.ref, tc.got)
			require.NoError(t, err)
			sqnr, err := quant.SQNR(tc.ref, tc.got)
			require.NoError(t, err)
			rel, err := quant.RelL2(tc.ref, tc.got)
			require.NoError(t, err)
			assert.Equal(t, e, quant.Errors{MSE: mse, SQNR: sqnr, RelL2: rel, MaxAbs: e.MaxAbs})
		})
	}
}

// TestSQNRUniform checks the textbook figure: int8 of a uniform signal
// over the full range has SQNR 10·log10(4·127²) ≈ 48.1 dB.
func TestSQNRUniform(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 100000)
	for i := range x {
		x[i] = float32(2*r.Float64() - 1)
	}
	fq, err := quant.FakeQuantize(x, []float32{quant.Scale(1)})
	require.NoError(t, err)
	sqnr, err := quant.SQNR(x, fq)
	require.NoError(t, err)
	assert.InDelta(t, 10*math.Log10(4*127*127), sqnr, 0.1)
}

func TestMeasureErrors(t *testing.T) {
	_, err := quant.Measure([]float32{1}, []float32{1, 2})
	require.ErrorIs(t, err, kernels.ErrShape)
	assert.Contains(t, err.Error(), "1 reference values, 2 to compare")
	_, err = quant.SQNR(nil, nil)
	require.ErrorIs(t, err, quant.ErrNoData)
	_, err = quant.RelL2([]float32{1, float32(math.NaN())}, []float32{1, 2})
	require.ErrorIs(t, err, kernels.ErrValue)
	assert.Contains(t, err.Error(), "ref[1] is NaN")
	_, err = quant.MSE([]float32{1, 2}, []float32{float32(math.Inf(-1)), 2})
	require.ErrorIs(t, err, kernels.ErrValue)
	assert.Contains(t, err.Error(), "got[0] is -Inf")
}
