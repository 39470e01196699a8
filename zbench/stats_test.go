package zbench

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/perf/benchmath"
)

// Expected values in this file were computed independently of the code
// under test, with Debian's python3-scipy 1.10.1 and numpy 1.24.2
// (/usr/bin/python3), as the comment above each table says. Samples:
var (
	// Welch's first example from Wikipedia ("Welch's t-test", Examples).
	welchA = []float64{27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4}
	welchB = []float64{27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4}
	// Benchmark-like ns/op of a baseline and a faster change.
	oldNs = []float64{101.2, 99.8, 100.5, 102.1, 100.9, 99.5, 101.7, 100.2, 100.8, 101.0}
	newNs = []float64{96.1, 97.4, 95.8, 98.2, 96.9, 97.0, 96.5, 97.8}
	// Tiny, fully separated samples.
	smallA = []float64{1, 2, 3}
	smallB = []float64{4, 5, 9, 10}
	// A sample without variance.
	constA = []float64{5, 5, 5}
	// Samples with ties (exact tie-aware U distribution in benchmath).
	tiesA = []float64{1, 2, 2, 3, 4}
	tiesB = []float64{2, 3, 3, 5, 6, 6}
	// Larger samples (n > 50, 59 tied values): benchmath uses the normal
	// approximation with tie and continuity correction. numpy
	// default_rng(1): round(normal(100, 2, 60), 1) and
	// round(normal(101, 2, 55), 1).
	largeA = []float64{100.7, 101.6, 100.7, 97.4, 101.8, 100.9, 98.9, 101.2, 100.7, 100.6, 100.1, 101.1, 98.5, 99.7, 99.0, 101.2, 100.1, 99.4, 98.4, 99.5, 100.0, 99.4, 102.6, 102.0, 94.6, 96.2, 99.7, 99.2, 100.4, 100.4, 104.2, 97.8, 99.2, 104.1, 101.3, 101.3, 99.0, 96.7, 100.3, 100.2, 97.5, 98.6, 99.9, 98.1, 99.8, 100.2, 100.1, 99.0, 101.2, 101.8, 100.6, 98.4, 101.5, 99.0, 101.8, 97.9, 101.8, 100.0, 97.5, 99.4}
	largeB = []float64{101.1, 101.5, 99.0, 98.8, 101.4, 100.1, 101.5, 102.5, 97.7, 101.5, 103.4, 100.4, 99.4, 102.5, 101.5, 102.8, 100.3, 98.0, 100.8, 100.1, 102.6, 101.4, 97.7, 98.6, 102.8, 102.4, 99.7, 101.0, 101.9, 101.9, 102.8, 101.5, 100.8, 100.5, 103.1, 96.5, 100.7, 101.1, 98.1, 101.7, 99.7, 102.7, 100.7, 102.3, 103.4, 101.8, 99.2, 98.0, 104.5, 100.8, 99.6, 101.3, 100.6, 102.7, 101.1}
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

func TestWelchT(t *testing.T) {
	// scipy.stats.ttest_ind(a, b, equal_var=False) for t and p; df from
	// the Welch–Satterthwaite formula with numpy.var(ddof=1).
	tests := []struct {
		name     string
		a, b     []float64
		t, df, p float64
	}{
		{"wikipedia1", welchA, welchB, -2.455356398286006, 24.988529290231416, 0.021378001462866985},
		{"benchmark", oldNs, newNs, 9.846672415406033, 14.994738879726176, 6.140351304133496e-08},
		{"small", smallA, smallB, -3.162277660168379, 3.8571428571428577, 0.03587827078303991},
		// One sample without variance: df = nb − 1.
		{"one constant", constA, smallB, -1.3587324409735149, 3.0, 0.26736716820732653},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tv, df, p, err := WelchT(tt.a, tt.b)
			require.NoError(t, err)
			closeRel(t, tt.t, tv, 1e-12, "t")
			closeRel(t, tt.df, df, 1e-12, "df")
			closeRel(t, tt.p, p, 1e-9, "p")

			// Swapping the samples flips t and keeps df and p.
			tv2, df2, p2, err := WelchT(tt.b, tt.a)
			require.NoError(t, err)
			closeRel(t, -tt.t, tv2, 1e-12, "swapped t")
			closeRel(t, df, df2, 1e-12, "swapped df")
			closeRel(t, p, p2, 1e-12, "swapped p")

			// benchmath runs the same test (reporting only p).
			th := benchmath.DefaultThresholds
			cmp := benchmath.AssumeNormal.Compare(
				benchmath.NewSample(slices.Clone(tt.a), &th), benchmath.NewSample(slices.Clone(tt.b), &th))
			closeRel(t, cmp.P, p, 1e-6, "p against benchmath.AssumeNormal")
		})
	}
}

