package llama

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/nn"
)

// greedySession generates n tokens greedily after prompt with a
// Session of one sequence: the reference of the paged cache's tests.
func greedySession(t *testing.T, m *Model, prompt []int, n int) []int {
	t.Helper()
	s, err := m.NewSession(1, len(prompt)+n)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	require.NoError(t, s.Prefill([][]int{prompt}))
	var out []int
	for range n {
		ids, err := s.Greedy()
		require.NoError(t, err)
		out = append(out, ids[0])
		if len(out) < n {
			require.NoError(t, s.Decode(ids))
		}
	}
	return out
}

// TestPagedMatchesSession checks that sequences of different lengths
// that join a running batch at different steps, some with their prompt in
// chunks, in ragged steps beside the running sequences' tokens, generate
// greedily what each generates alone in a Session, and that blocks
// released by a finished sequence serve a new one.
func TestPagedMatchesSession(t *testing.T) {
	cfg := testConfig()
	m := loadTest(t, cfg, nn.F32)
	type req struct {
		prompt    []int
		n, joinAt int
		chunk     int
		want, got []int
		seq       Seq
		prefilled int
		started   bool
	}
	reqs := []*req{
		{prompt: randomIDs(1, 5, cfg.VocabSize), n: 12, joinAt: 0, chunk: 5},
		{prompt: randomIDs(2, 13, cfg.VocabSize), n: 7, joinAt: 2, chunk: 4},
		{prompt: randomIDs(3, 1, cfg.VocabSize), n: 9, joinAt: 3, chunk: 1},
		{prompt: randomIDs(4, 20, cfg.VocabSize), n: 5, joinAt: 9, chunk: 20}, // after the first ends
	}
	for _, r := range reqs {
		r.want = greedySession(t, m, r.prompt, r.n)
	}
	// 15 blocks of 4 positions: not enough for all four at their full
	// lengths (17, 20, 10, 25 positions: 5+5+3+7 blocks), so the last
	// waits for blocks a finished request gives back.
	pc, err := m.NewPagedCache(15, 4, 4)
	require.NoError(t, err)
	defer func() { require.NoError(t, pc.Close()) }()
	next, waited := map[*req]int{}, 0
	for step := 0; ; step++ {
		done := true
		for _, r := range reqs {
			if len(r.got) < r.n {
				done = false
			}
		}
		if done {
			break
		}
		require.Less(t, step, 100)
		// One step: a token of every running request, then a chunk of
		// each request that has joined and not yet run its whole prompt,
		// where the pool keeps a block for each running request's next
		// step.
		var seqs []*Seq
		var toks [][]int
		var in []*req
		free := pc.FreeBlocks()
		for _, r := range reqs {
			if r.started && len(r.got) < r.n {
				seqs, toks, in = append(seqs, &r.seq), append(toks, []int{next[r]}), append(in, r)
				free -= pc.BlocksFor(r.seq.Len()+1) - len(r.seq.blocks)
			}
		}
		running := len(in)
		for _, r := range reqs {
			if step < r.joinAt || r.prefilled == len(r.prompt) {
				continue
			}
			end := min(len(r.prompt), r.prefilled+r.chunk)
			need := pc.BlocksFor(end) - len(r.seq.blocks)
			if need > free-running {
				waited++ // until a finished request gives its blocks back
				continue
			}
			free -= need
			seqs, toks, in = append(seqs, &r.seq), append(toks, r.prompt[r.prefilled:end]), append(in, r)
			r.prefilled = end
		}
		if len(seqs) > 0 {
			require.NoError(t, pc.Step(seqs, toks))
			ids, err := pc.Greedy()
			require.NoError(t, err)
			for i, r := range in {
				if r.started || r.prefilled == len(r.prompt) {
					r.got, next[r] = append(r.got, ids[i]), ids[i]
				}
			}
		}
		for _, r := range reqs {
			if r.prefilled == len(r.prompt) {
				r.started = true
			}
			if len(r.got) == r.n && r.seq.blocks != nil {
				pc.Release(&r.seq)
			}
		}
	}
	for i, r := range reqs {
		assert.Equal(t, r.want, r.got, "request %d", i)
	}
	assert.Equal(t, pc.Blocks(), pc.FreeBlocks(), "every block back in the pool")
	assert.Positive(t, waited, "the last request waited for blocks")
}

