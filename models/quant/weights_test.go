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

func TestQuantizePerChannel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n, k = 24, 40
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32(r.NormFloat64() * math.Exp(float64(i/k-12))) // rows of very different scales
	}
	for c := range k {
		w[7*k+c] = 0 // a row of zeros
	}
	q, scales, err := quant.QuantizePerChannel(w, n, k)
	require.NoError(t, err)
	require.Len(t, q, n*k)
	require.Len(t, scales, n)
	for row := range n {
		amax := refAbsMax(w[row*k : (row+1)*k])
		if amax == 0 {
			assert.Equal(t, float32(1), scales[row], "zero row")
		} else {
			assert.Equal(t, float32(amax)/127, scales[row], "row %d", row)
		}
		s := float64(scales[row])
		seen127 := false
		for c := range k {
			i := row*k + c
			// Against the float64 quotient: the nearest integer (the
			// float32 quotient may move a value within 1e-5 of a midpoint).
			exact := float64(w[i]) / s
			assert.LessOrEqual(t, math.Abs(float64(q[i])-exact), 0.5+1e-5, "w[%d, %d]", row, c)
			assert.NotEqual(t, int8(-128), q[i], "narrow range")
			seen127 = seen127 || q[i] == 127 || q[i] == -127
		}
		assert.Equal(t, amax != 0, seen127, "row %d: its amax maps to ±127", row)
	}

	// Dequantizing gives each value back within half a step.
	fq, err := quant.FakeQuantize(w, scales)
	require.NoError(t, err)
	back := make([]float32, n*k)
	require.NoError(t, quant.Dequantize(back, q, scales))
	assert.Equal(t, fq, back)
	for i := range w {
		assert.InDelta(t, w[i], back[i], float64(scales[i/k])*0.5001)
	}
	e, err := quant.Measure(w, back)
	require.NoError(t, err)
	t.Logf("per-channel int8 of a Gaussian weight: SQNR %.2f dB, rel-L2 %.3g", e.SQNR, e.RelL2)
	assert.Greater(t, e.SQNR, 35.0)
}

func TestQuantizeRounding(t *testing.T) {
	x := []float32{2.5, 3.5, -2.5, -3.5, 0.5, -0.5, 1.5, 126.5, 127.4, 127.6, 300, -300, 0, float32(math.Copysign(0, -1))}
	want := []int8{2, 4, -2, -4, 0, 0, 2, 126, 127, 127, 127, -127, 0, 0}
	q := make([]int8, len(x))
	require.NoError(t, quant.Quantize(q, x, []float32{1}))
	assert.Equal(t, want, q, "ties to even, clamped to ±127")

	// Per row: two rows of 7 with scales 1 and 0.5.
	require.NoError(t, quant.Quantize(q, x, []float32{1, 0.5}))
	assert.Equal(t, []int8{2, 4, -2, -4, 0, 0, 2, 127, 127, 127, 127, -127, 0, 0}, q)
	out := make([]float32, len(x))
	require.NoError(t, quant.Dequantize(out, q, []float32{1, 0.5}))
	assert.Equal(t, float32(63.5), out[7])

	qs, s, err := quant.QuantizePerTensor([]float32{-254, 1, 2, 3})
	require.NoError(t, err)
	assert.Equal(t, float32(2), s)
	assert.Equal(t, []int8{-127, 0, 1, 2}, qs) // 0.5 → 0, 1.5 → 2 (ties to even)
}

func TestQuantizeErrors(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		err  error
		want string
		call func() error
	}{
		{"length", kernels.ErrShape, "Quantize: output of 2 values for an input of 3",
			func() error { return quant.Quantize(make([]int8, 2), make([]float32, 3), []float32{1}) }},
		{"scales", kernels.ErrShape, "Quantize: 2 scales for 3 values",
			func() error { return quant.Quantize(make([]int8, 3), make([]float32, 3), []float32{1, 1}) }},
		{"no scales", kernels.ErrShape, "Dequantize: 0 scales for 3 values",
			func() error { return quant.Dequantize(make([]float32, 3), make([]int8, 3), nil) }},
		{"zero scale", kernels.ErrValue, "Quantize: scale[1] is 0, want positive and finite",
			func() error { return quant.Quantize(make([]int8, 2), make([]float32, 2), []float32{1, 0}) }},
		{"nan scale", kernels.ErrValue, "Dequantize: scale[0] is NaN",
			func() error { return quant.Dequantize(make([]float32, 2), make([]int8, 2), []float32{nan}) }},
		{"nan value", kernels.ErrValue, "Quantize: x[1] is NaN",
			func() error { return quant.Quantize(make([]int8, 2), []float32{1, nan}, []float32{1}) }},
		{"fake inf", kernels.ErrValue, "Quantize: x[0] is +Inf",
			func() error {
				_, err := quant.FakeQuantize([]float32{float32(math.Inf(1))}, []float32{1})
				return err
			}},
		{"per-channel shape", kernels.ErrShape, "QuantizePerChannel: 5 values for a [2 3] weight",
			func() error { _, _, err := quant.QuantizePerChannel(make([]float32, 5), 2, 3); return err }},
		{"per-channel nan", kernels.ErrValue, "QuantizePerChannel: w[1, 2] is NaN",
			func() error { _, _, err := quant.QuantizePerChannel([]float32{1, 2, 3, 4, 5, nan}, 2, 3); return err }},
		{"per-tensor nan", kernels.ErrValue, "QuantizePerTensor: x[2] is -Inf",
			func() error { _, _, err := quant.QuantizePerTensor([]float32{1, 2, float32(math.Inf(-1))}); return err }},
		{"per-tensor empty", quant.ErrNoData, "QuantizePerTensor: no values",
			func() error { _, _, err := quant.QuantizePerTensor(nil); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, tc.err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// Empty input with one scale is fine.
	require.NoError(t, quant.Quantize(nil, nil, []float32{1}))
}