func TestCohensD(t *testing.T) {
	// numpy: (mean(a) − mean(b)) / sqrt(((na−1)·var(a, ddof=1) +
	// (nb−1)·var(b, ddof=1)) / (na + nb − 2)).
	tests := []struct {
		name string
		a, b []float64
		d    float64
	}{
		{"wikipedia1", welchA, welchB, -0.8965693907039232},
		{"benchmark", oldNs, newNs, 4.682331963262774},
		{"small", smallA, smallB, -2.1128856368212916},
		{"one constant", constA, smallB, -0.8770580193070292},
		// Hand-derived: means 2 and 4, variances 1 and 1, pooled SD 1.
		{"hand", []float64{1, 2, 3}, []float64{3, 4, 5}, -2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := CohensD(tt.a, tt.b)
			require.NoError(t, err)
			closeRel(t, tt.d, d, 1e-12, "d")
		})
	}
}

func TestMannWhitneyU(t *testing.T) {
	// U: scipy.stats.mannwhitneyu(a, b).statistic (U of the first
	// sample). p: scipy.stats.mannwhitneyu(a, b, alternative="two-sided",
	// method="exact") for samples without ties, and the same value from
	// a brute-force permutation test (2·P(U <= min(U, na·nb − U)) over all
	// C(na+nb, na) splits of the pooled sample, ties counting ½) which
	// also covers the tied case that scipy's exact method does not;
	// method="asymptotic", use_continuity=True for the large samples.
	tests := []struct {
		name string
		a, b []float64
		u, p float64
		// pSwapped is p of MannWhitneyU(b, a). It equals p except
		// with ties in the exact test: the null distribution of U is
		// then not symmetric, and benchmath doubles the tail below
		// min(U, na·nb − U) of the first sample's U (the same
		// permutation computation with the samples swapped gives it).
		pSwapped float64
		warning  bool // too few values to ever reach p < 0.05
	}{
		{"benchmark", oldNs, newNs, 80, 4.570592805886923e-05, 4.570592805886923e-05, false},
		{"small", smallA, smallB, 0, 0.05714285714285714, 0.05714285714285714, false},
		// Hand-derived: U = 0 is the most extreme of C(6,3) = 20
		// equally likely splits, at both tails: p = 2/20.
		{"too small", []float64{1, 2, 3}, []float64{4, 5, 6}, 0, 0.1, 0.1, true},
		{"ties", tiesA, tiesB, 6, 0.12121212121212122, 0.12554112554112554, false},
		{"large", largeA, largeB, 1074.5, 0.0012793301422978486, 0.0012793301422978486, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := slices.Clone(tt.a), slices.Clone(tt.b)
			res, err := MannWhitneyU(a, b)
			require.NoError(t, err)
			assert.Equal(t, tt.a, a, "input a modified")
			assert.Equal(t, tt.b, b, "input b modified")
			assert.Equal(t, tt.u, res.U)
			closeRel(t, tt.p, res.P, 1e-9, "p")
			assert.Equal(t, len(tt.a), res.N1)
			assert.Equal(t, len(tt.b), res.N2)
			assert.Equal(t, 0.05, res.Alpha)
			if tt.warning {
				require.Len(t, res.Warnings, 1)
				assert.Contains(t, res.Warnings[0].Error(), "need >= 4 samples")
			} else {
				assert.Empty(t, res.Warnings)
			}

			// Swapped samples: U of the other sample, same p.
			sw, err := MannWhitneyU(tt.b, tt.a)
			require.NoError(t, err)
			assert.Equal(t, float64(len(tt.a)*len(tt.b))-tt.u, sw.U)
			closeRel(t, tt.pSwapped, sw.P, 1e-9, "swapped p")
		})
	}

	t.Run("all equal", func(t *testing.T) {
		res, err := MannWhitneyU([]float64{3, 3, 3}, []float64{3, 3})
		require.NoError(t, err)
		assert.Equal(t, 3.0, res.U)
		assert.Equal(t, 1.0, res.P)
		require.NotEmpty(t, res.Warnings)
	})
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

