// Package serve is zbench's LLM server: an engine that runs many
// generations at once over a Llama-family model with continuous batching
// on a paged KV cache (llama.PagedCache), and an HTTP front that speaks the
// OpenAI completions API with streaming, a health check and Prometheus
// metrics.
package serve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zbench/zbench/models/llama"
)

// Errors of Submit.
var (
	// ErrQueueFull marks a request refused because MaxQueue requests are
	// already waiting.
	ErrQueueFull = errors.New("the server's queue is full")
	// ErrTooLong marks a prompt that, with its max tokens, does not fit
	// the model's context or the KV-cache pool.
	ErrTooLong = errors.New("the request does not fit the context")
	// ErrStopped marks a request submitted after the engine stopped.
	ErrStopped = errors.New("the server is shutting down")
)

// Options are the engine's limits and its scheduling policy's knobs.
type Options struct {
	// MaxBatch is the most sequences a step runs: those decoding and
	// those whose prompt it prefills.
	MaxBatch int
	// ChunkTokens is the most prompt tokens a step runs beside the
	// running sequences' tokens: a longer prompt is prefilled in chunks
	// over several steps.
	ChunkTokens int
	// Blocks and BlockSize size the KV-cache pool: Blocks blocks of
	// BlockSize positions.
	Blocks, BlockSize int
	// MaxQueue is the most requests waiting to start; Submit refuses
	// more with ErrQueueFull.
	MaxQueue int
}

// A Request is one generation: its prompt's token ids, how many tokens to
// generate at most, how to choose them, and whether the model's
// end-of-sequence token ends it.
type Request struct {
	Prompt    []int
	MaxTokens int
	Sampling  llama.Sampling
	IgnoreEOS bool
}

// An Event is a generated token, or the end of a request: Finish "length"
// (MaxTokens reached), "stop" (the end-of-sequence token, which is not
// sent), or "abort" (cancelled, or Err).
type Event struct {
	Token  int
	Finish string
	Err    error
}

// seq is a request in the engine.
type seq struct {
	req     Request
	ctx     context.Context
	events  chan Event
	cache   llama.Seq
	tokens  []int // prompt, then generated: what the cache holds (cache.Len() of them) or will
	out     int   // tokens generated
	sampler *llama.Sampler
	arrived time.Time
	first   time.Time
}

// An Engine runs requests with continuous batching, each step one pass
// over the weights (llama.PagedCache.Step): the running sequences' next
// token each, and beside them up to ChunkTokens tokens of the waiting
// prompts, oldest first, each where the pool has the blocks for its
// chunk while leaving one free for each running sequence. A request joins
// the running batch when its prompt is done and leaves it when it
// finishes, is cancelled, or (the pool short of a block for a running
// sequence) is preempted: its blocks are freed and it waits again, its
// generated tokens run again as prompt when it resumes. An Engine's Run
// owns the model.
type Engine struct {
	m      *llama.Model
	pc     *llama.PagedCache
	o      Options
	submit chan *seq
	stop   chan struct{}
	once   sync.Once
	stats  *Stats
	// seqs, toks and in are a step's arguments and its requests, kept
	// between steps.
	seqs []*llama.Seq
	toks [][]int
	in   []*seq
}

// NewEngine makes an engine over m with a pool of o.Blocks blocks.
func NewEngine(m *llama.Model, o Options) (*Engine, error) {
	if o.MaxBatch < 1 || o.ChunkTokens < 1 || o.MaxQueue < 1 {
		return nil, fmt.Errorf("serve: max batch %d, chunk %d and queue %d: want each at least 1", o.MaxBatch, o.ChunkTokens, o.MaxQueue)
	}
	pc, err := m.NewPagedCache(o.Blocks, o.BlockSize, o.MaxBatch)
	if err != nil {
		return nil, err
	}
	return &Engine{m: m, pc: pc, o: o, submit: make(chan *seq, o.MaxQueue), stop: make(chan struct{}),
		stats: newStats(o.Blocks)}, nil
}

// Close frees the KV cache; Run must have returned.
func (e *Engine) Close() error { return e.pc.Close() }

// Stats are the engine's counters for the metrics endpoint.
func (e *Engine) Stats() *Stats { return e.stats }

