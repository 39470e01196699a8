package zbench

// Statistics for comparing benchmark runs.
//
// golang.org/x/perf/benchmath (what benchstat runs on) already provides the
// distribution-free summary and test that benchmark comparisons should lead
// with: the median with a confidence interval from order statistics, and the
// Mann-Whitney U test. Median and MannWhitneyU below are thin wrappers around
// it, so that numbers printed by zbench agree with benchstat's. What it lacks
// is written here: Welch's t statistic with its degrees of freedom (benchmath
// only exposes the p-value), an effect size (Cohen's d) and Tukey's outlier
// fences.

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"golang.org/x/perf/benchmath"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Sentinel errors of the statistics helpers; every error they return wraps
// one of them, so callers can test with errors.Is.
var (
	// ErrSampleSize: a sample has too few values for the statistic.
	ErrSampleSize = errors.New("sample too small")
	// ErrNoVariance: the statistic divides by a standard deviation that
	// is zero (every value of the samples equal).
	ErrNoVariance = errors.New("zero variance")
	// ErrNotFinite: a sample holds NaN or ±Inf, which no benchmark
	// measurement can legitimately be.
	ErrNotFinite = errors.New("non-finite value")
	// ErrArgument: an argument other than a sample is out of range.
	ErrArgument = errors.New("invalid argument")
)

// DefaultTukeyK is Tukey's multiplier of the interquartile range for the
// "outlier" fences: Q1 − 1.5·IQR and Q3 + 1.5·IQR.
const DefaultTukeyK = 1.5

