package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
)

func TestScheduleFactor(t *testing.T) {
	for _, tc := range []struct {
		s    nn.Schedule
		k    int
		want float64
	}{
		{nn.Schedule{"constant", 0, 10}, 0, 1},
		{nn.Schedule{"constant", 4, 10}, 0, 0}, // transformers' first warm-up update has rate 0
		{nn.Schedule{"constant", 4, 10}, 2, 0.5},
		{nn.Schedule{"constant", 4, 10}, 9, 1},
		{nn.Schedule{"linear", 2, 10}, 1, 0.5},
		{nn.Schedule{"linear", 2, 10}, 6, 0.5},
		{nn.Schedule{"linear", 2, 10}, 12, 0},
		{nn.Schedule{"cosine", 0, 10}, 0, 1},
		{nn.Schedule{"cosine", 2, 10}, 6, 0.5},
		{nn.Schedule{"cosine", 2, 10}, 4, 0.5 * (1 + math.Cos(math.Pi/4))},
		{nn.Schedule{"cosine", 2, 10}, 10, 0},
	} {
		assert.InDelta(t, tc.want, tc.s.Factor(tc.k), 1e-15, "%+v at %d", tc.s, tc.k)
	}
	require.NoError(t, nn.Schedule{"cosine", 1, 5}.Validate())
	assert.ErrorContains(t, nn.Schedule{"step", 0, 5}.Validate(), `"step"`)
	assert.ErrorContains(t, nn.Schedule{"linear", -1, 5}.Validate(), "negative")
}

func TestClipGradNorm(t *testing.T) {
	be := cpuBackend(t)
	params := []nn.Param{{"w", []int{2, 2}}, {"b", []int{2}}}
	s, err := nn.NewTrainState(be, mapSource{"w": {0, 0, 0, 0}, "b": {0, 0}}, params)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Free()) }()
	set := func(name string, v ...float32) {
		g, err := kernels.FromFloat32(be, kernels.F32, v, len(v))
		require.NoError(t, err)
		defer func() { require.NoError(t, be.Free(g)) }()
		dst, err := s.Grads.Get(name).Reshape(len(v))
		require.NoError(t, err)
		require.NoError(t, be.Cast(dst, g))
	}
	set("w", 3, 0, 0, 0)
	set("b", 0, 4)
	norm, err := s.ClipGradNorm(0) // measure only
	require.NoError(t, err)
	assert.InDelta(t, 5, norm, 1e-12)
	norm, err = s.ClipGradNorm(10) // under the bound: unchanged
	require.NoError(t, err)
	assert.InDelta(t, 5, norm, 1e-12)
	norm, err = s.ClipGradNorm(1)
	require.NoError(t, err)
	assert.InDelta(t, 5, norm, 1e-12)
	after, err := s.GradNorm()
	require.NoError(t, err)
	assert.InDelta(t, 1, after, 1e-6, "clipped to max/(norm+1e-6)")
	b, err := kernels.ToFloat32(s.Grads.Get("b"))
	require.NoError(t, err)
	assert.InDelta(t, 0.8, b[1], 1e-6)
}
