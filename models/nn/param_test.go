package nn_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/synth"
)

func TestParamLen(t *testing.T) {
	for _, tc := range []struct {
		shape []int
		want  int
	}{{nil, 1}, {[]int{3, 0}, 0}, {[]int{7}, 7}, {[]int{2, 3, 4}, 24}} {
		assert.Equal(t, tc.want, nn.Param{Name: "p", Shape: tc.shape}.Len(), "%v", tc.shape)
	}
}

// ranges is a model's synthetic ranges for the tests: norms about 1,
// everything else about 0.
func ranges(name string) (center, half float64) {
	if name == "norm.weight" {
		return 1, 0.1
	}
	return 0, 0.05
}

func TestSynthetic(t *testing.T) {
	params := []nn.Param{{"norm.weight", []int{16}}, {"proj.weight", []int{8, 4}}, {"proj.bias", []int{8}}, {"empty", []int{0, 3}}}
	src := nn.Synthetic(42, ranges)
	for _, p := range params {
		t.Run(p.Name, func(t *testing.T) {
			v, err := src.Values(p)
			require.NoError(t, err)
			require.Len(t, v, p.Len())
			c, h := ranges(p.Name)
			assert.Equal(t, synth.Uniform(42, p.Name, p.Len(), c, h), v, "synth's stream of the name, in the name's range")
			for _, x := range v {
				require.InDelta(t, c, x, h*(1+1e-6))
			}
			again, err := nn.Synthetic(42, ranges).Values(p)
			require.NoError(t, err)
			assert.Equal(t, v, again, "deterministic")
			if p.Len() > 0 {
				other, err := nn.Synthetic(43, ranges).Values(p)
				require.NoError(t, err)
				assert.NotEqual(t, v, other, "the seed matters")
			}
		})
	}
	// A tensor's values do not depend on its shape's split, only on its
	// name and length: a prefix of a longer stream.
	long, err := src.Values(nn.Param{Name: "proj.weight", Shape: []int{64}})
	require.NoError(t, err)
	short, err := src.Values(nn.Param{Name: "proj.weight", Shape: []int{4, 8}})
	require.NoError(t, err)
	assert.Equal(t, long[:32], short)
}
