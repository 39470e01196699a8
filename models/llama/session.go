package llama

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/layers"
	"github.com/zbench/zbench/models/nn"
)

// ErrInput marks model inputs that are out of range or of the wrong size.
var ErrInput = errors.New("bad Llama input")

// Session is a batch of sequences with their KV cache on the model's
// device: per layer, keys and values [batch, kv heads, maxLen, head dim]
// in the model's dtype, preallocated, and the buffers of each step size
// used so far. Prefill fills the cache with prompts; each Decode appends
// one token per sequence. A Session is used by one goroutine at a time.
type Session struct {
	m             *Model
	batch, maxLen int
	set           *nn.TensorSet
	k, v          []*kernels.Tensor
	lens          []int32 // tokens in the cache, per sequence
	steps         map[stepKey]*step
	logits        *kernels.Tensor // [batch, vocab] of the last step, in the model's dtype
	next          *kernels.Tensor // I32 [batch]: Argmax of logits
	quantized     int             // the model's quantized modules when the session was opened
}

// NewSession allocates the KV cache of batch sequences of up to maxLen
// tokens (prompt and generated).
func (m *Model) NewSession(batch, maxLen int) (*Session, error) {
	if batch <= 0 || maxLen <= 0 {
		return nil, fmt.Errorf("llama: session of %d sequences of %d tokens: %w", batch, maxLen, ErrInput)
	}
	if maxLen > m.Config.MaxPositionEmbeddings {
		return nil, fmt.Errorf("llama: session of %d tokens exceeds max_position_embeddings %d: %w",
			maxLen, m.Config.MaxPositionEmbeddings, ErrInput)
	}
	c := m.Config
	s := &Session{m: m, batch: batch, maxLen: maxLen, set: nn.NewTensorSet(m.be), lens: make([]int32, batch),
		steps: map[stepKey]*step{}, quantized: m.quantized}
	a := nn.Allocator{Set: s.set}
	dt := m.Precision.DType()
	for range c.NumHiddenLayers {
		s.k = append(s.k, a.Tensor(dt, batch, c.NumKeyValueHeads, maxLen, c.HeadDim))
		s.v = append(s.v, a.Tensor(dt, batch, c.NumKeyValueHeads, maxLen, c.HeadDim))
	}
	s.logits = a.Tensor(dt, batch, c.VocabSize)
	s.next = a.Tensor(kernels.I32, batch)
	if err := a.Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("llama: KV cache: %w", err), s.set.Free())
	}
	return s, nil
}

// Batch is the number of sequences.
func (s *Session) Batch() int { return s.batch }

// MaxLen is the capacity of each sequence's cache.
func (s *Session) MaxLen() int { return s.maxLen }

// Lens returns the number of tokens in each sequence's cache.
func (s *Session) Lens() []int {
	out := make([]int, len(s.lens))
	for i, n := range s.lens {
		out[i] = int(n)
	}
	return out
}

// CacheBytes is the size of the KV cache's first n positions of every
// sequence: what attention reads in a decode step at context n.
func (s *Session) CacheBytes(n int) int64 {
	c := s.m.Config
	return 2 * int64(c.NumHiddenLayers) * int64(s.batch) * int64(c.KVDim()) * int64(n) * int64(s.m.Precision.DType().Size())
}

// Rewind sets every sequence's length to n, keeping the first n cached
// positions: the next Decode writes position n. Benchmarks use it to
// decode again and again at one context length.
func (s *Session) Rewind(n int) error {
	for b, l := range s.lens {
		if n < 0 || int32(n) > l {
			return fmt.Errorf("llama: rewind sequence %d of %d tokens to %d: %w", b, l, n, ErrInput)
		}
	}
	for b := range s.lens {
		s.lens[b] = int32(n)
	}
	return nil
}

// Close frees the cache, the buffers and the captured graphs.
func (s *Session) Close() error {
	var errs []error
	for _, st := range s.steps {
		if st.graph != nil {
			errs = append(errs, st.graph.Close())
		}
	}
	return errors.Join(append(errs, s.set.Free())...)
}

