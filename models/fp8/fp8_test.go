package fp8_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/fp8"
)

// TestDelayedScalingWindow follows a history of three steps by hand: the
// largest of the last three amaxes sets the scale of the next step.
func TestDelayedScalingWindow(t *testing.T) {
	m, err := fp8.DelayedScaling{AmaxHistoryLen: 3}.NewMeta(kernels.E4M3)
	require.NoError(t, err)
	assert.Equal(t, float32(1), m.Scale(), "before any step")
	for i, c := range []struct {
		amax, scale float32
		history     []float32
	}{
		{2, 224, []float32{0, 0, 2}},
		{8, 56, []float32{0, 2, 8}},
		{1, 56, []float32{0, 8, 1}},
		{1, 56, []float32{0, 1, 1}}, // 8 is still in the window of three
		{1, 448, []float32{0, 1, 1}},
		{0, 448, []float32{0, 1, 1}},                    // a step with a zero amax changes nothing
		{float32(math.Inf(1)), 448, []float32{0, 0, 0}}, // infinite: the scale is kept while it is in the window
		{float32(math.NaN()), 448, []float32{0, 0, 0}},  // NaN: dropped by fmaxf (the inf still rules)
	} {
		m.Record(c.amax)
		m.Update()
		assert.Equal(t, c.scale, m.Scale(), "step %d", i)
		if !math.IsInf(float64(c.amax), 0) && c.amax == c.amax {
			assert.Equal(t, c.history, m.History(), "step %d", i)
		}
		assert.Equal(t, 1/c.scale, m.ScaleInv())
	}
}

// TestDelayedScalingOptions checks the most-recent algorithm, the margin,
// E5M2's maximum and the refusals.
func TestDelayedScalingOptions(t *testing.T) {
	m, err := fp8.DelayedScaling{AmaxHistoryLen: 4, AmaxComputeAlgo: fp8.AmaxMostRecent, Margin: 1}.NewMeta(kernels.E5M2)
	require.NoError(t, err)
	for _, c := range []struct{ amax, scale float32 }{{4, 57344 / 2 / 4}, {1, 57344 / 2}, {0, 57344 / 2}} {
		m.Record(c.amax)
		m.Update()
		assert.Equal(t, c.scale, m.Scale())
	}
	m, err = fp8.DelayedScaling{}.NewMeta(kernels.E4M3)
	require.NoError(t, err)
	assert.Len(t, m.History(), fp8.DefaultHistoryLen)
	m.Record(1e-44) // the scale overflows float32
	m.Update()
	assert.Equal(t, float32(math.MaxFloat32), m.Scale())

	_, err = fp8.DelayedScaling{}.NewMeta(kernels.BF16)
	assert.ErrorIs(t, err, kernels.ErrDType)
	_, err = fp8.DelayedScaling{AmaxComputeAlgo: "mean"}.NewMeta(kernels.E4M3)
	assert.ErrorContains(t, err, `"mean"`)
	_, err = fp8.DelayedScaling{AmaxHistoryLen: -1}.NewMeta(kernels.E4M3)
	assert.ErrorIs(t, err, kernels.ErrValue)
}

func TestCurrentScale(t *testing.T) {
	assert.Equal(t, float32(448)/3, fp8.CurrentScale(3, kernels.E4M3))
	assert.Equal(t, float32(57344)/3, fp8.CurrentScale(3, kernels.E5M2))
	for _, a := range []float32{0, float32(math.Inf(1)), float32(math.NaN())} {
		assert.Equal(t, float32(1), fp8.CurrentScale(a, kernels.E4M3), "amax %v", a)
	}
	assert.Equal(t, float32(math.MaxFloat32), fp8.CurrentScale(1e-44, kernels.E4M3))
}
