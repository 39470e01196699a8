package cpu

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// sweep calls f at n evenly spaced points of [lo, hi].
func sweep(lo, hi float64, n int, f func(x float32)) {
	for i := range n + 1 {
		f(float32(lo + (hi-lo)*float64(i)/float64(n)))
	}
}

// relDiff is |got−want|/|want|, or |got−want| where want is below 1e-30.
func relDiff(got float32, want float64) float64 {
	d := math.Abs(float64(got) - want)
	if math.Abs(want) < 1e-30 {
		return d
	}
	return d / math.Abs(want)
}

// geluTanh64 is the tanh form of GELU in float64, as x·σ(2u) like geluTanh:
// 0.5·x·(1+tanh u) would cancel in float64 too.
func geluTanh64(x float64) float64 { return x * sigmoid64(2*sqrt2OverPi*(x+geluCoef*x*x*x)) }

// sigmoid64 is the logistic function in float64.
func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// TestMathf sweeps each function against float64. Where the result is an
// exponential of a, rounding a to float32 alone costs |a|·2⁻²⁴ of relative
// error, so the tolerances grow in the tails, where the values are tiny.
func TestMathf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lo, hi float64
		got    func(float32) float32
		want   func(float64) float64
		tol    float64
	}{
		{"expf", expMin, expMax, expf, math.Exp, 4e-7},
		{"erfcf", 0, 4, erfcf, math.Erfc, 2e-6},
		{"erfcf tail", 4, 9, erfcf, math.Erfc, 2e-5},
		{"sigmoidf", -80, 80, sigmoidf, sigmoid64, 5e-7},
		{"gelu", -5.6, 12, gelu, func(x float64) float64 { return 0.5 * x * math.Erfc(-x/math.Sqrt2) }, 4e-6},
		{"gelu tail", -12, -5.6, gelu, func(x float64) float64 { return 0.5 * x * math.Erfc(-x/math.Sqrt2) }, 2e-5},
		{"geluTanh", -4, 12, geluTanh, geluTanh64, 2e-6},
		{"geluTanh tail", -12, -4, geluTanh, geluTanh64, 2e-5},
		{"silu", -80, 80, silu, func(x float64) float64 { return x * sigmoid64(x) }, 5e-7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			worst, at := 0.0, float32(0)
			sweep(tc.lo, tc.hi, 1_000_000, func(x float32) {
				if d := relDiff(tc.got(x), tc.want(float64(x))); d > worst {
					worst, at = d, x
				}
			})
			assert.LessOrEqual(t, worst, tc.tol, "worst relative error %.3g at x=%g", worst, at)
		})
	}
	assert.Equal(t, float32(math.Inf(1)), expf(100))
	assert.Zero(t, expf(-100))
	assert.True(t, math.IsNaN(float64(expf(float32(math.NaN())))))
	assert.Equal(t, float32(1), expf(0))
}