func TestTukeyFences(t *testing.T) {
	// numpy.percentile(x, [25, 75]) (default method "linear", Hyndman &
	// Fan type 7), fences q1 − k·(q3−q1) and q3 + k·(q3−q1).
	tests := []struct {
		name     string
		x        []float64
		k        float64
		q1, q3   float64
		lo, hi   float64
		outliers []int // at k = 1.5
	}{
		{"benchmark with a slow run", append(slices.Clone(oldNs), 120), 1.5, 100.35, 101.45, 98.69999999999999, 103.10000000000002, []int{10}},
		{"far out", append(slices.Clone(oldNs), 120), 3, 100.35, 101.45, 97.04999999999997, 104.75000000000003, []int{10}},
		{"default k", append(slices.Clone(oldNs), 120), 0, 100.35, 101.45, 98.69999999999999, 103.10000000000002, []int{10}},
		{"four values", []float64{1, 2, 3, 4}, 1.5, 1.75, 3.25, -0.5, 5.5, []int{}},
		{"both tails", []float64{10.0, 10.2, 9.9, 10.1, 10.0, 13.5, 10.05, 6.0}, 1.5, 9.975, 10.125, 9.75, 10.350000000000001, []int{5, 7}},
		{"both tails k=3", []float64{10.0, 10.2, 9.9, 10.1, 10.0, 13.5, 10.05, 6.0}, 3, 9.975, 10.125, 9.524999999999999, 10.575000000000001, []int{5, 7}},
		{"five values", []float64{1, 2, 3, 4, 100}, 1.5, 2, 4, -1, 7, []int{4}},
		{"five values k=3", []float64{1, 2, 3, 4, 100}, 3, 2, 4, -4, 10, []int{4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := slices.Clone(tt.x)
			q1, q3, err := Quartiles(x)
			require.NoError(t, err)
			closeRel(t, tt.q1, q1, 1e-12, "q1")
			closeRel(t, tt.q3, q3, 1e-12, "q3")

			lo, hi, err := TukeyFences(x, tt.k)
			require.NoError(t, err)
			closeRel(t, tt.lo, lo, 1e-12, "lo")
			closeRel(t, tt.hi, hi, 1e-12, "hi")

			out, err := Outliers(x)
			require.NoError(t, err)
			assert.Equal(t, tt.outliers, out)
			assert.Equal(t, tt.x, x, "input modified")
		})
	}
}

func TestStatsErrors(t *testing.T) {
	one := []float64{1}
	two := []float64{1, 2}
	nan := []float64{1, math.NaN(), 3, 4}
	inf := []float64{1, 2, math.Inf(1), 4}
	tests := []struct {
		name string
		call func() error
		want error
		msg  string
	}{
		{"median empty", func() error { _, err := Median(nil, 0.95); return err }, ErrSampleSize, "need at least 1 values, have 0"},
		{"median NaN", func() error { _, err := Median(nan, 0.95); return err }, ErrNotFinite, "value 1 is NaN"},
		{"median level 1", func() error { _, err := Median(two, 1); return err }, ErrArgument, "confidence 1"},
		{"median level 0", func() error { _, err := Median(two, 0); return err }, ErrArgument, "confidence 0"},
		{"welch n=1", func() error { _, _, _, err := WelchT(one, two); return err }, ErrSampleSize, "Welch t-test: first sample: need at least 2 values, have 1"},
		{"welch second n=1", func() error { _, _, _, err := WelchT(two, one); return err }, ErrSampleSize, "second sample"},
		{"welch Inf", func() error { _, _, _, err := WelchT(inf, two); return err }, ErrNotFinite, "value 2 is +Inf"},
		{"welch no variance", func() error { _, _, _, err := WelchT(constA, []float64{4, 4}); return err }, ErrNoVariance, "every value of both samples is equal"},
		{"cohen n=1", func() error { _, err := CohensD(two, one); return err }, ErrSampleSize, "Cohen's d: second sample"},
		{"cohen no variance", func() error { _, err := CohensD(constA, []float64{4, 4}); return err }, ErrNoVariance, "every value within each sample is equal"},
		{"mwu empty", func() error { _, err := MannWhitneyU(nil, two); return err }, ErrSampleSize, "Mann-Whitney U: first sample"},
		{"mwu NaN", func() error { _, err := MannWhitneyU(two, nan); return err }, ErrNotFinite, "second sample"},
		{"fences n=3", func() error { _, _, err := TukeyFences([]float64{1, 2, 3}, 1.5); return err }, ErrSampleSize, "need at least 4 values, have 3"},
		{"fences k<0", func() error { _, _, err := TukeyFences(oldNs, -1); return err }, ErrArgument, "k = -1"},
		{"fences k NaN", func() error { _, _, err := TukeyFences(oldNs, math.NaN()); return err }, ErrArgument, "k = NaN"},
		{"outliers n=2", func() error { _, err := Outliers(two); return err }, ErrSampleSize, "Tukey fences"},
		{"quartiles empty", func() error { _, _, err := Quartiles(nil); return err }, ErrSampleSize, "quartiles"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			require.Error(t, err)
			assert.True(t, errors.Is(err, tt.want), "%v does not wrap %v", err, tt.want)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}
