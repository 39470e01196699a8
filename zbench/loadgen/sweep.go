package loadgen

import (
	"context"
	"fmt"
	"slices"
)

// Sweep runs the Server scenario sc at each of rates (ascending) until one
// fails bounds, then bisects between the last rate that passed and the
// first that failed refine times; it returns every run's summary, in the
// order run, and the highest rate that passed (0 if none did). progress,
// when not nil, gets each run's rate and responses done.
func Sweep(ctx context.Context, c *Client, items []Item, sc Scenario, rates []float64, b Bounds, refine int,
	progress func(rate float64, done, total int)) ([]Summary, float64, error) {
	if len(rates) == 0 || !slices.IsSorted(rates) {
		return nil, 0, fmt.Errorf("%w: sweep rates %v: want at least one, ascending", ErrScenario, rates)
	}
	sc.Kind = Server
	var (
		out        []Summary
		pass, fail float64
	)
	run := func(rate float64) (bool, error) {
		sc.Rate = rate
		var p func(int, int)
		if progress != nil {
			p = func(done, total int) { progress(rate, done, total) }
		}
		o, err := Run(ctx, c, items, sc, p)
		if err != nil {
			return false, err
		}
		s := Summarize(o, b)
		out = append(out, s)
		return s.Pass, ctx.Err()
	}
	for _, r := range rates {
		ok, err := run(r)
		if err != nil {
			return out, pass, err
		}
		if !ok {
			fail = r
			break
		}
		pass = r
	}
	for range refine {
		if fail == 0 {
			break
		}
		lo := pass
		if lo == 0 {
			lo = fail / 4
		}
		mid := (lo + fail) / 2
		ok, err := run(mid)
		if err != nil {
			return out, pass, err
		}
		if ok {
			pass = mid
		} else {
			fail = mid
		}
	}
	return out, pass, nil
}