// Context is the model's context length: prompt and generated tokens.
func (e *Engine) Context() int { return e.m.Config.MaxPositionEmbeddings }

// Submit queues r; its events arrive on the channel returned, which is
// closed after the event that ends it. Cancelling ctx aborts it.
func (e *Engine) Submit(ctx context.Context, r Request) (<-chan Event, error) {
	c := e.m.Config
	switch {
	case len(r.Prompt) == 0 || r.MaxTokens < 1:
		return nil, fmt.Errorf("serve: a prompt of %d tokens and %d max tokens: %w", len(r.Prompt), r.MaxTokens, llama.ErrInput)
	case len(r.Prompt)+r.MaxTokens > c.MaxPositionEmbeddings:
		return nil, fmt.Errorf("serve: a prompt of %d tokens and %d max tokens exceed the context of %d: %w",
			len(r.Prompt), r.MaxTokens, c.MaxPositionEmbeddings, ErrTooLong)
	case e.pc.BlocksFor(len(r.Prompt)+r.MaxTokens) > e.o.Blocks:
		return nil, fmt.Errorf("serve: a prompt of %d tokens and %d max tokens need %d KV blocks, the pool has %d: %w",
			len(r.Prompt), r.MaxTokens, e.pc.BlocksFor(len(r.Prompt)+r.MaxTokens), e.o.Blocks, ErrTooLong)
	}
	for i, id := range r.Prompt {
		if id < 0 || id >= c.VocabSize {
			return nil, fmt.Errorf("serve: prompt token %d is %d, outside the vocabulary [0, %d): %w", i, id, c.VocabSize, llama.ErrInput)
		}
	}
	sampler, err := llama.NewSampler(r.Sampling)
	if err != nil {
		return nil, err
	}
	s := &seq{req: r, ctx: ctx, events: make(chan Event, r.MaxTokens+1), tokens: append(make([]int, 0, len(r.Prompt)+r.MaxTokens), r.Prompt...),
		sampler: sampler, arrived: time.Now()}
	select {
	case <-e.stop:
		return nil, ErrStopped
	default:
	}
	select {
	case e.submit <- s:
		e.stats.queued.Add(1)
		return s.events, nil
	default:
		return nil, ErrQueueFull
	}
}

// Shutdown makes Submit refuse new requests; Run finishes the requests it
// has, then returns.
func (e *Engine) Shutdown() { e.once.Do(func() { close(e.stop) }) }

