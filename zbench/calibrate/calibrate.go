// Package calibrate measures how well zbench's verdicts work on this
// machine, from A/A runs: the same benchmark binary run as both sides of a
// comparison. Every verdict other than "same" on A/A data is false, so
// their rate is observed directly. The samples of each benchmark, pooled,
// are its noise; resampling them with a planted change shows the smallest
// change that a comparison at a given count detects (Mann–Whitney U,
// corrected for the number of benchmarks as compare corrects it), and so
// the count to run.
package calibrate

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"golang.org/x/perf/benchmath"

	"github.com/zbench/zbench/zbench/compare"
	"github.com/zbench/zbench/zbench/results"
)

// Options control an analysis; zero fields take the defaults in comments.
type Options struct {
	// Compare are the options of the comparisons (metric, alpha,
	// threshold).
	Compare compare.Options
	// Power is the probability of detection a change needs to count as
	// detectable: 0.8 by default.
	Power float64
	// Trials is the number of resampled comparisons per change tried:
	// 200 by default.
	Trials int
	// Counts are the counts a recommendation chooses from: 3 5 6 8 10
	// 12 15 20 25 30 by default.
	Counts []int
	// Seed seeds the resampling, so that an analysis is reproducible.
	Seed uint64
}

// A Bench is the calibration of one benchmark.
type Bench struct {
	ID string
	// N is the number of pooled A/A values, Median their median.
	N      int
	Median float64
	// Noise is the robust coefficient of variation of the pooled values:
	// 1.4826·MAD/median (the standard deviation's estimate for normal
	// data, unmoved by outliers).
	Noise float64
	// Detectable is, per count in Options.Counts, the smallest relative
	// change detected with probability Power; +Inf when no change up to
	// 100% is.
	Detectable []float64
	// False counts the rounds in which this benchmark got a verdict
	// other than same.
	False int
}

// A Report is the outcome of Analyze.
type Report struct {
	Options Options
	// Rounds is the number of A/A comparisons, Count the passes per side
	// in each.
	Rounds, Count int
	Benches       []Bench
	// Verdicts counts the verdicts of every benchmark in every round.
	Verdicts map[compare.Verdict]int
	// FalseRate is the share of verdicts other than same.
	FalseRate float64
	// Recommended is the smallest count of Options.Counts at which every
	// benchmark detects a change of the threshold; 0 when none does.
	Recommended int
	// Noisiest lists the benchmarks that keep Recommended from being
	// found, when it is 0.
	Noisiest []string
}

// AtCount returns the index of count in Options.Counts, or −1.
func (r *Report) AtCount(count int) int { return slices.Index(r.Options.Counts, count) }

func (o Options) withDefaults() Options {
	if o.Power == 0 {
		o.Power = 0.8
	}
	if o.Trials == 0 {
		o.Trials = 200
	}
	if len(o.Counts) == 0 {
		o.Counts = []int{3, 5, 6, 8, 10, 12, 15, 20, 25, 30}
	}
	return o
}

// Analyze calibrates from rounds of A/A results: rounds[i] holds the two
// sides of round i, each with count passes. The count of the rounds is
// always one of the counts tried.
func Analyze(rounds [][2]*results.File, count int, opts Options) (*Report, error) {
	if len(rounds) == 0 {
		return nil, errors.New("no A/A rounds to analyse")
	}
	opts = opts.withDefaults()
	if !slices.Contains(opts.Counts, count) {
		opts.Counts = append(opts.Counts, count)
		slices.Sort(opts.Counts)
	}
	rep := &Report{Options: opts, Rounds: len(rounds), Count: count, Verdicts: map[compare.Verdict]int{}}
	index := map[string]int{}
	pooled := map[string][]float64{}
	total := 0
	for i, sides := range rounds {
		res, err := compare.Run(sides[:], opts.Compare)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", i+1, err)
		}
		// compare fills in the defaults of its options.
		opts.Compare, rep.Options.Compare = res.Options, res.Options
		for _, t := range res.Tables {
			for _, row := range t.Rows {
				d := row.Deltas[0]
				if d == nil {
					continue
				}
				k, ok := index[row.ID]
				if !ok {
					k = len(rep.Benches)
					index[row.ID] = k
					rep.Benches = append(rep.Benches, Bench{ID: row.ID})
				}
				rep.Verdicts[d.Verdict]++
				total++
				if d.Verdict != compare.Same {
					rep.Benches[k].False++
				}
				pooled[row.ID] = append(pooled[row.ID], row.Base.Values...)
				pooled[row.ID] = append(pooled[row.ID], d.Values...)
			}
		}
	}
	rep.FalseRate = float64(total-rep.Verdicts[compare.Same]) / float64(total)

	rng := rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15))
	m := len(rep.Benches)
	for k := range rep.Benches {
		b := &rep.Benches[k]
		x := pooled[b.ID]
		b.N, b.Median = len(x), compare.MedianValue(x)
		b.Noise = 1.4826 * mad(x, b.Median) / b.Median
		for _, n := range opts.Counts {
			b.Detectable = append(b.Detectable, detectable(rng, x, n, m, opts))
		}
	}
	for i, n := range opts.Counts {
		ok := true
		for _, b := range rep.Benches {
			ok = ok && b.Detectable[i] <= opts.Compare.Threshold
		}
		if ok {
			rep.Recommended = n
			break
		}
	}
	if rep.Recommended == 0 {
		last := len(opts.Counts) - 1
		for _, b := range rep.Benches {
			if b.Detectable[last] > opts.Compare.Threshold {
				rep.Noisiest = append(rep.Noisiest, b.ID)
			}
		}
	}
	return rep, nil
}

// detectable returns the smallest relative change (to 0.5%, between 0 and
// 100%) that n passes per side detect with probability opts.Power, when m
// benchmarks are compared at once: the change is planted into samples
// drawn from the pooled A/A values x, and a detection is a U test p below
// alpha/m (the bar the smallest p of Holm's procedure must clear).
func detectable(rng *rand.Rand, x []float64, n, m int, opts Options) float64 {
	alpha := opts.Compare.Alpha / float64(m)
	th := benchmath.DefaultThresholds
	th.CompareAlpha = alpha
	// The smallest p a U test of n against n can give: no change is
	// detectable if it cannot clear alpha.
	if 2/binomial(2*n, n) >= alpha {
		return math.Inf(1)
	}
	power := func(delta float64) float64 {
		hits := 0
		a, b := make([]float64, n), make([]float64, n)
		for range opts.Trials {
			for i := range n {
				a[i] = x[rng.IntN(len(x))]
				b[i] = x[rng.IntN(len(x))] * (1 + delta)
			}
			// NewSample sorts a and b in place; they are redrawn next trial.
			sa := benchmath.NewSample(a, &th)
			sb := benchmath.NewSample(b, &th)
			if benchmath.AssumeNothing.Compare(sa, sb).P < alpha {
				hits++
			}
		}
		return float64(hits) / float64(opts.Trials)
	}
	lo, hi := 0.0, 1.0
	if power(hi) < opts.Power {
		return math.Inf(1)
	}
	for hi-lo > 0.005 {
		mid := (lo + hi) / 2
		if power(mid) >= opts.Power {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

func binomial(n, k int) float64 {
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}

func mad(x []float64, med float64) float64 {
	d := make([]float64, len(x))
	for i, v := range x {
		d[i] = math.Abs(v - med)
	}
	return compare.MedianValue(d)
}
