package loadgen

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"
)

// Bounds are the latency bounds of a Server run: the 99th percentiles of
// TTFT and TPOT must not exceed them (0: no bound).
type Bounds struct {
	TTFT, TPOT time.Duration
}

// Percentiles are the 50th, 90th and 99th percentiles of a latency, in
// milliseconds (the empirical quantile: the smallest value at or above
// the fraction).
type Percentiles struct{ P50, P90, P99 float64 }

func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	v := make([]float64, len(ds))
	for i, d := range ds {
		v[i] = float64(d) / 1e6
	}
	slices.Sort(v)
	q := func(p float64) float64 { return stat.Quantile(p, stat.Empirical, v, nil) }
	return Percentiles{q(0.5), q(0.9), q(0.99)}
}

// A Summary is an outcome's figures.
type Summary struct {
	Scenario Scenario
	Bounds   Bounds
	// Requests completed without error, and the errors.
	Requests, Errors int
	// FirstError is the first error's message, if any.
	FirstError string
	Wall       time.Duration
	// RequestsPerSec and OutputTokPerSec count completed requests and
	// their output tokens over the wall time.
	RequestsPerSec, OutputTokPerSec float64
	TTFT, TPOT, ITL, E2E            Percentiles
	// GoodputPerSec is the completed requests whose own TTFT and TPOT
	// are within the bounds, a second.
	GoodputPerSec float64
	// Pass: no errors, and the 99th percentiles within the bounds.
	Pass bool
}

// Summarize computes an outcome's figures against bounds.
func Summarize(o *Outcome, b Bounds) Summary {
	s := Summary{Scenario: o.Scenario, Bounds: b, Wall: o.Wall}
	var ttft, tpot, itl, e2e []time.Duration
	tokens, good := 0, 0
	for _, r := range o.Results {
		if r.Err != nil {
			if s.Errors == 0 {
				s.FirstError = r.Err.Error()
			}
			s.Errors++
			continue
		}
		s.Requests++
		tokens += r.OutputTokens
		ttft, e2e = append(ttft, r.TTFT), append(e2e, r.E2E)
		itl = append(itl, r.ITL...)
		if r.OutputTokens > 1 {
			tpot = append(tpot, r.TPOT())
		}
		if within(r.TTFT, b.TTFT) && within(r.TPOT(), b.TPOT) {
			good++
		}
	}
	if secs := o.Wall.Seconds(); secs > 0 {
		s.RequestsPerSec = float64(s.Requests) / secs
		s.OutputTokPerSec = float64(tokens) / secs
		s.GoodputPerSec = float64(good) / secs
	}
	s.TTFT, s.TPOT, s.ITL, s.E2E = percentiles(ttft), percentiles(tpot), percentiles(itl), percentiles(e2e)
	s.Pass = s.Errors == 0 && s.Requests > 0 &&
		within(time.Duration(s.TTFT.P99*1e6), b.TTFT) && within(time.Duration(s.TPOT.P99*1e6), b.TPOT)
	return s
}

func within(d, bound time.Duration) bool { return bound == 0 || d <= bound }

// Units is the unit lines of the metrics WriteBench writes, for the top of
// a results file (benchstat reads which direction is better from them).
const Units = `Unit req/s better=higher
Unit out-tok/s better=higher
Unit goodput-req/s better=higher
Unit errors better=lower assume=exact
Unit pass better=higher assume=exact
`

// WriteBench writes the summary as one result line of Go's benchmark
// format under name (e.g. BenchmarkLoad/scenario=server/rate=2): the
// completed requests as its iterations, then its figures, the latencies'
// percentiles in milliseconds (ttft-p99-ms, …), and pass (1 or 0).
func (s Summary) WriteBench(w io.Writer, name string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\t%d\t%.4g req/s\t%.4g out-tok/s\t%.4g goodput-req/s", name, s.Requests, s.RequestsPerSec, s.OutputTokPerSec, s.GoodputPerSec)
	for _, l := range []struct {
		name string
		p    Percentiles
	}{{"ttft", s.TTFT}, {"tpot", s.TPOT}, {"itl", s.ITL}, {"e2e", s.E2E}} {
		fmt.Fprintf(&b, "\t%.4g %s-p50-ms\t%.4g %s-p90-ms\t%.4g %s-p99-ms", l.p.P50, l.name, l.p.P90, l.name, l.p.P99, l.name)
	}
	fmt.Fprintf(&b, "\t%d errors\t%d pass\n", s.Errors, boolInt(s.Pass))
	_, err := io.WriteString(w, b.String())
	return err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Verdict is a line for people: the scenario, its throughput and
// latencies, and against the bounds, PASS or FAIL with the reason.
func (s Summary) Verdict() string {
	var b strings.Builder
	sc := s.Scenario
	fmt.Fprintf(&b, "%s", sc.Kind)
	if sc.Kind == Server {
		fmt.Fprintf(&b, " at %g req/s", sc.Rate)
	}
	fmt.Fprintf(&b, ": %d requests in %.1fs, %.3g req/s, %.4g output tok/s; TTFT p99 %.0f ms, TPOT p99 %.1f ms",
		s.Requests, s.Wall.Seconds(), s.RequestsPerSec, s.OutputTokPerSec, s.TTFT.P99, s.TPOT.P99)
	var why []string
	if s.Errors > 0 {
		why = append(why, fmt.Sprintf("%d errors (first: %s)", s.Errors, s.FirstError))
	}
	if s.Requests == 0 {
		why = append(why, "no request completed")
	}
	if !within(time.Duration(s.TTFT.P99*1e6), s.Bounds.TTFT) {
		why = append(why, fmt.Sprintf("TTFT p99 over %v", s.Bounds.TTFT))
	}
	if !within(time.Duration(s.TPOT.P99*1e6), s.Bounds.TPOT) {
		why = append(why, fmt.Sprintf("TPOT p99 over %v", s.Bounds.TPOT))
	}
	if len(why) == 0 {
		fmt.Fprintf(&b, "; PASS")
		if s.Bounds != (Bounds{}) {
			fmt.Fprintf(&b, " (TTFT p99 ≤ %v, TPOT p99 ≤ %v; goodput %.3g req/s)", s.Bounds.TTFT, s.Bounds.TPOT, s.GoodputPerSec)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "; FAIL: %s", strings.Join(why, ", "))
	return b.String()
}
