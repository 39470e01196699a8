package kernels

import "math"

// Tolerance is the largest relative error ‖out−ref‖/‖ref‖ accepted for a
// result stored in dtype d and compared with a higher-precision reference:
// a few units of d's rounding for the sums of the ops here.
func Tolerance(d DType) float64 {
	switch d {
	case F32:
		return 2e-5
	case F16:
		return 2e-3
	case BF16:
		return 1.6e-2
	}
	return 1e-1
}

// RelErr returns ‖got−want‖₂/‖want‖₂ (‖got−want‖₂ when want is all zeros)
// and the largest absolute difference. A NaN anywhere gives NaN.
func RelErr(got, want []float64) (rel, maxAbs float64) {
	var num, den float64
	for i := range want {
		d := got[i] - want[i]
		num += d * d
		den += want[i] * want[i]
		if a := math.Abs(d); a > maxAbs || a != a {
			maxAbs = a
		}
	}
	if den == 0 {
		return math.Sqrt(num), maxAbs
	}
	return math.Sqrt(num / den), maxAbs
}