// checkSample requires x to hold at least min finite values; what names
// the statistic and the sample in the error.
func checkSample(what string, x []float64, min int) error {
	if len(x) < min {
		return fmt.Errorf("stats: %s: need at least %d values, have %d: %w", what, min, len(x), ErrSampleSize)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("stats: %s: value %d is %v: %w", what, i, v, ErrNotFinite)
		}
	}
	return nil
}

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
// because the median itself is still meaningful; an empty x is (it wraps
// ErrSampleSize), and so is a NaN or ±Inf in x (ErrNotFinite) or a level
// outside (0, 1) (ErrArgument). x is not modified.
func Median(x []float64, confidence float64) (benchmath.Summary, error) {
	if err := checkSample("median", x, 1); err != nil {
		return benchmath.Summary{}, err
	}
	if !(confidence > 0 && confidence < 1) {
		return benchmath.Summary{}, fmt.Errorf("stats: median: confidence %v is outside (0, 1): %w", confidence, ErrArgument)
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

// UTest is the result of MannWhitneyU.
type UTest struct {
	// U is the Mann-Whitney statistic of the first sample a: the number
	// of pairs (x from a, y from b) with x > y, a tie counting ½. It runs
	// from 0 to N1·N2, with N1·N2/2 expected when the samples come from
	// the same distribution. (scipy.stats.mannwhitneyu reports the same.)
	U float64
	// Comparison is benchmath's, as benchstat reports it: the two-sided
	// p-value P (exact for small samples, ties included, and from the
	// normal approximation with tie and continuity correction for larger
	// ones), the sample sizes, the alpha level of
	// benchmath.DefaultThresholds (0.05), and warnings: samples too small
	// to ever reach significance, or every value equal (then P is 1).
	//
	// With ties and small samples P is twice the exact probability of a U
	// at most min(U, N1·N2 − U); with ties that distribution is not
	// symmetric, so swapping a and b can change P slightly (0.121 against
	// 0.126 for {1,2,2,3,4} and {2,3,3,5,6,6}). benchstat has the same.
	benchmath.Comparison
}

// MannWhitneyU runs the two-sided Mann-Whitney U test (Wilcoxon rank-sum)
// of the hypothesis that a and b come from the same distribution, against a
// shift in location. It needs no assumption about the distributions, which
// makes it the right default for benchmark timings; the p-value comes from
// benchmath.AssumeNothing.Compare, so it is benchstat's. Empty samples and
// non-finite values are errors. a and b are not modified.
func MannWhitneyU(a, b []float64) (UTest, error) {
	if err := checkSample("Mann-Whitney U: first sample", a, 1); err != nil {
		return UTest{}, err
	}
	if err := checkSample("Mann-Whitney U: second sample", b, 1); err != nil {
		return UTest{}, err
	}
	th := benchmath.DefaultThresholds
	sa := benchmath.NewSample(slices.Clone(a), &th)
	sb := benchmath.NewSample(slices.Clone(b), &th)
	// benchmath does not expose U itself. Counting pairs is its
	// definition, and N1·N2 is small for benchmark samples.
	u := 0.0
	for _, x := range a {
		for _, y := range b {
			switch {
			case x > y:
				u++
			case x == y:
				u += 0.5
			}
		}
	}
	return UTest{U: u, Comparison: benchmath.AssumeNothing.Compare(sa, sb)}, nil
}

// WelchT runs Welch's two-sample t-test of the hypothesis that a and b have
// equal means, without assuming equal variances. It returns the statistic
// t = (mean(a) − mean(b)) / √(s²a/na + s²b/nb) with sample variances s²
// (n−1 denominators), the Welch–Satterthwaite degrees of freedom df (not an
// integer in general) and the two-sided p-value from Student's t
// distribution with df degrees of freedom.
//
// benchmath.AssumeNormal.Compare runs the same test but reports only p.
// The test assumes normal means: prefer MannWhitneyU for raw timings, which
// are skewed and heavy-tailed.
//
// Each sample needs at least 2 values (ErrSampleSize); if both have zero
// variance t is undefined (ErrNoVariance). Non-finite values are errors.
func WelchT(a, b []float64) (t, df, p float64, err error) {
	if err := checkSample("Welch t-test: first sample", a, 2); err != nil {
		return 0, 0, 0, err
	}
	if err := checkSample("Welch t-test: second sample", b, 2); err != nil {
		return 0, 0, 0, err
	}
	ma, va := stat.MeanVariance(a, nil)
	mb, vb := stat.MeanVariance(b, nil)
	na, nb := float64(len(a)), float64(len(b))
	ea, eb := va/na, vb/nb // squared standard errors of the means
	se2 := ea + eb
	if se2 == 0 {
		return 0, 0, 0, fmt.Errorf("stats: Welch t-test: every value of both samples is equal (means %v and %v): %w", ma, mb, ErrNoVariance)
	}
	t = (ma - mb) / math.Sqrt(se2)
	df = se2 * se2 / (ea*ea/(na-1) + eb*eb/(nb-1))
	// Survival, not 1−CDF, keeps the precision of small p-values.
	p = 2 * distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Survival(math.Abs(t))
	return t, df, math.Min(p, 1), nil
}

// CohensD returns Cohen's d, the effect size of the difference of the means
// of a and b in units of their pooled standard deviation:
//
//	d = (mean(a) − mean(b)) / s,  s² = ((na−1)·s²a + (nb−1)·s²b) / (na + nb − 2)
//
// with sample variances s² (n−1 denominators). Its sign is that of
// mean(a) − mean(b); by Cohen's rule of thumb |d| of 0.2 is small, 0.5
// medium and 0.8 large. Unlike a p-value it does not grow with the number
// of runs, so it tells whether a significant difference is also a large one.
//
// Each sample needs at least 2 values (ErrSampleSize); a zero pooled
// standard deviation is an error (ErrNoVariance). Non-finite values are
// errors.
func CohensD(a, b []float64) (float64, error) {
	if err := checkSample("Cohen's d: first sample", a, 2); err != nil {
		return 0, err
	}
	if err := checkSample("Cohen's d: second sample", b, 2); err != nil {
		return 0, err
	}
	ma, va := stat.MeanVariance(a, nil)
	mb, vb := stat.MeanVariance(b, nil)
	na, nb := float64(len(a)), float64(len(b))
	pooled := math.Sqrt(((na-1)*va + (nb-1)*vb) / (na + nb - 2))
	if pooled == 0 {
		return 0, fmt.Errorf("stats: Cohen's d: every value within each sample is equal (means %v and %v): %w", ma, mb, ErrNoVariance)
	}
	return (ma - mb) / pooled, nil
}

// Quartiles returns the first and third quartiles of x by linear
// interpolation between order statistics (Hyndman & Fan type 7: for sorted
// x and q in {¼, ¾}, position h = (n−1)·q, value x[⌊h⌋] + (h−⌊h⌋)·(x[⌊h⌋+1]
// − x[⌊h⌋])). This is the default of R's quantile, numpy.percentile and
// spreadsheets' QUARTILE.INC, so the fences are easy to reproduce. (gonum's
// stat.Quantile offers only types 1 and 4.) x must be non-empty and is not
// modified.
func Quartiles(x []float64) (q1, q3 float64, err error) {
	if err := checkSample("quartiles", x, 1); err != nil {
		return 0, 0, err
	}
	s := slices.Clone(x)
	slices.Sort(s)
	return quantile7(s, 0.25), quantile7(s, 0.75), nil
}

// quantile7 is the type 7 quantile q of sorted, non-empty s.
func quantile7(s []float64, q float64) float64 {
	h := float64(len(s)-1) * q
	i := int(h)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (h-float64(i))*(s[i+1]-s[i])
}

// TukeyFences returns Tukey's fences lo = Q1 − k·IQR and hi = Q3 + k·IQR
// (IQR = Q3 − Q1, quartiles as Quartiles computes them); values outside
// [lo, hi] are outliers. k = 0 means DefaultTukeyK (1.5, Tukey's "outside");
// 3 marks only "far out" values; a negative k is an error (ErrArgument).
//
// x needs at least 4 values (ErrSampleSize): quartiles of fewer are too
// coarse to fence anything (with k = 1.5 no value of a 3-value sample can
// ever lie outside). Non-finite values are errors. x is not modified.
func TukeyFences(x []float64, k float64) (lo, hi float64, err error) {
	if !(k >= 0) || math.IsInf(k, 1) {
		return 0, 0, fmt.Errorf("stats: Tukey fences: k = %v, want a finite k >= 0: %w", k, ErrArgument)
	}
	if k == 0 {
		k = DefaultTukeyK
	}
	if err := checkSample("Tukey fences", x, 4); err != nil {
		return 0, 0, err
	}
	q1, q3, err := Quartiles(x)
	if err != nil {
		return 0, 0, err
	}
	iqr := q3 - q1
	return q1 - k*iqr, q3 + k*iqr, nil
}

// Outliers returns the indices into x, ascending, of the values outside
// TukeyFences(x, DefaultTukeyK), or an empty slice when there are none. A
// benchmark run with outliers was likely disturbed (another process, a
// frequency change, a page-cache miss); they are worth reporting rather
// than silently dropping, since the median is already robust to them.
// Errors are those of TukeyFences.
func Outliers(x []float64) ([]int, error) {
	lo, hi, err := TukeyFences(x, DefaultTukeyK)
	if err != nil {
		return nil, err
	}
	idx := []int{}
	for i, v := range x {
		if v < lo || v > hi {
			idx = append(idx, i)
		}
	}
	return idx, nil
}
