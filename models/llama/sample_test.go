package llama

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSamplingValidate(t *testing.T) {
	tests := []struct {
		name string
		p    Sampling
		err  string
	}{
		{"greedy", Sampling{}, ""},
		{"full", Sampling{Temperature: 0.7, TopK: 40, TopP: 0.9, RepetitionPenalty: 1.1, Seed: 3}, ""},
		{"negative temperature", Sampling{Temperature: -1}, "temperature -1"},
		{"NaN temperature", Sampling{Temperature: math.NaN()}, "temperature NaN"},
		{"negative top-k", Sampling{TopK: -1}, "top-k -1"},
		{"top-p above 1", Sampling{TopP: 1.5}, "top-p 1.5"},
		{"negative penalty", Sampling{RepetitionPenalty: -2}, "repetition penalty -2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInput)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

func TestPickGreedy(t *testing.T) {
	s, err := NewSampler(Sampling{})
	require.NoError(t, err)
	assert.Equal(t, 2, s.Pick([]float32{1, 3, 5, 5, -1}, nil), "first of the ties")
	assert.Equal(t, 1, s.Pick([]float32{1, float32(math.NaN()), 5}, nil), "NaN is the largest, as in torch.argmax")
	assert.True(t, Sampling{}.OnDevice())
	assert.False(t, Sampling{RepetitionPenalty: 1.2}.OnDevice())
	assert.True(t, Sampling{RepetitionPenalty: 1}.OnDevice())
}

func TestPickRepetitionPenalty(t *testing.T) {
	s, err := NewSampler(Sampling{RepetitionPenalty: 2})
	require.NoError(t, err)
	// Token 0 (4 → 2) and token 2 (−1 → −2) were seen; 1 wins at 3.
	logits := []float32{4, 3, -1}
	assert.Equal(t, 1, s.Pick(logits, []int{0, 2, 0}))
	assert.Equal(t, []float32{2, 3, -2}, logits, "each seen token penalised once, as transformers' gather/scatter does")
}

// draw returns the frequency of each token over n draws.
func draw(t *testing.T, p Sampling, logits []float32, n int) []float64 {
	t.Helper()
	s, err := NewSampler(p)
	require.NoError(t, err)
	freq := make([]float64, len(logits))
	for range n {
		freq[s.Pick(append([]float32(nil), logits...), nil)] += 1 / float64(n)
	}
	return freq
}

func TestPickDistribution(t *testing.T) {
	logits := []float32{0, float32(math.Log(2)), float32(math.Log(3)), float32(math.Log(4))} // softmax ∝ 1:2:3:4
	const n = 200000
	tol := 4 * math.Sqrt(0.25/n) // four standard deviations at worst

	all := draw(t, Sampling{Temperature: 1, Seed: 1}, logits, n)
	for i, want := range []float64{0.1, 0.2, 0.3, 0.4} {
		assert.InDelta(t, want, all[i], tol, "token %d at temperature 1", i)
	}
	// Temperature 0.5 squares the odds: 1:4:9:16.
	hot := draw(t, Sampling{Temperature: 0.5, Seed: 2}, logits, n)
	for i, w := range []float64{1, 4, 9, 16} {
		assert.InDelta(t, w/30, hot[i], tol, "token %d at temperature 0.5", i)
	}
	// Top-k 2 keeps tokens 3 and 2: 4:3.
	k := draw(t, Sampling{Temperature: 1, TopK: 2, Seed: 3}, logits, n)
	assert.InDelta(t, 4.0/7, k[3], tol)
	assert.InDelta(t, 3.0/7, k[2], tol)
	assert.Zero(t, k[0]+k[1])
	// Top-p 0.6 keeps 0.4 + 0.3 (0.7 ≥ 0.6): the smallest such set.
	p := draw(t, Sampling{Temperature: 1, TopP: 0.6, Seed: 4}, logits, n)
	assert.InDelta(t, 4.0/7, p[3], tol)
	assert.Zero(t, p[0]+p[1])
	// Top-p 0.35 keeps token 3 alone (its 0.4 reaches 0.35).
	one := draw(t, Sampling{Temperature: 1, TopP: 0.35, Seed: 5}, logits, 1000)
	assert.Equal(t, 1.0, math.Round(one[3]*1e9)/1e9)
}

func TestPickSeeded(t *testing.T) {
	logits := make([]float32, 100)
	for i := range logits {
		logits[i] = float32(i%7) * 0.3
	}
	seq := func(seed uint64) []int {
		s, err := NewSampler(Sampling{Temperature: 1, Seed: seed})
		require.NoError(t, err)
		var out []int
		for range 50 {
			out = append(out, s.Pick(append([]float32(nil), logits...), nil))
		}
		return out
	}
	assert.Equal(t, seq(7), seq(7), "same seed, same tokens")
	assert.NotEqual(t, seq(7), seq(8), "another seed, other tokens")
}