// Prefill resets the cache and runs the prompts, one per sequence (at
// least one token each, lengths may differ), leaving the logits of each
// prompt's last token for Logits and Greedy.
func (s *Session) Prefill(prompts [][]int) error {
	if len(prompts) != s.batch {
		return fmt.Errorf("llama: %d prompts for a session of %d sequences: %w", len(prompts), s.batch, ErrInput)
	}
	S := 0
	for b, p := range prompts {
		if len(p) == 0 {
			return fmt.Errorf("llama: prompt %d is empty: %w", b, ErrInput)
		}
		S = max(S, len(p))
	}
	if S > s.maxLen {
		return fmt.Errorf("llama: prompt of %d tokens exceeds the session's %d: %w", S, s.maxLen, ErrInput)
	}
	ids := make([]int32, s.batch*S)
	last := make([]int32, s.batch)
	for b, p := range prompts {
		for i, id := range p {
			ids[b*S+i] = int32(id)
		}
		last[b] = int32(b*S + len(p) - 1)
	}
	clear(s.lens)
	if err := s.run(S, ids, last, false); err != nil {
		return err
	}
	for b, p := range prompts {
		s.lens[b] = int32(len(p))
	}
	return nil
}

// Decode appends one token per sequence at its current length and leaves
// the logits of the new tokens.
func (s *Session) Decode(tokens []int) error {
	if len(tokens) != s.batch {
		return fmt.Errorf("llama: %d tokens for a session of %d sequences: %w", len(tokens), s.batch, ErrInput)
	}
	ids := make([]int32, s.batch)
	last := make([]int32, s.batch)
	for b, id := range tokens {
		if s.lens[b] >= int32(s.maxLen) {
			return fmt.Errorf("llama: sequence %d is full (%d tokens): %w", b, s.maxLen, ErrInput)
		}
		ids[b], last[b] = int32(id), int32(b)
	}
	if err := s.run(1, ids, last, false); err != nil {
		return err
	}
	for b := range s.lens {
		s.lens[b]++
	}
	return nil
}

// Logits downloads the last step's logits [batch, vocab] as float32.
func (s *Session) Logits() ([]float32, error) { return kernels.ToFloat32(s.logits) }

// Greedy returns the index of the largest logit of each sequence's last
// step, computed on the device (only batch ids leave it).
func (s *Session) Greedy() ([]int, error) { return s.m.greedy(s.next, s.logits) }

// checkToken says whether token id, at position pos of sequence seq,
// is in the vocabulary.
func (c Config) checkToken(id, pos, seq int) error {
	if id < 0 || id >= c.VocabSize {
		return fmt.Errorf("llama: token id %d at position %d of sequence %d is outside the vocabulary [0, %d): %w",
			id, pos, seq, c.VocabSize, ErrInput)
	}
	return nil
}

// greedy sets next (I32 [B]) to the index of each row's largest logit on
// the device and returns them.
func (m *Model) greedy(next, logits *kernels.Tensor) ([]int, error) {
	if err := m.dec.Argmax(next, logits); err != nil {
		return nil, fmt.Errorf("llama: argmax: %w", err)
	}
	ids, err := kernels.ToInt32(next)
	if err != nil {
		return nil, fmt.Errorf("llama: argmax: %w", err)
	}
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out, nil
}

// stepKey identifies a step's buffers: tokens per sequence, and whether
// it computes the logits of every position.
type stepKey struct {
	S    int
	full bool
}

// step is the buffers of a forward over S new tokens of every sequence.
type step struct {
	S               int
	ids, pos, start *kernels.Tensor // I32 [B, S], [B, S], [B] (pos when S is 1)
	flatIDs         *kernels.Tensor // ids as [B·S]
	attnLens, last  *kernels.Tensor // I32 [B], [outs]
	x, h            *kernels.Tensor // [B·S, H]: the residual stream, the normalised input
	q, k, v         *kernels.Tensor // [B, S, heads, D]
	qT, att, attT   *kernels.Tensor // [B, Hq, S, D], [B, Hq, S, D], [B·S, Hq·D]
	attT4           *kernels.Tensor // attT as [B, S, Hq, D]
	gate, up        *kernels.Tensor // [B·S, I]
	xLast, hLast    *kernels.Tensor // [outs, H]: the rows whose logits are wanted
	full            *kernels.Tensor // [B·S, V] when every position's logits are wanted
	q2, k2, v2      *kernels.Tensor // 2-D views of q, k, v
	layer           layerBufs       // the above as every layer's buffers, in place
	scratch         *layers.Scratch // the quantized modules' buffers when the model has any
	graph           kernels.Graph   // the captured decode step, once captured
	ranEager        bool            // the step has run once without a graph
}

