package bert

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
)

// ErrInput marks model inputs that are out of range or of the wrong size.
var ErrInput = errors.New("bad BERT input")

// Inputs are one batch of token sequences, row-major [batch, seq].
type Inputs struct {
	IDs []int32
	// TypeIDs are the token types (segments); nil means all zero.
	TypeIDs []int32
	// Mask is Hugging Face's attention_mask: 1 for a token, 0 for
	// padding. Padding must be on the right (each row 1…1 0…0, at least one
	// 1). nil means no padding.
	Mask []int32
}

// lengths checks in against cfg and a batch of shape [batch, seq] and
// returns the tokens per sequence.
func (in Inputs) lengths(cfg Config, batch, seq int) ([]int32, error) {
	n := batch * seq
	if len(in.IDs) != n {
		return nil, fmt.Errorf("bert: input_ids has %d values, want batch·seq = %d·%d: %w", len(in.IDs), batch, seq, ErrInput)
	}
	for i, id := range in.IDs {
		if id < 0 || int(id) >= cfg.VocabSize {
			return nil, fmt.Errorf("bert: input_ids[%d, %d] = %d is outside the vocabulary [0, %d): %w",
				i/seq, i%seq, id, cfg.VocabSize, ErrInput)
		}
	}
	if in.TypeIDs != nil {
		if len(in.TypeIDs) != n {
			return nil, fmt.Errorf("bert: token_type_ids has %d values, want %d: %w", len(in.TypeIDs), n, ErrInput)
		}
		for i, t := range in.TypeIDs {
			if t < 0 || int(t) >= cfg.TypeVocabSize {
				return nil, fmt.Errorf("bert: token_type_ids[%d, %d] = %d is outside [0, %d): %w",
					i/seq, i%seq, t, cfg.TypeVocabSize, ErrInput)
			}
		}
	}
	lens := make([]int32, batch)
	for b := range lens {
		lens[b] = int32(seq)
	}
	if in.Mask == nil {
		return lens, nil
	}
	if len(in.Mask) != n {
		return nil, fmt.Errorf("bert: attention_mask has %d values, want %d: %w", len(in.Mask), n, ErrInput)
	}
	for b := range batch {
		row := in.Mask[b*seq : (b+1)*seq]
		l := 0
		for l < seq && row[l] == 1 {
			l++
		}
		for j := l; j < seq; j++ {
			if row[j] != 0 {
				return nil, fmt.Errorf("bert: attention_mask row %d is not 1…1 0…0 (value %d at %d; only right padding is supported): %w",
					b, row[j], j, ErrInput)
			}
		}
		if l == 0 {
			return nil, fmt.Errorf("bert: attention_mask row %d has no tokens: %w", b, ErrInput)
		}
		lens[b] = int32(l)
	}
	return lens, nil
}

// Forward is an inference pass of one batch shape with all its buffers
// allocated: SetInputs, then Run, as often as wanted. Run queues only
// kernel launches, so on a device that captures graphs it can be captured
// once and replayed.
type Forward struct {
	m          *Model
	Batch, Seq int

	bufs                       *nn.TensorSet
	ids, typeIDs, pos, keyLens *kernels.Tensor // I32 [B,S], [B,S], [S], [B]
	clsRows                    *kernels.Tensor // I32 [B]: the row of each sequence's first token
	x, h, x2, h2               *kernels.Tensor // the hidden stream [B,S,H] and a [B·S,H] view of each
	posEmb                     *kernels.Tensor // [S, H]
	q, k, v, a                 *kernels.Tensor // [B·S, H] views of the projections and the merged context
	q4, k4, v4, a4             *kernels.Tensor // [B, S, heads, hd] views of the same
	qc, kc, vc, ac             *kernels.Tensor // Mixed: float16 copies [B, S, heads, hd]
	qh, kh, vh, ah             *kernels.Tensor // [B, heads, S, hd] in the attention dtype
	ffn                        *kernels.Tensor // [B·S, I]
	cls                        *kernels.Tensor // [B, H]
	pooled                     *kernels.Tensor // [B, H]
}

