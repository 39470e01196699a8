package serve

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/nn"
)

// testModel is a small Llama with grouped KV heads and seeded weights.
func testModel(t *testing.T) *llama.Model {
	t.Helper()
	cfg := llama.Config{
		VocabSize: 97, HiddenSize: 48, IntermediateSize: 80, NumHiddenLayers: 2,
		NumAttentionHeads: 6, NumKeyValueHeads: 2, HeadDim: 8, RMSNormEps: 1e-5, RopeTheta: 10000,
		MaxPositionEmbeddings: 64, BOSTokenID: 1, EOSTokenIDs: []int{2},
	}
	m, err := llama.Load(cpu.New(), cfg, llama.Synthetic(5), nn.F32)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m
}

// alone is what Session.Generate makes of r by itself.
func alone(t *testing.T, m *llama.Model, r Request) []int {
	t.Helper()
	s, err := m.NewSession(1, len(r.Prompt)+r.MaxTokens)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	g, err := s.Generate([][]int{r.Prompt}, llama.GenerateOptions{MaxNewTokens: r.MaxTokens, Sampling: r.Sampling, StopAtEOS: !r.IgnoreEOS}, nil)
	require.NoError(t, err)
	out := g.Tokens[0]
	if !r.IgnoreEOS && len(out) > 0 && m.Config.IsEOS(out[len(out)-1]) {
		out = out[:len(out)-1] // the engine does not send the end of sequence
	}
	return out
}

func startEngine(t *testing.T, m *llama.Model, o Options) (*Engine, func()) {
	t.Helper()
	e, err := NewEngine(m, o)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	return e, func() {
		e.Shutdown()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			cancel()
			t.Fatal("the engine did not stop")
		}
		cancel()
		require.NoError(t, e.Close())
	}
}

// collect reads a request's events to its end.
func collect(events <-chan Event) (ids []int, finish string, err error) {
	for ev := range events {
		if ev.Finish != "" {
			return ids, ev.Finish, ev.Err
		}
		ids = append(ids, ev.Token)
	}
	return ids, "", fmt.Errorf("the events ended without a finish")
}

// TestEngineMatchesGenerate sends many requests of different lengths at
// once, greedy and sampled, some stopping at the end of sequence, to an
// engine with a small batch, prompt chunks and a pool too small for all
// of them (so some wait and some are preempted): each generates what
// Session.Generate makes of it alone, token for token.
func TestEngineMatchesGenerate(t *testing.T) {
	m := testModel(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var reqs []Request
	for i := range 12 {
		prompt := make([]int, 1+rng.IntN(20))
		for j := range prompt {
			prompt[j] = 3 + rng.IntN(90)
		}
		r := Request{Prompt: prompt, MaxTokens: 1 + rng.IntN(24), IgnoreEOS: i%3 != 0}
		if i%4 == 1 {
			r.Sampling = llama.Sampling{Temperature: 0.8, TopK: 20, TopP: 0.9, Seed: uint64(i)}
		}
		reqs = append(reqs, r)
	}
	e, stop := startEngine(t, m, Options{MaxBatch: 4, ChunkTokens: 5, Blocks: 16, BlockSize: 4, MaxQueue: 64})
	defer stop()
	got := make([][]int, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		events, err := e.Submit(context.Background(), r)
		require.NoError(t, err)
		wg.Go(func() {
			ids, finish, err := collect(events)
			assert.NoError(t, err)
			assert.Contains(t, []string{"length", "stop"}, finish)
			got[i] = ids
		})
	}
	wg.Wait()
	for i, r := range reqs {
		assert.Equal(t, alone(t, m, r), got[i], "request %d", i)
	}
	snap := e.Stats().Snapshot()
	assert.Positive(t, snap.Preempted, "the pool was short: some sequence was preempted")
	assert.Equal(t, int64(len(reqs)), snap.Finished["length"]+snap.Finished["stop"])
}

// TestEngineCancel checks that a cancelled request ends with "abort" and
// its blocks go back to the pool while others run on. The engine does not
// wait for a request's reader, so on a busy machine it can finish the
// whole request between its first token and the cancel: the request is
// sent again until a cancel lands while it runs.
func TestEngineCancel(t *testing.T) {
	m := testModel(t)
	e, stop := startEngine(t, m, Options{MaxBatch: 4, ChunkTokens: 8, Blocks: 32, BlockSize: 4, MaxQueue: 8})
	defer stop()
	other, err := e.Submit(context.Background(), Request{Prompt: []int{9, 8}, MaxTokens: 20, IgnoreEOS: true})
	require.NoError(t, err)
	const tries = 50
	var ids []int
	var finish string
	for range tries {
		ctx, cancel := context.WithCancel(context.Background())
		long, err := e.Submit(ctx, Request{Prompt: []int{5, 6, 7}, MaxTokens: 60, IgnoreEOS: true})
		require.NoError(t, err)
		<-long // its first token: it runs
		cancel()
		ids, finish, err = collect(long)
		if finish == "length" {
			require.NoError(t, err)
			continue
		}
		assert.ErrorIs(t, err, context.Canceled)
		break
	}
	require.Equal(t, "abort", finish, "no cancel landed in %d tries", tries)
	assert.Less(t, len(ids), 59)
	ids, finish, err = collect(other)
	require.NoError(t, err)
	assert.Equal(t, "length", finish)
	assert.Len(t, ids, 20)
	require.Eventually(t, func() bool {
		s := e.Stats().Snapshot()
		return s.BlocksUsed == 0 && s.Running == 0
	}, 5*time.Second, 10*time.Millisecond)
}

func TestEngineSubmitErrors(t *testing.T) {
	m := testModel(t)
	e, err := NewEngine(m, Options{MaxBatch: 2, ChunkTokens: 8, Blocks: 4, BlockSize: 4, MaxQueue: 1})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	ctx := context.Background()
	for _, c := range []struct {
		r    Request
		want error
		msg  string
	}{
		{Request{MaxTokens: 1}, llama.ErrInput, "a prompt of 0 tokens"},
		{Request{Prompt: []int{1}}, llama.ErrInput, "0 max tokens"},
		{Request{Prompt: make([]int, 60), MaxTokens: 5}, ErrTooLong, "exceed the context of 64"},
		{Request{Prompt: make([]int, 10), MaxTokens: 10}, ErrTooLong, "need 5 KV blocks, the pool has 4"},
		{Request{Prompt: []int{97}, MaxTokens: 1}, llama.ErrInput, "prompt token 0 is 97"},
		{Request{Prompt: []int{3}, MaxTokens: 1, Sampling: llama.Sampling{TopP: 2}}, llama.ErrInput, "top-p 2"},
	} {
		_, err := e.Submit(ctx, c.r)
		assert.ErrorIs(t, err, c.want)
		assert.ErrorContains(t, err, c.msg)
	}
	_, err = e.Submit(ctx, Request{Prompt: []int{3}, MaxTokens: 1})
	require.NoError(t, err)
	_, err = e.Submit(ctx, Request{Prompt: []int{3}, MaxTokens: 1})
	assert.ErrorIs(t, err, ErrQueueFull)
	e.Shutdown()
	_, err = e.Submit(ctx, Request{Prompt: []int{3}, MaxTokens: 1})
	assert.ErrorIs(t, err, ErrStopped)
	require.NoError(t, e.Run(ctx), "Run finishes what was queued, then returns")
}
