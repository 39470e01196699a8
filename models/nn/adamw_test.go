package nn_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
)

func TestTrainState(t *testing.T) {
	be := cpuBackend(t)
	params := []nn.Param{{"w", []int{2, 2}}, {"b", []int{2}}}
	s, err := nn.NewTrainState(be, mapSource{"w": {2, 2, 2, 2}, "b": {2, 2}}, params)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Free()) }()
	assert.Equal(t, params, s.Params)
	assert.Zero(t, s.Steps())
	for _, p := range params {
		g, err := kernels.ToFloat32(s.Grads.Get(p.Name))
		require.NoError(t, err)
		assert.Equal(t, make([]float32, p.Len()), g, "gradients start at zero")
		require.NoError(t, be.Fill(s.Grads.Get(p.Name), 1))
	}
	// The first step with a gradient of 1 moves each value by LR (the
	// bias-corrected moments are 1 and 1), and decays only the matrix:
	// 2 − 0.1·0.5·2 − 0.1 = 1.8, and 2 − 0.1 = 1.9 for the bias.
	require.NoError(t, s.Update(nn.AdamW{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.5}))
	assert.Equal(t, 1, s.Steps())
	for name, want := range map[string]float32{"w": 1.8, "b": 1.9} {
		v, err := kernels.ToFloat32(s.Values.Get(name))
		require.NoError(t, err)
		for _, x := range v {
			assert.InDelta(t, want, x, 1e-6, name)
		}
	}
}

func TestTrainStateErrorsFreeEverything(t *testing.T) {
	be := cpuBackend(t)
	params := []nn.Param{{"w", []int{2, 2}}, {"b", []int{2}}}
	_, err := nn.NewTrainState(be, mapSource{"w": {1, 2, 3, 4}}, params)
	require.Error(t, err)
	assert.ErrorContains(t, err, "b: ")
}

func TestMixedTrainState(t *testing.T) {
	be := cpuBackend(t)
	params := []nn.Param{{"w", []int{2, 2}}, {"b", []int{2}}, {"c", []int{2}}}
	src := mapSource{"w": {2, 2, 2, 2}, "b": {2, 2}, "c": {1.00390625, 3}} // 1 + 2⁻⁸ rounds to 1 in bfloat16
	s, err := nn.NewMixedTrainState(be, src, params, kernels.BF16)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Free()) }()
	for _, p := range params {
		assert.Equal(t, kernels.BF16, s.Values.Get(p.Name).DType(), p.Name)
		assert.Equal(t, kernels.BF16, s.Grads.Get(p.Name).DType(), p.Name)
		assert.Equal(t, kernels.F32, s.Masters.Get(p.Name).DType(), p.Name)
	}
	c, err := kernels.ToFloat32(s.Values.Get("c"))
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 3}, c, "the model reads the masters cast to bfloat16")
	for _, p := range params {
		require.NoError(t, be.Fill(s.Grads.Get(p.Name), 1))
	}
	require.NoError(t, s.Update(nn.AdamW{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.5}))
	for name, want := range map[string][]float32{"w": {1.8, 1.8, 1.8, 1.8}, "b": {1.9, 1.9}, "c": {0.90390625, 2.9}} {
		m, err := kernels.ToFloat32(s.Masters.Get(name))
		require.NoError(t, err)
		assert.InDeltaSlice(t, want, m, 1e-6, "masters of %s, updated in float32", name)
		v, err := kernels.ToFloat32(s.Values.Get(name))
		require.NoError(t, err)
		for i := range v {
			assert.Equal(t, kernels.BF16ToFloat32(kernels.BF16FromFloat32(m[i])), v[i], "%s[%d]: the masters cast after the update", name, i)
		}
	}
}

func TestMixedTrainStateDType(t *testing.T) {
	_, err := nn.NewMixedTrainState(cpuBackend(t), mapSource{}, nil, kernels.I8)
	require.ErrorIs(t, err, kernels.ErrDType)
}