// NewForward allocates the buffers of a forward pass over batch sequences
// of seq tokens.
func (m *Model) NewForward(batch, seq int) (*Forward, error) {
	cfg := m.Config
	if batch <= 0 || seq <= 0 {
		return nil, fmt.Errorf("bert: batch %d, seq %d: want both > 0: %w", batch, seq, ErrInput)
	}
	if seq > cfg.MaxPositionEmbeddings {
		return nil, fmt.Errorf("bert: seq %d exceeds max_position_embeddings %d: %w", seq, cfg.MaxPositionEmbeddings, ErrInput)
	}
	f := &Forward{m: m, Batch: batch, Seq: seq, bufs: nn.NewTensorSet(m.be)}
	if err := f.alloc(); err != nil {
		return nil, errors.Join(fmt.Errorf("bert: %w", err), f.bufs.Free())
	}
	return f, nil
}

func (f *Forward) alloc() error {
	cfg, dt, adt := f.m.Config, f.m.Precision.DType(), f.m.Precision.AttnDType()
	B, S, H, nh, hd := f.Batch, f.Seq, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.HeadDim()
	N := B * S
	a := nn.Allocator{Set: f.bufs}
	f.ids, f.typeIDs, f.keyLens = a.Tensor(kernels.I32, B, S), a.Tensor(kernels.I32, B, S), a.Tensor(kernels.I32, B)
	f.x, f.h = a.Tensor(dt, B, S, H), a.Tensor(dt, B, S, H)
	f.x2, f.h2 = a.View(f.x, N, H), a.View(f.h, N, H)
	f.posEmb = a.Tensor(dt, S, H)
	for _, p := range []struct{ flat, split, cast, heads **kernels.Tensor }{
		{&f.q, &f.q4, &f.qc, &f.qh}, {&f.k, &f.k4, &f.kc, &f.kh}, {&f.v, &f.v4, &f.vc, &f.vh}, {&f.a, &f.a4, &f.ac, &f.ah},
	} {
		*p.flat = a.Tensor(dt, N, H)
		*p.split = a.View(*p.flat, B, S, nh, hd)
		if adt != dt {
			*p.cast = a.Tensor(adt, B, S, nh, hd)
		}
		*p.heads = a.Tensor(adt, B, nh, S, hd)
	}
	f.ffn = a.Tensor(dt, N, cfg.IntermediateSize)
	f.cls, f.pooled = a.Tensor(dt, B, H), a.Tensor(dt, B, H)
	if a.Err() != nil {
		return a.Err()
	}
	pos := make([]int32, S)
	for i := range pos {
		pos[i] = int32(i)
	}
	f.pos = a.Ints("position ids", pos, S)
	rows := make([]int32, B)
	for b := range rows {
		rows[b] = int32(b * S)
	}
	f.clsRows = a.Ints("first-token rows", rows, B)
	return a.Err()
}

// SetInputs checks in and copies it to the device.
func (f *Forward) SetInputs(in Inputs) error {
	lens, err := in.lengths(f.m.Config, f.Batch, f.Seq)
	if err != nil {
		return err
	}
	types := in.TypeIDs
	if types == nil {
		types = make([]int32, f.Batch*f.Seq)
	}
	for _, u := range []struct {
		t *kernels.Tensor
		v []int32
	}{{f.ids, in.IDs}, {f.typeIDs, types}, {f.keyLens, lens}} {
		if err := kernels.UploadInt32(u.t, u.v); err != nil {
			return fmt.Errorf("bert: inputs: %w", err)
		}
	}
	return nil
}

