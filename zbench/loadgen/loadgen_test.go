package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/perf/benchfmt"
)

// fakeServer is a test double of an OpenAI completions server: it streams
// max_tokens chunks of text, delay apart (delay·in-flight requests when
// perFlight), and records the requests and the most in flight.
type fakeServer struct {
	delay     time.Duration
	perFlight bool
	noUsage   bool
	mu        sync.Mutex
	bodies    []map[string]any
	inFlight  atomic.Int32
	most      atomic.Int32
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.most.Load()
		if n <= m || f.most.CompareAndSwap(m, n) {
			break
		}
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"malformed JSON: %v","type":"invalid_request_error"}}`, err)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	tokens, _ := body["max_tokens"].(float64)
	if tokens < 1 {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"message":"max_tokens must be at least 1","type":"invalid_request_error"}}`)
		return
	}
	chat := r.URL.Path == "/v1/chat/completions"
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for i := range int(tokens) {
		d := f.delay
		if f.perFlight {
			d *= time.Duration(f.inFlight.Load())
		}
		time.Sleep(d)
		if chat {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"t%d \"}}]}\n\n", i)
		} else {
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"t%d \"}]}\n\n", i)
		}
		fl.Flush()
	}
	if !f.noUsage {
		fmt.Fprintf(w, ": a comment\n\ndata: {\"choices\":[],\"usage\":{\"completion_tokens\":%d}}\n\n", int(tokens))
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func TestClientDo(t *testing.T) {
	for _, chat := range []bool{false, true} {
		t.Run(fmt.Sprintf("chat=%t", chat), func(t *testing.T) {
			f := &fakeServer{delay: 5 * time.Millisecond, noUsage: chat}
			srv := httptest.NewServer(f)
			defer srv.Close()
			c := &Client{BaseURL: srv.URL + "/", Model: "m", Chat: chat}
			r := c.Do(context.Background(), Item{Prompt: "hello", OutputTokens: 4})
			require.NoError(t, r.Err)
			assert.Equal(t, 4, r.OutputTokens)
			assert.Equal(t, "t0 t1 t2 t3 ", r.Text)
			assert.Len(t, r.ITL, 3)
			// The server sleeps 5 ms before each chunk: the first cannot
			// come before 5 ms, nor the end before 20 (a busy client may
			// read the later chunks at once, so nothing bounds the gaps).
			assert.GreaterOrEqual(t, r.TTFT, 5*time.Millisecond)
			assert.GreaterOrEqual(t, r.E2E, 20*time.Millisecond)
			assert.GreaterOrEqual(t, r.E2E, r.TTFT)
			assert.Equal(t, (r.E2E-r.TTFT)/3, r.TPOT())
			body := f.bodies[0]
			assert.Equal(t, "m", body["model"])
			assert.Equal(t, true, body["stream"])
			assert.Equal(t, true, body["ignore_eos"])
			if chat {
				assert.Equal(t, []any{map[string]any{"role": "user", "content": "hello"}}, body["messages"])
			} else {
				assert.Equal(t, "hello", body["prompt"])
			}
		})
	}
}

func TestClientErrors(t *testing.T) {
	for _, c := range []struct {
		name, stream, want string
		status             int
	}{
		{"API error", `{"error":{"message":"prompt too long","type":"invalid_request_error"}}`, "400 Bad Request: prompt too long", 400},
		{"plain error", "overloaded", "503 Service Unavailable: overloaded", 503},
		{"no DONE", "data: {\"choices\":[{\"text\":\"a\"}]}\n\n", "ended without [DONE]", 200},
		{"no text", "data: {\"choices\":[]}\n\ndata: [DONE]\n\n", "no output text", 200},
		{"bad chunk", "data: {\"choices\":[{\"text\":1}]}\n\ndata: [DONE]\n\n", "chunk", 200},
		{"error in stream", "data: {\"error\":{\"message\":\"cancelled\"}}\n\n", "in the stream: cancelled", 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(c.status)
				fmt.Fprint(w, c.stream)
			}))
			defer srv.Close()
			r := (&Client{BaseURL: srv.URL}).Do(context.Background(), Item{Prompt: "p", OutputTokens: 1})
			require.Error(t, r.Err)
			assert.Contains(t, r.Err.Error(), c.want)
			assert.True(t, errors.Is(r.Err, ErrServer) || errors.Is(r.Err, ErrStream), "%v", r.Err)
		})
	}
}

