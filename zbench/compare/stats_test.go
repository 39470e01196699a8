package compare

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Expected values in this file were computed independently of the code
// under test, with Debian's python3-scipy 1.10.1 and numpy 1.24.2
// (/usr/bin/python3), as the comment above each table says. Samples:
var (
	// Benchmark-like ns/op of a baseline and a faster change.
	oldNs = []float64{101.2, 99.8, 100.5, 102.1, 100.9, 99.5, 101.7, 100.2, 100.8, 101.0}
	newNs = []float64{96.1, 97.4, 95.8, 98.2, 96.9, 97.0, 96.5, 97.8}
	// Welch's first example from Wikipedia ("Welch's t-test", Examples).
	welchA = []float64{27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4}
)

// closeRel asserts |got − want| <= tol·|want| (or <= tol when want is 0).
func closeRel(t *testing.T, want, got, tol float64, what string) {
	t.Helper()
	if math.IsInf(want, 0) {
		assert.Equal(t, want, got, what)
		return
	}
	scale := math.Max(math.Abs(want), 1e-300)
	if want == 0 {
		scale = 1
	}
	assert.LessOrEqualf(t, math.Abs(got-want), tol*scale, "%s: got %v, want %v", what, got, want)
}

func TestMedian(t *testing.T) {
	// Median: numpy.median. Interval: order statistics [x(l), x(r)]
	// (1-based; x(0) = −Inf, x(n+1) = +Inf) where [l, r) is the run of
	// k = number of values below the population median, k ~
	// Binomial(n, ½), grown from the lower mode by the more probable
	// neighbour (ties to the left) until its mass, scipy.stats.binom.pmf
	// summed, reaches the level; that mass is the confidence. This is
	// how benchmath picks the narrowest interval, which need not be
	// symmetric (8 values at 0.95: x(1) to x(7), while the symmetric
	// x(1)..x(8) would have 0.992).
	tests := []struct {
		name        string
		x           []float64
		level       float64
		med, lo, hi float64
		conf        float64
		warning     bool
	}{
		{"n=10 95%", oldNs, 0.95, 100.85, 99.8, 101.7, 0.978515625, false},
		{"n=10 99%", oldNs, 0.99, 100.85, 99.5, 102.1, 0.998046875, false},
		{"n=8 95% asymmetric", newNs, 0.95, 96.95, 95.8, 97.8, 0.9609375, false},
		{"n=8 99%", newNs, 0.99, 96.95, 95.8, 98.2, 0.9921875, false},
		{"n=15 95%", welchA, 0.95, 21.0, 19.0, 22.6, 0.96484375, false},
		{"n=15 99%", welchA, 0.99, 21.0, 17.9, 23.1, 0.99261474609375, false},
		{"n=7 95%", []float64{7, 1, 3, 5, 9, 11, 2}, 0.95, 5, 1, 11, 0.984375, false},
		// Too few values for a finite interval: ±Inf and a warning.
		{"n=7 99%", []float64{7, 1, 3, 5, 9, 11, 2}, 0.99, 5, math.Inf(-1), 11, 0.9921875, true},
		{"n=5 95%", []float64{3, 1, 2, 5, 4}, 0.95, 3, math.Inf(-1), 5, 0.96875, true},
		{"n=1", []float64{4}, 0.95, 4, math.Inf(-1), math.Inf(1), 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := slices.Clone(tt.x)
			s, err := Median(x, tt.level)
			require.NoError(t, err)
			assert.Equal(t, tt.x, x, "input modified")
			closeRel(t, tt.med, s.Center, 1e-12, "median")
			closeRel(t, tt.lo, s.Lo, 0, "lo")
			closeRel(t, tt.hi, s.Hi, 0, "hi")
			closeRel(t, tt.conf, s.Confidence, 1e-12, "confidence")
			if tt.warning {
				require.NotEmpty(t, s.Warnings)
				assert.Contains(t, s.Warnings[0].Error(), "need >= ")
			} else {
				assert.Empty(t, s.Warnings)
			}
		})
	}
}

func TestMedianErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		x     []float64
		level float64
		msg   string
	}{
		{"empty", nil, 0.95, "no values"},
		{"NaN", []float64{1, math.NaN(), 3, 4}, 0.95, "value 1 is NaN"},
		{"Inf", []float64{1, 2, math.Inf(1), 4}, 0.95, "value 2 is +Inf"},
		{"level 1", []float64{1, 2}, 1, "confidence 1"},
		{"level 0", []float64{1, 2}, 0, "confidence 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Median(tc.x, tc.level)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
			assert.True(t, math.IsNaN(MedianValue(tc.x)) || tc.level != 0.95, "MedianValue of a sample Median refuses")
		})
	}
}
