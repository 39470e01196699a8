package llama

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
)

// ErrNoBlocks marks a step that needs more KV-cache blocks than the pool
// has free: nothing of the step is done, and the caller may wait for
// sequences to finish.
var ErrNoBlocks = errors.New("no free KV-cache blocks")

// A PagedCache is the KV cache of continuous batching: per layer, key and
// value pools [blocks, kv heads, block size, head dim] in the model's
// dtype, preallocated, whose blocks sequences take as they grow and give
// back when they end, each sequence's blocks listed in its own table
// (kernels.PagedKV). A step runs any set of sequences, each with its own
// number of new tokens, in one pass: the decode token of every running
// sequence beside chunks of new prompts. A PagedCache is used by one
// goroutine at a time.
type PagedCache struct {
	m               *Model
	pk              kernels.PagedKV
	blockSize       int
	maxBlocks       int // per sequence: max_position_embeddings in blocks
	k, v            []*kernels.Tensor
	free            []int32
	set             *nn.TensorSet
	steps           map[pagedKey]*pagedStep
	last            *pagedStep
	clock           int64 // counts steps, for the buffers' last use
	quantized       int
	maxBatch, total int
}

// maxPromptSteps is how many steps' buffers with more tokens than
// sequences (prompt chunks, whose lengths vary from step to step) a
// PagedCache keeps; the least recently used beyond them are freed.
const maxPromptSteps = 4

// pagedKey identifies a paged step's buffers: its tokens and sequences.
type pagedKey struct{ tokens, seqs int }

// pagedStep is a step's buffers, one row per token, and each token's
// copy of its sequence's block table [tokens, M], in a set of their own.
type pagedStep struct {
	*step
	table, logits, next *kernels.Tensor
	set                 *nn.TensorSet
	used                int64 // the clock at its last use
}

// A Seq is one sequence of a PagedCache: the blocks it holds and the
// tokens cached in them.
type Seq struct {
	blocks []int32
	n      int
}

// Len is the number of tokens cached.
func (s *Seq) Len() int { return s.n }

// NewPagedCache allocates a pool of blocks blocks of blockSize positions
// for steps of up to maxBatch sequences. The backend must have the
// PagedKV op group.
func (m *Model) NewPagedCache(blocks, blockSize, maxBatch int) (*PagedCache, error) {
	pk, err := kernels.Group[kernels.PagedKV](m.be)
	if err != nil {
		return nil, fmt.Errorf("llama: paged KV cache: %w", err)
	}
	if blocks < 1 || blockSize < 1 || maxBatch < 1 {
		return nil, fmt.Errorf("llama: paged KV cache of %d blocks of %d positions for %d sequences: %w", blocks, blockSize, maxBatch, ErrInput)
	}
	c := m.Config
	pc := &PagedCache{m: m, pk: pk, blockSize: blockSize, maxBlocks: (c.MaxPositionEmbeddings + blockSize - 1) / blockSize,
		set: nn.NewTensorSet(m.be), steps: map[pagedKey]*pagedStep{}, quantized: m.quantized, maxBatch: maxBatch, total: blocks}
	a := nn.Allocator{Set: pc.set}
	dt := m.Precision.DType()
	for range c.NumHiddenLayers {
		pc.k = append(pc.k, a.Tensor(dt, blocks, c.NumKeyValueHeads, blockSize, c.HeadDim))
		pc.v = append(pc.v, a.Tensor(dt, blocks, c.NumKeyValueHeads, blockSize, c.HeadDim))
	}
	if err := a.Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("llama: paged KV cache: %w", err), pc.set.Free())
	}
	for b := blocks - 1; b >= 0; b-- {
		pc.free = append(pc.free, int32(b))
	}
	return pc, nil
}

// Blocks is the pool's size in blocks, and FreeBlocks those no sequence
// holds.
func (pc *PagedCache) Blocks() int     { return pc.total }
func (pc *PagedCache) FreeBlocks() int { return len(pc.free) }

// BlocksFor is the blocks a sequence of n tokens holds.
func (pc *PagedCache) BlocksFor(n int) int { return (n + pc.blockSize - 1) / pc.blockSize }

// Release gives s's blocks back to the pool and empties it.
func (pc *PagedCache) Release(s *Seq) {
	pc.free = append(pc.free, s.blocks...)
	s.blocks, s.n = nil, 0
}

// Close frees the pools and buffers.
func (pc *PagedCache) Close() error {
	errs := []error{pc.set.Free()}
	for _, st := range pc.steps {
		errs = append(errs, st.set.Free())
	}
	return errors.Join(errs...)
}