func TestScenarios(t *testing.T) {
	items := []Item{{Prompt: "a", OutputTokens: 2}, {Prompt: "b", OutputTokens: 3}}
	for _, c := range []struct {
		sc       Scenario
		mostMax  int32
		minSpan  time.Duration
		maxStart time.Duration
	}{
		{sc: Scenario{Kind: SingleStream, Requests: 5}, mostMax: 1},
		{sc: Scenario{Kind: Offline, Requests: 6, Concurrency: 2}, mostMax: 2},
		// Sent one after another, the six would start over 6·2·20 ms.
		{sc: Scenario{Kind: Offline, Requests: 6}, mostMax: 6, maxStart: 120 * time.Millisecond},
		// 8 arrivals at 100/s: the last near 70 ms after the first.
		{sc: Scenario{Kind: Server, Requests: 8, Rate: 100, Seed: 3}, mostMax: 8, minSpan: 10 * time.Millisecond},
		// At least 2 requests and arrivals over 300 ms at 100/s: about 30.
		{sc: Scenario{Kind: Server, Requests: 2, Rate: 100, Seed: 4, MinDuration: 300 * time.Millisecond}, mostMax: 40, minSpan: 250 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%v/%d", c.sc.Kind, c.sc.Concurrency), func(t *testing.T) {
			f := &fakeServer{delay: 20 * time.Millisecond}
			srv := httptest.NewServer(f)
			defer srv.Close()
			var calls atomic.Int32
			o, err := Run(context.Background(), &Client{BaseURL: srv.URL}, items, c.sc, func(done, total int) {
				calls.Add(1)
				assert.Equal(t, max(c.sc.Expected(), done), total)
			})
			require.NoError(t, err)
			if c.sc.MinDuration == 0 {
				require.Len(t, o.Results, c.sc.Requests)
			} else {
				// Poisson arrivals: the count is near rate × duration.
				assert.InDelta(t, c.sc.Expected(), len(o.Results), 15)
				assert.Greater(t, len(o.Results), c.sc.Requests)
			}
			assert.Equal(t, int32(len(o.Results)), calls.Load())
			assert.LessOrEqual(t, f.most.Load(), c.mostMax)
			first, last := o.Results[0].Start, o.Results[0].Start
			for i, r := range o.Results {
				require.NoError(t, r.Err)
				assert.Equal(t, items[i%2].OutputTokens, r.OutputTokens, "request %d: items in order, cycled", i)
				first, last = minTime(first, r.Start), maxTime(last, r.Start)
			}
			assert.GreaterOrEqual(t, last.Sub(first), c.minSpan)
			if c.maxStart > 0 {
				assert.Less(t, last.Sub(first), c.maxStart, "offline sends at once")
			}
			if c.sc.Kind == SingleStream {
				for i := 1; i < len(o.Results); i++ {
					assert.False(t, o.Results[i].Start.Before(o.Results[i-1].Start.Add(o.Results[i-1].E2E)), "one at a time")
				}
			}
		})
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func TestRunErrors(t *testing.T) {
	c := &Client{BaseURL: "http://127.0.0.1:1"}
	for _, sc := range []Scenario{{Kind: Server, Requests: 1}, {Kind: Offline}, {Kind: Offline, Requests: 1, Concurrency: -1},
		{Kind: Server, Requests: 1, Rate: 1, MinDuration: -time.Second}} {
		_, err := Run(context.Background(), c, []Item{{Prompt: "a", OutputTokens: 1}}, sc, nil)
		assert.ErrorIs(t, err, ErrScenario, "%+v", sc)
	}
	_, err := Run(context.Background(), c, nil, Scenario{Kind: Offline, Requests: 1}, nil)
	assert.ErrorIs(t, err, ErrDataset)
	_, err = ParseKind("burst")
	assert.ErrorIs(t, err, ErrScenario)
}

// TestRunCancelled checks that a cancelled run stops sending and returns
// what it sent, those in flight ending with the context's error.
func TestRunCancelled(t *testing.T) {
	srv := httptest.NewServer(&fakeServer{delay: 20 * time.Millisecond})
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	o, err := Run(ctx, &Client{BaseURL: srv.URL}, []Item{{Prompt: "a", OutputTokens: 3}}, Scenario{Kind: SingleStream, Requests: 100}, nil)
	require.NoError(t, err)
	assert.Less(t, len(o.Results), 10)
	assert.ErrorIs(t, o.Results[len(o.Results)-1].Err, context.DeadlineExceeded)
}

func TestSummarize(t *testing.T) {
	ms := time.Millisecond
	var rs []Result
	for i := 1; i <= 100; i++ {
		rs = append(rs, Result{TTFT: time.Duration(i) * ms, E2E: time.Duration(i)*ms + 90*ms, OutputTokens: 10,
			ITL: []time.Duration{10 * ms}})
	}
	rs = append(rs, Result{Err: errors.New("refused")})
	o := &Outcome{Scenario: Scenario{Kind: Server, Rate: 50, Requests: 101}, Results: rs, Wall: 2 * time.Second}
	s := Summarize(o, Bounds{TTFT: 80 * ms, TPOT: 20 * ms})
	assert.Equal(t, 100, s.Requests)
	assert.Equal(t, 1, s.Errors)
	assert.Equal(t, "refused", s.FirstError)
	assert.InDelta(t, 50, s.RequestsPerSec, 1e-9)
	assert.InDelta(t, 500, s.OutputTokPerSec, 1e-9)
	assert.InDelta(t, 40, s.GoodputPerSec, 1e-9, "80 of 100 within the TTFT bound, every TPOT (10 ms) within its bound")
	assert.Equal(t, Percentiles{50, 90, 99}, s.TTFT)
	assert.Equal(t, Percentiles{10, 10, 10}, s.TPOT)
	assert.False(t, s.Pass)
	assert.Contains(t, s.Verdict(), "FAIL: 1 errors (first: refused), TTFT p99 over 80ms")

	o.Results = rs[:100]
	s = Summarize(o, Bounds{TTFT: 100 * ms, TPOT: 10 * ms})
	assert.True(t, s.Pass)
	assert.Contains(t, s.Verdict(), "server at 50 req/s: 100 requests in 2.0s")
	assert.Contains(t, s.Verdict(), "PASS (TTFT p99 ≤ 100ms, TPOT p99 ≤ 10ms")

	var b strings.Builder
	b.WriteString(Units)
	require.NoError(t, s.WriteBench(&b, "BenchmarkLoad/scenario=server/rate=50"))
	r := benchfmt.NewReader(strings.NewReader(b.String()), "load.txt")
	var got *benchfmt.Result
	for r.Scan() {
		if res, ok := r.Result().(*benchfmt.Result); ok {
			got = res.Clone()
		}
	}
	require.NoError(t, r.Err())
	require.NotNil(t, got)
	assert.Equal(t, 100, got.Iters)
	v, ok := got.Value("ttft-p99-ms")
	require.True(t, ok)
	assert.Equal(t, 99.0, v)
	v, _ = got.Value("pass")
	assert.Equal(t, 1.0, v)
}

func TestSweep(t *testing.T) {
	// Each chunk waits 50 ms per request in flight: 2 requests a second
	// keep the TTFT bound (one or two in flight, with room for a busy
	// machine's stall), 2000 (all twelve at once, 600 ms) do not.
	srv := httptest.NewServer(&fakeServer{delay: 50 * time.Millisecond, perFlight: true})
	defer srv.Close()
	items := []Item{{Prompt: "a", OutputTokens: 4}}
	sc := Scenario{Requests: 12, Seed: 1}
	sums, best, err := Sweep(context.Background(), &Client{BaseURL: srv.URL}, items, sc, []float64{2, 2000}, Bounds{TTFT: 350 * time.Millisecond}, 1, nil)
	require.NoError(t, err)
	require.Len(t, sums, 3, "two rates, then one bisection")
	assert.True(t, sums[0].Pass)
	assert.False(t, sums[1].Pass)
	assert.Equal(t, 1001.0, sums[2].Scenario.Rate)
	assert.GreaterOrEqual(t, best, 2.0)

	_, _, err = Sweep(context.Background(), &Client{BaseURL: srv.URL}, items, sc, []float64{4, 2}, Bounds{}, 0, nil)
	assert.ErrorIs(t, err, ErrScenario)
}