// Run queues the forward pass of the inputs last set.
func (f *Forward) Run() error {
	m, be := f.m, f.m.be
	w, eps := m.w, float32(m.Config.LayerNormEps)
	// Embeddings: word + position + token type, then LayerNorm into x.
	steps := []func() error{
		func() error { return be.Embedding(f.h, w.word, f.ids) },
		func() error { return be.Embedding(f.posEmb, w.pos, f.pos) },
		func() error { return be.Add(f.h, f.h, f.posEmb) },
		func() error { return be.Embedding(f.x, w.typ, f.typeIDs) },
		func() error { return be.Add(f.h, f.h, f.x) },
		func() error { return be.LayerNorm(f.x, nil, nil, f.h, w.embLN.g, w.embLN.b, eps) },
	}
	if err := run(steps...); err != nil {
		return fmt.Errorf("bert: embeddings: %w", err)
	}
	for i := range w.layers {
		if err := f.layer(&w.layers[i]); err != nil {
			return fmt.Errorf("bert: layer %d: %w", i, err)
		}
	}
	// Pooler: tanh(dense(first token)).
	if err := be.Embedding(f.cls, f.x2, f.clsRows); err != nil {
		return fmt.Errorf("bert: pooler: %w", err)
	}
	if err := dense(be, f.pooled, f.cls, w.pooler, kernels.ActTanh, false); err != nil {
		return fmt.Errorf("bert: pooler: %w", err)
	}
	return nil
}

// dense sets out = act(in·wᵀ + b), plus out's previous value if residual.
func dense(be kernels.Backend, out, in *kernels.Tensor, l linear, act kernels.Activation, residual bool) error {
	p := kernels.MatMulParams{TransB: true, Bias: l.b, Act: act}
	if residual {
		p.Beta = 1
	}
	return be.MatMul(out, in, l.w, p)
}

// layer runs one encoder layer on x, leaving its output in x.
func (f *Forward) layer(l *layer) error {
	be, eps := f.m.be, float32(f.m.Config.LayerNormEps)
	for _, p := range []struct {
		flat, split, cast, heads *kernels.Tensor
		w                        linear
	}{{f.q, f.q4, f.qc, f.qh, l.q}, {f.k, f.k4, f.kc, f.kh, l.k}, {f.v, f.v4, f.vc, f.vh, l.v}} {
		if err := dense(be, p.flat, f.x2, p.w, kernels.ActNone, false); err != nil {
			return err
		}
		src := p.split
		if p.cast != nil {
			if err := be.Cast(p.cast, p.split); err != nil {
				return err
			}
			src = p.cast
		}
		if err := be.SwapAxes(p.heads, src); err != nil {
			return err
		}
	}
	if err := be.Attention(f.ah, f.qh, f.kh, f.vh, kernels.AttentionParams{KeyLens: f.keyLens}); err != nil {
		return err
	}
	if f.ac != nil {
		if err := be.SwapAxes(f.ac, f.ah); err != nil {
			return err
		}
		if err := be.Cast(f.a4, f.ac); err != nil {
			return err
		}
	} else if err := be.SwapAxes(f.a4, f.ah); err != nil {
		return err
	}
	// x = a·Woᵀ + bo + x; h = LN(x); h = ffn(h) + h; x = LN(h).
	if err := dense(be, f.x2, f.a, l.o, kernels.ActNone, true); err != nil {
		return err
	}
	if err := be.LayerNorm(f.h, nil, nil, f.x, l.ln1.g, l.ln1.b, eps); err != nil {
		return err
	}
	if err := dense(be, f.ffn, f.h2, l.ffnIn, f.m.Config.Act(), false); err != nil {
		return err
	}
	if err := dense(be, f.h2, f.ffn, l.ffnOut, kernels.ActNone, true); err != nil {
		return err
	}
	return be.LayerNorm(f.x, nil, nil, f.h, l.ln2.g, l.ln2.b, eps)
}

// LastHidden downloads last_hidden_state [batch, seq, hidden] as float32.
func (f *Forward) LastHidden() ([]float32, error) { return kernels.ToFloat32(f.x) }

// Pooled downloads pooler_output [batch, hidden] as float32.
func (f *Forward) Pooled() ([]float32, error) { return kernels.ToFloat32(f.pooled) }

// Close frees the buffers.
func (f *Forward) Close() error { return f.bufs.Free() }