func TestPagedErrors(t *testing.T) {
	cfg := testConfig()
	m := loadTest(t, cfg, nn.F32)
	pc, err := m.NewPagedCache(3, 4, 2)
	require.NoError(t, err)
	defer func() { require.NoError(t, pc.Close()) }()
	var a, b Seq
	for _, c := range []struct {
		seqs []*Seq
		toks [][]int
		want string
	}{
		{nil, nil, "a step of 0 sequences"},
		{[]*Seq{&a, &b, {}}, [][]int{{1}, {1}, {1}}, "for at most 2"},
		{[]*Seq{&a, &b}, [][]int{{1}, {}}, "sequence 1 of the step has no new tokens"},
		{[]*Seq{&a, &a}, [][]int{{1}, {1}}, "in the step twice"},
		{[]*Seq{&a}, [][]int{{97}}, "token id 97 at position 0 of sequence 0 is outside the vocabulary"},
		{[]*Seq{&a}, [][]int{make([]int, 65)}, "exceed max_position_embeddings 64"},
	} {
		assert.ErrorContains(t, pc.Step(c.seqs, c.toks), c.want)
		assert.ErrorIs(t, pc.Step(c.seqs, c.toks), ErrInput)
	}
	require.NoError(t, pc.Step([]*Seq{&a}, [][]int{make([]int, 9)})) // 3 blocks
	assert.Equal(t, 0, pc.FreeBlocks())
	err = pc.Step([]*Seq{&b}, [][]int{{5}})
	assert.ErrorIs(t, err, ErrNoBlocks)
	assert.ErrorContains(t, err, "needs 1 more blocks, 0 of 3 are free")
	assert.Equal(t, 0, b.Len(), "nothing done")
	require.NoError(t, pc.Step([]*Seq{&a}, [][]int{{5, 6, 7}}), "within a's last block")
	assert.Equal(t, 12, a.Len())
	pc.Release(&a)
	assert.Equal(t, 3, pc.FreeBlocks())
	require.NoError(t, pc.Step([]*Seq{&b}, [][]int{{5}}))
	_, err = m.NewPagedCache(0, 4, 1)
	assert.ErrorIs(t, err, ErrInput)
}

// TestPagedPromptBuffersBounded prefills prompts of many lengths, as a
// server sees them: the cache keeps the buffers of at most maxPromptSteps
// prompt steps (the set's bytes stop growing), and each prompt still
// generates what it generates alone.
func TestPagedPromptBuffersBounded(t *testing.T) {
	cfg := testConfig()
	m := loadTest(t, cfg, nn.F32)
	pc, err := m.NewPagedCache(64, 4, 2)
	require.NoError(t, err)
	defer func() { require.NoError(t, pc.Close()) }()
	for n := 2; n <= 12; n++ {
		prompt := randomIDs(uint64(n), n, cfg.VocabSize)
		var s Seq
		require.NoError(t, pc.Step([]*Seq{&s}, [][]int{prompt}))
		ids, err := pc.Greedy()
		require.NoError(t, err)
		assert.Equal(t, greedySession(t, m, prompt, 1), ids, "prompt of %d", n)
		pc.Release(&s)
		prompts := 0
		for k := range pc.steps {
			if k.tokens > k.seqs {
				prompts++
			}
		}
		assert.LessOrEqual(t, prompts, maxPromptSteps, "after a prompt of %d", n)
		assert.Contains(t, pc.steps, pagedKey{tokens: n, seqs: 1})
	}
}