// stepFor returns the buffers of steps of S tokens per sequence,
// allocating them the first time.
func (s *Session) stepFor(S int, full bool) (*step, error) {
	key := stepKey{S: S, full: full}
	if st, ok := s.steps[key]; ok {
		return st, nil
	}
	st, err := s.m.newStep(s.set, s.batch, S, s.batch, full, s.quantized)
	if err != nil {
		return nil, err
	}
	s.steps[key] = st
	return st, nil
}

// newStep allocates in set the buffers of a forward over B sequences of S
// new tokens each (the logits of every position when full, else of outs
// rows), with the quantized modules' scratch when quantized > 0.
func (m *Model) newStep(set *nn.TensorSet, B, S, outs int, full bool, quantized int) (*step, error) {
	c := m.Config
	dt := m.Precision.DType()
	a := nn.Allocator{Set: set}
	st := &step{S: S}
	st.ids, st.pos = a.Ints("input_ids", nil, B, S), a.Ints("position_ids", nil, B, S)
	st.attnLens, st.last = a.Ints("lens", nil, B), a.Ints("last", nil, outs)
	if S == 1 { // a sequence's one new token goes where it is
		st.start = a.View(st.pos, B)
	} else {
		st.start = a.Ints("start", nil, B)
	}
	st.flatIDs = a.View(st.ids, B*S)
	st.x, st.h = a.Tensor(dt, B*S, c.HiddenSize), a.Tensor(dt, B*S, c.HiddenSize)
	st.q = a.Tensor(dt, B, S, c.NumAttentionHeads, c.HeadDim)
	st.k = a.Tensor(dt, B, S, c.NumKeyValueHeads, c.HeadDim)
	st.v = a.Tensor(dt, B, S, c.NumKeyValueHeads, c.HeadDim)
	st.att = a.Tensor(dt, B, c.NumAttentionHeads, S, c.HeadDim)
	if S == 1 { // [B, 1, H, D] and [B, H, 1, D] are the same array
		st.qT = a.View(st.q, B, c.NumAttentionHeads, 1, c.HeadDim)
		st.attT = a.View(st.att, B, c.QDim())
	} else {
		st.qT = a.Tensor(dt, B, c.NumAttentionHeads, S, c.HeadDim)
		st.attT = a.Tensor(dt, B*S, c.QDim())
	}
	st.attT4 = a.View(st.attT, B, S, c.NumAttentionHeads, c.HeadDim)
	st.gate, st.up = a.Tensor(dt, B*S, c.IntermediateSize), a.Tensor(dt, B*S, c.IntermediateSize)
	st.xLast, st.hLast = a.Tensor(dt, outs, c.HiddenSize), a.Tensor(dt, outs, c.HiddenSize)
	if full {
		st.full = a.Tensor(dt, B*S, c.VocabSize)
	}
	if quantized > 0 {
		st.scratch = m.newScratch(&a, dt, B*S)
	}
	st.q2 = a.View(st.q, B*S, c.QDim())
	st.k2 = a.View(st.k, B*S, c.KVDim())
	st.v2 = a.View(st.v, B*S, c.KVDim())
	if err := a.Err(); err != nil {
		return nil, fmt.Errorf("llama: buffers of a %d×%d step: %w", B, S, err)
	}
	st.layer = layerBufs{x: st.x, h1: st.h, x2: st.x, h2: st.h, out: st.x, q: st.q, k: st.k, v: st.v,
		q2: st.q2, k2: st.k2, v2: st.v2, attT: st.attT, gate: st.gate, up: st.up, act: st.gate}
	return st, nil
}

// run queues a forward over S new tokens per sequence, ids [B·S]
// row-major, starting at each sequence's current length; last holds, per
// sequence, the row of x whose logits go to s.logits. With full, the
// logits of every row go to the step's full buffer instead.
func (s *Session) run(S int, ids, last []int32, full bool) error {
	if s.quantized != s.m.quantized {
		return fmt.Errorf("llama: the model was quantized after the session was opened: open a new session: %w", ErrInput)
	}
	st, err := s.stepFor(S, full)
	if err != nil {
		return err
	}
	B, c := s.batch, s.m.Config
	pos := make([]int32, B*S)
	lens := make([]int32, B)
	for b := range B {
		if int(s.lens[b])+S > s.maxLen {
			return fmt.Errorf("llama: sequence %d: %d cached and %d new tokens exceed the session's %d: %w",
				b, s.lens[b], S, s.maxLen, ErrInput)
		}
		for i := range S {
			pos[b*S+i] = s.lens[b] + int32(i)
		}
		lens[b] = s.lens[b] + int32(S)
	}
	for i, id := range ids {
		if err := c.checkToken(int(id), i%S, i/S); err != nil {
			return err
		}
	}
	type upload struct {
		t    *kernels.Tensor
		vals []int32
	}
	uploads := []upload{{st.ids, ids}, {st.pos, pos}, {st.attnLens, lens}}
	if S > 1 { // else start is pos
		uploads = append(uploads, upload{st.start, s.lens})
	}
	if !full {
		uploads = append(uploads, upload{st.last, last})
	}
	for _, u := range uploads {
		if err := kernels.UploadInt32(u.t, u.vals); err != nil {
			return fmt.Errorf("llama: inputs: %w", err)
		}
	}
	return s.launch(st, full)
}

