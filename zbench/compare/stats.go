package compare

import (
	"fmt"
	"math"
	"slices"

	"golang.org/x/perf/benchmath"
)

// Median returns the median of x with a distribution-free confidence
// interval at the given level (e.g. 0.95), as benchstat computes it: it is
// benchmath.AssumeNothing.Summary. The interval is bounded by two order
// statistics of x chosen from the binomial distribution of the number of
// values below the population median, so it holds whatever the distribution
// of x; Summary.Confidence is the level actually reached, at least the one
// asked for (order statistics only give discrete levels). benchmath picks
// the narrowest such interval, which need not be symmetric: for 8 values at
// 0.95 it runs from the smallest to the second largest (0.961).
//
// Small samples cannot bound the median at high confidence (at 0.95, a
// finite interval needs at least 6 values): then Lo or Hi is ±Inf and
// Summary.Warnings says how many values are needed. This is not an error,
// because the median itself is still meaningful; an empty x is, and so is
// a NaN or ±Inf in x or a level outside (0, 1). x is not modified.
func Median(x []float64, confidence float64) (benchmath.Summary, error) {
	if len(x) == 0 {
		return benchmath.Summary{}, fmt.Errorf("median: no values")
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return benchmath.Summary{}, fmt.Errorf("median: value %d is %v", i, v)
		}
	}
	if !(confidence > 0 && confidence < 1) {
		return benchmath.Summary{}, fmt.Errorf("median: confidence %v is outside (0, 1)", confidence)
	}
	// NewSample sorts in place: give it a copy.
	s := benchmath.NewSample(slices.Clone(x), &benchmath.DefaultThresholds)
	return benchmath.AssumeNothing.Summary(s, confidence), nil
}

// MedianValue is the sample median of x, the Center of Median's summary;
// NaN when x is empty or holds a non-finite value.
func MedianValue(x []float64) float64 {
	s, err := Median(x, 0.95)
	if err != nil {
		return math.NaN()
	}
	return s.Center
}
