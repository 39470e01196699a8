package bert

import (
	"errors"
	"fmt"
	"slices"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/layers"
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
	lens, err := nn.TokenLengths(in.IDs, in.Mask, batch, seq, cfg.VocabSize)
	if err != nil {
		return nil, fmt.Errorf("bert: %w: %w", err, ErrInput)
	}
	if in.TypeIDs != nil {
		if len(in.TypeIDs) != batch*seq {
			return nil, fmt.Errorf("bert: token_type_ids has %d values, want %d: %w", len(in.TypeIDs), batch*seq, ErrInput)
		}
		for i, t := range in.TypeIDs {
			if t < 0 || int(t) >= cfg.TypeVocabSize {
				return nil, fmt.Errorf("bert: token_type_ids[%d, %d] = %d is outside [0, %d): %w",
					i/seq, i%seq, t, cfg.TypeVocabSize, ErrInput)
			}
		}
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

	bufs    *nn.TensorSet
	enc     encoderBufs     // every layer over the same buffers, in place
	x       *kernels.Tensor // the hidden stream [B, S, H]: the embeddings' and every layer's output
	clsRows *kernels.Tensor // I32 [B]: the row of each sequence's first token
	cls     *kernels.Tensor // [B, H]
	pooled  *kernels.Tensor // [B, H]
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

// alloc allocates the buffers of one layer, which every layer uses in
// turn, and of the embeddings, which write the first layer's input.
func (f *Forward) alloc() error {
	cfg, dt, adt := f.m.Config, f.m.Precision.DType(), f.m.Precision.AttnDType()
	B, S, H, nh, hd := f.Batch, f.Seq, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.HeadDim()
	N := B * S
	a := nn.Allocator{Set: f.bufs}
	e := &f.enc
	e.ids, e.typeIDs, e.keyLens = a.Tensor(kernels.I32, B, S), a.Tensor(kernels.I32, B, S), a.Tensor(kernels.I32, B)
	f.x, e.sum = a.Tensor(dt, B, S, H), a.Tensor(dt, B, S, H)
	e.sum3, e.emb = e.sum, f.x
	e.posEmb = a.Tensor(dt, S, H)
	x2, h2 := a.View(f.x, N, H), a.View(e.sum, N, H)
	l := layerBufs{x: x2, out: x2, r1: x2, h1: h2, r2: h2, f: a.Tensor(dt, N, cfg.IntermediateSize)}
	if f.m.Quantized() {
		codes := kernels.I8
		if f.m.FP8() {
			codes = kernels.E4M3
		}
		l.scratch = layers.NewScratch(&a, codes, dt, N, []int{H, cfg.IntermediateSize}, []int{H}, f.m.FP8())
	}
	l.a = a.Tensor(dt, N, H)
	l.a4 = a.View(l.a, B, S, nh, hd)
	if f.m.w.layers[0].qkv.W != nil { // the stacked projection and AttentionPacked
		l.qkv = a.Tensor(dt, N, 3*H)
		l.qkv4 = a.View(l.qkv, B, S, 3*nh, hd)
		if adt != dt {
			l.qkvc, l.a4c = a.Tensor(adt, B, S, 3*nh, hd), a.Tensor(adt, B, S, nh, hd)
		}
	} else {
		for _, p := range []struct{ flat, split, cast, heads **kernels.Tensor }{
			{&l.q, &l.q4, &l.qc, &l.qh}, {&l.k, &l.k4, &l.kc, &l.kh}, {&l.v, &l.v4, &l.vc, &l.vh}, {&l.a, &l.a4, &l.ac, &l.ah},
		} {
			if *p.flat == nil {
				*p.flat = a.Tensor(dt, N, H)
				*p.split = a.View(*p.flat, B, S, nh, hd)
			}
			if adt != dt {
				*p.cast = a.Tensor(adt, B, S, nh, hd)
			}
			*p.heads = a.Tensor(adt, B, nh, S, hd)
		}
	}
	e.layers = slices.Repeat([]layerBufs{l}, cfg.NumHiddenLayers)
	f.cls, f.pooled = a.Tensor(dt, B, H), a.Tensor(dt, B, H)
	if a.Err() != nil {
		return a.Err()
	}
	pos := make([]int32, S)
	for i := range pos {
		pos[i] = int32(i)
	}
	e.pos = a.Ints("position ids", pos, S)
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
	}{{f.enc.ids, in.IDs}, {f.enc.typeIDs, types}, {f.enc.keyLens, lens}} {
		if err := kernels.UploadInt32(u.t, u.v); err != nil {
			return fmt.Errorf("bert: inputs: %w", err)
		}
	}
	return nil
}

// Run queues the forward pass of the inputs last set.
func (f *Forward) Run() error {
	m := f.m
	if err := encode(m.be, m.Config, &m.w, &f.enc); err != nil {
		return err
	}
	// Pooler: tanh(dense(first token)).
	if err := m.be.Embedding(f.cls, f.enc.hidden(), f.clsRows); err != nil {
		return fmt.Errorf("bert: pooler: %w", err)
	}
	if err := m.w.pooler.Project(m.be, nil, f.pooled, layers.Input{X: f.cls}, kernels.ActTanh, nil); err != nil {
		return fmt.Errorf("bert: pooler: %w", err)
	}
	return nil
}

// LastHidden downloads last_hidden_state [batch, seq, hidden] as float32.
func (f *Forward) LastHidden() ([]float32, error) { return kernels.ToFloat32(f.x) }

// Pooled downloads pooler_output [batch, hidden] as float32.
func (f *Forward) Pooled() ([]float32, error) { return kernels.ToFloat32(f.pooled) }

// Close frees the buffers.
func (f *Forward) Close() error { return f.bufs.Free() }

// NewRunner returns a Forward for the shape of in's input_ids, [batch,
// seq]: the model as an nn.Runner.
func (m *Model) NewRunner(in map[string]nn.Values) (nn.Runner, error) {
	batch, seq, err := nn.TokenShape(in)
	if err != nil {
		return nil, fmt.Errorf("bert: %w (%w)", err, ErrInput)
	}
	f, err := m.NewForward(batch, seq)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Set sets input_ids and, optionally, attention_mask and token_type_ids,
// each of the Forward's shape [batch, seq] (SetInputs).
func (f *Forward) Set(in map[string]nn.Values) error {
	v, err := nn.Inputs(in, true, "input_ids", "attention_mask", "token_type_ids")
	if err != nil {
		return fmt.Errorf("bert: %w (%w)", err, ErrInput)
	}
	if want := []int{f.Batch, f.Seq}; !slices.Equal(v[0].Shape, want) {
		return fmt.Errorf("bert: input_ids has shape %v, want %v: %w", v[0].Shape, want, ErrInput)
	}
	return f.SetInputs(Inputs{IDs: v[0].I32, Mask: v[1].I32, TypeIDs: v[2].I32})
}

// Outputs returns BertModel's outputs of the last pass:
// last_hidden_state [batch, seq, hidden] and pooler_output [batch,
// hidden].
func (f *Forward) Outputs() ([]nn.Named, error) {
	hidden, err := f.LastHidden()
	if err != nil {
		return nil, fmt.Errorf("bert: last_hidden_state: %w", err)
	}
	pooled, err := f.Pooled()
	if err != nil {
		return nil, fmt.Errorf("bert: pooler_output: %w", err)
	}
	H := f.m.Config.HiddenSize
	return []nn.Named{
		{Name: "last_hidden_state", Values: nn.Values{Shape: []int{f.Batch, f.Seq, H}, F32: hidden}},
		{Name: "pooler_output", Values: nn.Values{Shape: []int{f.Batch, H}, F32: pooled}},
	}, nil
}

// The model runs through the one run API.
var _ nn.Runnable = (*Model)(nil)