// launch queues the forward of a step whose inputs are on the device. A
// decode step (one token per sequence) on a device that captures graphs
// is recorded on its second call, after an eager one has let every
// workspace grow, and replayed with one launch from then on: its kernels
// read positions and lengths from device memory, so one graph serves
// every step.
func (s *Session) launch(st *step, full bool) error {
	c, err := kernels.Group[kernels.Capturer](s.m.be)
	if err != nil || st.S != 1 || full {
		return s.forward(st, full)
	}
	if st.graph == nil && st.ranEager {
		g, err := c.Capture(func() error { return s.forward(st, false) })
		if err != nil {
			return fmt.Errorf("llama: capturing the decode step: %w", err)
		}
		st.graph = g
	}
	if st.graph != nil {
		if err := st.graph.Launch(); err != nil {
			return fmt.Errorf("llama: decode step graph: %w", err)
		}
		return nil
	}
	st.ranEager = true
	return s.forward(st, false)
}

// forward queues the model over the step's uploaded inputs.
func (s *Session) forward(st *step, full bool) error {
	return s.m.forward(st, full, s.logits, func(i int) error {
		if err := s.m.dec.CacheWrite(s.k[i], st.k, st.start); err != nil {
			return err
		}
		if err := s.m.dec.CacheWrite(s.v[i], st.v, st.start); err != nil {
			return err
		}
		return st.attention(s.m.be, func() error {
			return s.m.dec.CachedAttention(st.att, st.qT, s.k[i], s.v[i], st.attnLens, 0)
		})
	})
}

// attention runs attend (which reads q as qT [B, Hq, S, D] and writes
// att in that layout) between the step's layouts [B, S, heads, D].
func (st *step) attention(be kernels.Backend, attend func() error) error {
	if st.S > 1 { // else [B, 1, H, D] and [B, H, 1, D] are one array
		if err := be.SwapAxes(st.qT, st.q); err != nil {
			return err
		}
	}
	if err := attend(); err != nil {
		return err
	}
	if st.S > 1 {
		return be.SwapAxes(st.attT4, st.att)
	}
	return nil
}

// forward queues the model over a step's uploaded inputs, attend(i)
// writing layer i's keys and values to its cache and attending (through
// st.attention); the logits of each sequence's last new token go to
// logits, or with full those of every position to st.full.
func (m *Model) forward(st *step, full bool, logits *kernels.Tensor, attend func(i int) error) error {
	be := m.be
	eps := float32(m.Config.RMSNormEps)
	if err := be.Embedding(st.x, m.w.embed, st.flatIDs); err != nil {
		return fmt.Errorf("llama: embed_tokens: %w", err)
	}
	proj := frozen(be, st.scratch)
	for i := range m.w.layers {
		if err := m.layerForward(i, &st.layer, st.pos, proj, func() error { return attend(i) }); err != nil {
			return err
		}
	}
	if full {
		if err := be.RMSNorm(st.h, st.x, m.w.norm, eps); err != nil {
			return fmt.Errorf("llama: norm: %w", err)
		}
		if err := m.w.head.Project(be, nil, st.full, layers.Input{X: st.h}, kernels.ActNone, nil); err != nil {
			return fmt.Errorf("llama: lm_head: %w", err)
		}
		return nil
	}
	// Only the last token of each sequence needs logits: gather its row.
	if err := be.Embedding(st.xLast, st.x, st.last); err != nil {
		return fmt.Errorf("llama: last positions: %w", err)
	}
	if err := be.RMSNorm(st.hLast, st.xLast, m.w.norm, eps); err != nil {
		return fmt.Errorf("llama: norm: %w", err)
	}
	if err := m.w.head.Project(be, nil, logits, layers.Input{X: st.hLast}, kernels.ActNone, nil); err != nil {
		return fmt.Errorf("llama: lm_head: %w", err)
	}
	return nil
}
