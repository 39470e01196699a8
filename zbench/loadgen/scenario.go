package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// A Kind is a scenario as MLPerf Inference names it.
type Kind int

const (
	// Offline sends every request at once (at most Concurrency in
	// flight): throughput.
	Offline Kind = iota
	// Server sends requests at Poisson arrivals of Rate a second, open
	// loop (a late response delays no arrival): latency under load,
	// judged against bounds.
	Server
	// SingleStream sends one request at a time: latency alone.
	SingleStream
)

var kindNames = [...]string{Offline: "offline", Server: "server", SingleStream: "singlestream"}

func (k Kind) String() string { return kindNames[k] }

// ErrScenario marks a scenario that cannot run.
var ErrScenario = errors.New("bad scenario")

// ParseKind parses a scenario's name: offline, server or singlestream.
func ParseKind(s string) (Kind, error) {
	for k, name := range kindNames {
		if s == name {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown scenario %q (want offline, server or singlestream)", ErrScenario, s)
}

// A Scenario is how requests are sent.
type Scenario struct {
	Kind Kind
	// Rate is Server's mean arrivals a second.
	Rate float64
	// Requests is how many are sent, the dataset's items in order,
	// again from the first when they run out.
	Requests int
	// MinDuration makes Server send on, past Requests, until its arrivals
	// span at least this long: MLPerf's min_duration beside its
	// min_query_count, so that a run at a rate near the server's capacity
	// lasts long enough for its queue to build.
	MinDuration time.Duration
	// Concurrency bounds Offline's requests in flight (0: all).
	Concurrency int
	// Seed seeds Server's arrival times.
	Seed uint64
}

func (sc Scenario) check() error {
	switch {
	case sc.Requests < 1:
		return fmt.Errorf("%w: %d requests", ErrScenario, sc.Requests)
	case sc.Kind == Server && !(sc.Rate > 0 && sc.Rate <= 1e6):
		return fmt.Errorf("%w: server rate %g requests/s outside (0, 1e6]", ErrScenario, sc.Rate)
	case sc.Concurrency < 0:
		return fmt.Errorf("%w: concurrency %d", ErrScenario, sc.Concurrency)
	case sc.MinDuration < 0:
		return fmt.Errorf("%w: minimum duration %v", ErrScenario, sc.MinDuration)
	}
	return nil
}

// Expected is how many requests sc sends: Requests, or for Server with a
// MinDuration, the arrivals that duration holds on average where they are
// more.
func (sc Scenario) Expected() int {
	if sc.Kind != Server {
		return sc.Requests
	}
	return max(sc.Requests, int(math.Ceil(sc.Rate*sc.MinDuration.Seconds())))
}

// An Outcome is a scenario's results, in the order sent, and the time from
// the first request sent to the last response's end.
type Outcome struct {
	Scenario Scenario
	Results  []Result
	Wall     time.Duration
}

// Run sends sc's requests from items through c, calling progress (when
// not nil) with the responses done so far. A cancelled ctx stops it: the
// requests not yet sent are left out of the outcome, and those in flight
// end with the context's error.
func Run(ctx context.Context, c *Client, items []Item, sc Scenario, progress func(done, total int)) (*Outcome, error) {
	if err := sc.check(); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: no requests to send", ErrDataset)
	}
	total := sc.Expected()
	o := &Outcome{Scenario: sc, Results: make([]Result, total)}
	var (
		mu   sync.Mutex
		done int
		sent = sc.Requests
		wg   sync.WaitGroup
	)
	finish := func(i int, r Result) {
		mu.Lock()
		o.Results[i] = r
		done++
		d := done
		mu.Unlock()
		if progress != nil {
			progress(d, max(total, d))
		}
	}
	start := time.Now()
	switch sc.Kind {
	case SingleStream:
		for i := range sc.Requests {
			if ctx.Err() != nil {
				sent = i
				break
			}
			finish(i, c.Do(ctx, items[i%len(items)]))
		}
	case Offline:
		limit := sc.Concurrency
		if limit == 0 {
			limit = sc.Requests
		}
		slots := make(chan struct{}, limit)
		for i := range sc.Requests {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				sent = i
				break
			}
			wg.Go(func() {
				defer func() { <-slots }()
				finish(i, c.Do(ctx, items[i%len(items)]))
			})
		}
	case Server:
		rng := rand.New(rand.NewPCG(sc.Seed, 0x61727269))
		at := time.Duration(0)
		timer := time.NewTimer(0)
		defer timer.Stop()
		for i := 0; ; i++ {
			if i > 0 {
				at += time.Duration(rng.ExpFloat64() / sc.Rate * float64(time.Second))
			}
			if i >= sc.Requests && at >= sc.MinDuration {
				sent = i
				break
			}
			mu.Lock()
			if i == len(o.Results) {
				o.Results = append(o.Results, Result{})
			}
			mu.Unlock()
			timer.Reset(time.Until(start.Add(at)))
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				sent = i
				break
			}
			wg.Go(func() { finish(i, c.Do(ctx, items[i%len(items)])) })
		}
	}
	wg.Wait()
	o.Wall = time.Since(start)
	o.Results = o.Results[:sent]
	return o, nil
}
