package calibrate

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/zbench/compare"
	"github.com/zbench/zbench/zbench/results"
)

// file makes benchmark output with the given sec/op values per benchmark.
func file(t *testing.T, name string, values map[string][]float64) *results.File {
	t.Helper()
	var b strings.Builder
	for bench, vs := range values {
		for _, v := range vs {
			fmt.Fprintf(&b, "Benchmark%s-2\t100\t%g ns/op\n", bench, v*1e9)
		}
	}
	f, err := results.Parse(strings.NewReader(b.String()), name)
	require.NoError(t, err)
	return f
}

func TestAnalyzeNoiseless(t *testing.T) {
	// Every value equal: any change separates the samples completely, so
	// the smallest change detected is the search's resolution wherever
	// the U test can reach alpha/m at all: 2/C(2n,n) < 0.05/2 needs n >= 5.
	same := func() []float64 { return []float64{1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3} }
	a := file(t, "a", map[string][]float64{"X/dtype=f32": same(), "Y/dtype=f32": same()})
	b := file(t, "b", map[string][]float64{"X/dtype=f32": same(), "Y/dtype=f32": same()})
	rep, err := Analyze([][2]*results.File{{a, b}}, 6, Options{Counts: []int{3, 4, 5, 8}, Trials: 20})
	require.NoError(t, err)
	require.Len(t, rep.Benches, 2)
	assert.Equal(t, 0.0, rep.FalseRate)
	assert.Equal(t, map[compare.Verdict]int{compare.Same: 2}, rep.Verdicts)
	assert.Equal(t, []int{3, 4, 5, 6, 8}, rep.Options.Counts, "the run's own count is added")
	for _, bn := range rep.Benches {
		assert.Equal(t, 12, bn.N)
		assert.Equal(t, 0.0, bn.Noise)
		require.Len(t, bn.Detectable, 5)
		assert.True(t, math.IsInf(bn.Detectable[0], 1), "n=3: smallest p is 0.1")
		assert.True(t, math.IsInf(bn.Detectable[1], 1), "n=4: smallest p is 0.029 > 0.025")
		for _, d := range bn.Detectable[2:] {
			assert.LessOrEqual(t, d, 0.005)
		}
	}
	assert.Equal(t, 5, rep.Recommended)
}

func TestAnalyzeNoisy(t *testing.T) {
	// One benchmark with ±30% noise cannot detect 5% at any count tried;
	// it is named.
	quiet := []float64{1.00, 1.01, 0.99, 1.00, 1.01, 0.99, 1.00, 1.00}
	loud := []float64{1.0, 1.3, 0.7, 1.2, 0.8, 1.4, 0.6, 1.0}
	a := file(t, "a", map[string][]float64{"Quiet": quiet, "Loud": loud})
	b := file(t, "b", map[string][]float64{"Quiet": quiet, "Loud": loud})
	rep, err := Analyze([][2]*results.File{{a, b}}, 8, Options{Counts: []int{8, 10}, Trials: 100, Seed: 7})
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Recommended)
	assert.Equal(t, []string{"Loud-2"}, rep.Noisiest)
	for _, bn := range rep.Benches {
		switch bn.ID {
		case "Quiet-2":
			assert.InDelta(t, 0.0074, bn.Noise, 0.001, "1.4826 x MAD 0.005")
			assert.Less(t, bn.Detectable[0], 0.05)
		case "Loud-2":
			assert.Greater(t, bn.Detectable[1], 0.05)
		}
	}
}

// TestAnalyzeRealAA runs the analysis on real A/A output: the reference
// machine's -short MatMul and Kernels benchmarks, ten passes per side.
func TestAnalyzeRealAA(t *testing.T) {
	a, err := results.Read("../../cmd/zbench/testdata/compare/aa-1.txt")
	require.NoError(t, err)
	b, err := results.Read("../../cmd/zbench/testdata/compare/aa-2.txt")
	require.NoError(t, err)
	rep, err := Analyze([][2]*results.File{{a, b}}, 10, Options{Trials: 50, Counts: []int{5, 10}})
	require.NoError(t, err)
	require.Len(t, rep.Benches, 8)
	assert.Equal(t, 8, rep.Verdicts[compare.Same])
	i := rep.AtCount(10)
	require.GreaterOrEqual(t, i, 0)
	for _, bn := range rep.Benches {
		assert.Equal(t, 20, bn.N)
		assert.Greater(t, bn.Noise, 0.0, bn.ID)
		assert.Less(t, bn.Noise, 0.2, bn.ID)
		assert.Less(t, bn.Detectable[i], 0.5, "%s: a 50%% change is detected at -count 10", bn.ID)
	}
}

func TestAnalyzeNoRounds(t *testing.T) {
	_, err := Analyze(nil, 10, Options{})
	require.ErrorContains(t, err, "no A/A rounds")
}