// Step runs the new tokens of each sequence of seqs (tokens[i] for
// seqs[i], at least one each; a sequence at most once) after the tokens
// each has cached, all in one pass over the weights, taking the blocks
// they need from the pool (ErrNoBlocks, and nothing done, when it has too
// few), and leaves the logits of each sequence's last new token for
// Logits and Greedy. Each token is a row of the pass: it is written to
// its sequence's blocks and attends through that sequence's table to
// the keys up to its own position.
func (pc *PagedCache) Step(seqs []*Seq, tokens [][]int) error {
	R, c := len(seqs), pc.m.Config
	if R == 0 || R > pc.maxBatch || len(tokens) != R {
		return fmt.Errorf("llama: a step of %d sequences and %d token lists, for at most %d: %w", R, len(tokens), pc.maxBatch, ErrInput)
	}
	if pc.quantized != pc.m.quantized {
		return fmt.Errorf("llama: the model was quantized after the cache was made: make a new one: %w", ErrInput)
	}
	need, N := 0, 0
	seen := map[*Seq]bool{}
	for i, s := range seqs {
		S := len(tokens[i])
		switch {
		case S == 0:
			return fmt.Errorf("llama: sequence %d of the step has no new tokens: %w", i, ErrInput)
		case seen[s]:
			return fmt.Errorf("llama: sequence %d is in the step twice: %w", i, ErrInput)
		case s.n+S > c.MaxPositionEmbeddings:
			return fmt.Errorf("llama: sequence %d: %d cached and %d new tokens exceed max_position_embeddings %d: %w",
				i, s.n, S, c.MaxPositionEmbeddings, ErrInput)
		}
		seen[s] = true
		for j, id := range tokens[i] {
			if err := c.checkToken(id, j, i); err != nil {
				return err
			}
		}
		need += max(0, pc.BlocksFor(s.n+S)-len(s.blocks))
		N += S
	}
	if need > len(pc.free) {
		return fmt.Errorf("llama: the step needs %d more blocks, %d of %d are free: %w", need, len(pc.free), pc.total, ErrNoBlocks)
	}
	st, err := pc.stepFor(N, R)
	if err != nil {
		return err
	}
	M := pc.maxBlocks
	ids, pos, lens := make([]int32, N), make([]int32, N), make([]int32, N)
	last, table := make([]int32, R), make([]int32, N*M)
	t := 0
	for b, s := range seqs {
		for len(s.blocks) < pc.BlocksFor(s.n+len(tokens[b])) {
			s.blocks, pc.free = append(s.blocks, pc.free[len(pc.free)-1]), pc.free[:len(pc.free)-1]
		}
		row := table[t*M : (t+1)*M]
		for j := range row {
			row[j] = -1
		}
		copy(row, s.blocks)
		for i, id := range tokens[b] {
			ids[t], pos[t], lens[t] = int32(id), int32(s.n+i), int32(s.n+i+1)
			copy(table[t*M:(t+1)*M], row)
			t++
		}
		last[b] = int32(t - 1)
	}
	for _, u := range []struct {
		t    *kernels.Tensor
		vals []int32
	}{{st.ids, ids}, {st.pos, pos}, {st.attnLens, lens}, {st.last, last}, {st.table, table}} {
		if err := kernels.UploadInt32(u.t, u.vals); err != nil {
			return fmt.Errorf("llama: inputs: %w", err)
		}
	}
	err = pc.m.forward(st.step, false, st.logits, func(i int) error {
		if err := pc.pk.PagedCacheWrite(pc.k[i], st.k, st.table, st.start); err != nil {
			return err
		}
		if err := pc.pk.PagedCacheWrite(pc.v[i], st.v, st.table, st.start); err != nil {
			return err
		}
		return st.attention(pc.m.be, func() error {
			return pc.pk.PagedAttention(st.att, st.qT, pc.k[i], pc.v[i], st.table, st.attnLens, 0)
		})
	})
	if err != nil {
		return err
	}
	for b, s := range seqs {
		s.n += len(tokens[b])
	}
	pc.last = st
	return nil
}

// stepFor returns the buffers of steps of N tokens of R sequences,
// allocating them the first time. Those of decode steps (a token per
// sequence) are kept; of the others, the maxPromptSteps used last.
func (pc *PagedCache) stepFor(N, R int) (*pagedStep, error) {
	pc.clock++
	key := pagedKey{tokens: N, seqs: R}
	if st, ok := pc.steps[key]; ok {
		st.used = pc.clock
		return st, nil
	}
	if N > R {
		if err := pc.evictPromptSteps(maxPromptSteps - 1); err != nil {
			return nil, err
		}
	}
	set := nn.NewTensorSet(pc.m.be)
	st, err := pc.m.newStep(set, N, 1, R, false, pc.quantized)
	if err != nil {
		return nil, errors.Join(err, set.Free())
	}
	a := nn.Allocator{Set: set}
	ps := &pagedStep{step: st, table: a.Ints("block_table", nil, N, pc.maxBlocks),
		logits: a.Tensor(pc.m.Precision.DType(), R, pc.m.Config.VocabSize), next: a.Ints("next", nil, R), set: set, used: pc.clock}
	if err := a.Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("llama: buffers of a step of %d tokens of %d sequences: %w", N, R, err), set.Free())
	}
	pc.steps[key] = ps
	return ps, nil
}

// evictPromptSteps frees the least recently used buffers of steps with
// more tokens than sequences until keep are left, never the last step's.
func (pc *PagedCache) evictPromptSteps(keep int) error {
	for {
		var (
			oldest *pagedStep
			key    pagedKey
			n      int
		)
		for k, st := range pc.steps {
			if k.tokens == k.seqs {
				continue
			}
			n++
			if st != pc.last && (oldest == nil || st.used < oldest.used) {
				oldest, key = st, k
			}
		}
		if n <= keep || oldest == nil {
			return nil
		}
		delete(pc.steps, key)
		if err := oldest.set.Free(); err != nil {
			return fmt.Errorf("llama: freeing the buffers of a step of %d tokens of %d sequences: %w", key.tokens, key.seqs, err)
		}
	}
}

// Logits downloads the last step's logits [B, vocab] as float32.
func (pc *PagedCache) Logits() ([]float32, error) {
	if pc.last == nil {
		return nil, fmt.Errorf("llama: no step has run: %w", ErrInput)
	}
	return kernels.ToFloat32(pc.last.logits)
}

// Greedy returns the index of the largest logit of each sequence of the
// last step, computed on the device.
func (pc *PagedCache) Greedy() ([]int, error) {
	if pc.last == nil {
		return nil, fmt.Errorf("llama: no step has run: %w", ErrInput)
	}
	return pc.m.greedy(pc.last.next, pc.last.logits)
}