// Run schedules the requests until Shutdown has been called and every
// request has ended, or ctx is cancelled (the requests left end with
// "abort").
func (e *Engine) Run(ctx context.Context) error {
	var waiting, running []*seq
	defer func() {
		for _, s := range append(waiting, running...) {
			e.finish(s, "abort", ctx.Err())
		}
	}()
	for {
		// Take what has arrived; with nothing to do, wait for it.
		for idle := len(waiting) == 0 && len(running) == 0; ; idle = false {
			var s *seq
			if idle {
				select {
				case s = <-e.submit:
				case <-e.stop:
					select {
					case s = <-e.submit:
					default:
						return nil
					}
				case <-ctx.Done():
					return ctx.Err()
				}
			} else {
				select {
				case s = <-e.submit:
				default:
				}
			}
			if s == nil {
				break
			}
			e.stats.queued.Add(-1)
			waiting = append(waiting, s)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		waiting, running = e.dropCancelled(waiting), e.dropCancelled(running)
		var err error
		if running, waiting, err = e.step(running, waiting); err != nil {
			return err
		}
		e.stats.setLoad(len(waiting)+int(e.stats.queued.Load()), len(running), e.pc.Blocks()-e.pc.FreeBlocks())
	}
}

// dropCancelled ends the sequences whose context is done.
func (e *Engine) dropCancelled(ss []*seq) []*seq {
	kept := ss[:0]
	for _, s := range ss {
		if s.ctx.Err() != nil {
			e.finish(s, "abort", s.ctx.Err())
			continue
		}
		kept = append(kept, s)
	}
	return kept
}

// finish ends s: its blocks back to the pool, its last event sent.
func (e *Engine) finish(s *seq, reason string, err error) {
	e.pc.Release(&s.cache)
	e.stats.finished(reason, s)
	s.events <- Event{Token: -1, Finish: reason, Err: err}
	close(s.events)
}

// step runs one step: a token of each running sequence, preempting the
// newest while the pool lacks a block for the others, and chunks of the
// waiting prompts in their order while the step has room for their
// tokens and sequences and the pool the blocks for them, each leaving
// one free for each running sequence. A prompt done, its request's first
// token is chosen and it joins the running batch.
func (e *Engine) step(running, waiting []*seq) ([]*seq, []*seq, error) {
	free := e.pc.FreeBlocks()
	for len(running) > 0 {
		need := 0
		for _, s := range running {
			if n := s.cache.Len(); e.pc.BlocksFor(n+1) > e.pc.BlocksFor(n) {
				need++
			}
		}
		if need <= free {
			free -= need
			break
		}
		last := running[len(running)-1]
		e.pc.Release(&last.cache)
		free = e.pc.FreeBlocks()
		e.stats.preempted.Add(1)
		running, waiting = running[:len(running)-1], append([]*seq{last}, waiting...)
	}
	seqs, toks, in := e.seqs[:0], e.toks[:0], e.in[:0]
	for _, s := range running {
		n := s.cache.Len()
		seqs, toks, in = append(seqs, &s.cache), append(toks, s.tokens[n:n+1]), append(in, s)
	}
	budget := e.o.ChunkTokens
	for _, s := range waiting {
		if budget == 0 || len(in) >= e.o.MaxBatch {
			break
		}
		start := s.cache.Len()
		end := min(len(s.tokens), start+budget)
		need := e.pc.BlocksFor(end) - e.pc.BlocksFor(start)
		if need > free-len(running) {
			break // until running sequences give blocks back
		}
		free -= need
		budget -= end - start
		seqs, toks, in = append(seqs, &s.cache), append(toks, s.tokens[start:end]), append(in, s)
	}
	e.seqs, e.toks, e.in = seqs, toks, in
	if len(in) == 0 {
		return running, waiting, nil
	}
	if err := e.pc.Step(seqs, toks); err != nil {
		return running, waiting, fmt.Errorf("serve: a step of %d sequences: %w", len(in), err)
	}
	if len(running) > 0 {
		e.stats.step(len(running))
	}
	e.stats.prefilled.Add(int64(e.o.ChunkTokens - budget))
	// The sequences with a token to choose: the running ones, and those
	// whose prompt this step finished, all but maybe the last prompt.
	done := 0
	for _, s := range in[len(running):] {
		if s.cache.Len() == len(s.tokens) {
			done++
		}
	}
	ready := in[:len(running)+done]
	ids, err := e.choose(ready)
	if err != nil {
		return running, waiting, err
	}
	kept := running[:0]
	for i, s := range ready {
		if e.emit(s, ids[i]) {
			kept = append(kept, s)
		}
	}
	return kept, waiting[done:], nil
}

// choose picks the next token of each of ss, the first sequences of the
// last step, from its logits: on the device when every one is greedy,
// else on the host with each sequence's sampler.
func (e *Engine) choose(ss []*seq) ([]int, error) {
	device := true
	for _, s := range ss {
		device = device && s.req.Sampling.OnDevice()
	}
	if device {
		ids, err := e.pc.Greedy()
		if err != nil {
			return nil, err
		}
		return ids[:len(ss)], nil
	}
	logits, err := e.pc.Logits()
	if err != nil {
		return nil, err
	}
	V := e.m.Config.VocabSize
	ids := make([]int, len(ss))
	for i, s := range ss {
		ids[i] = s.sampler.Pick(logits[i*V:(i+1)*V], s.tokens)
	}
	return ids, nil
}

// emit records s's new token and sends it, or ends s at its end of
// sequence or its last token; it reports whether s goes on.
func (e *Engine) emit(s *seq, id int) bool {
	if s.out == 0 {
		s.first = time.Now()
	}
	if !s.req.IgnoreEOS && e.m.Config.IsEOS(id) {
		s.out++
		e.finish(s, "stop", nil)
		return false
	}
	s.tokens = append(s.tokens, id)
	s.out++
	e.stats.generated.Add(1)
	s.events <- Event{Token: id}
	if s.out >= s.req.MaxTokens {
		e.finish(s, "length", nil)
		return false
	}
	return true
}
