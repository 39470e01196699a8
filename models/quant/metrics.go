package quant

import (
	"fmt"
	"math"

	"github.com/zbench/zbench/kernels"
)

// Errors is what quantization did to a tensor: ref the original values,
// got what came back (dequantized, or the output of a quantized model), all
// sums in float64.
type Errors struct {
	// MSE is the mean squared error Σ(ref−got)²/n.
	MSE float64
	// SQNR is the signal-to-quantization-noise ratio in dB,
	// 10·log10(Σref²/Σ(ref−got)²): +Inf when got equals ref, −Inf when
	// ref is all zeros and got is not.
	SQNR float64
	// RelL2 is the relative L2 error ‖ref−got‖/‖ref‖: 0 when got equals
	// ref, +Inf when ref is all zeros and got is not.
	RelL2 float64
	// MaxAbs is the largest |ref−got|.
	MaxAbs float64
}

// Measure returns the errors of got against ref. Different lengths are an
// error wrapping kernels.ErrShape, empty inputs one wrapping ErrNoData,
// and a NaN or infinity in either one wrapping kernels.ErrValue naming it.
func Measure(ref, got []float32) (Errors, error) {
	switch {
	case len(ref) != len(got):
		return Errors{}, fmt.Errorf("quant: error metrics: %d reference values, %d to compare: %w", len(ref), len(got), kernels.ErrShape)
	case len(ref) == 0:
		return Errors{}, fmt.Errorf("quant: error metrics: no values: %w", ErrNoData)
	}
	var signal, noise, maxAbs float64
	for i, r := range ref {
		g := got[i]
		for _, v := range [...]struct {
			name string
			x    float32
		}{{"ref", r}, {"got", g}} {
			if math.IsNaN(float64(v.x)) || math.IsInf(float64(v.x), 0) {
				return Errors{}, fmt.Errorf("quant: error metrics: %s[%d] is %v: %w", v.name, i, v.x, kernels.ErrValue)
			}
		}
		d := float64(r) - float64(g)
		signal += float64(r) * float64(r)
		noise += d * d
		maxAbs = max(maxAbs, math.Abs(d))
	}
	e := Errors{MSE: noise / float64(len(ref)), MaxAbs: maxAbs}
	e.SQNR = math.Inf(1)
	if noise != 0 {
		e.SQNR = 10 * math.Log10(signal/noise) // −Inf for a zero signal
	}
	switch {
	case noise == 0:
		e.RelL2 = 0
	case signal == 0:
		e.RelL2 = math.Inf(1)
	default:
		e.RelL2 = math.Sqrt(noise) / math.Sqrt(signal)
	}
	return e, nil
}

// MSE returns Measure(ref, got).MSE, or its error.
func MSE(ref, got []float32) (float64, error) {
	e, err := Measure(ref, got)
	return e.MSE, err
}

// SQNR returns Measure(ref, got).SQNR in dB, or its error.
func SQNR(ref, got []float32) (float64, error) {
	e, err := Measure(ref, got)
	return e.SQNR, err
}

// RelL2 returns Measure(ref, got).RelL2, or its error.
func RelL2(ref, got []float32) (float64, error) {
	e, err := Measure(ref, got)
	return e.RelL2, err
}
