package gpt2

import (
	"errors"
	"fmt"
	"slices"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/layers"
	"github.com/zbench/zbench/models/nn"
)

// ErrInput marks model inputs that are out of range or of the wrong size.
var ErrInput = errors.New("bad GPT-2 input")

// Inputs are one batch of token sequences, row-major [batch, seq].
type Inputs struct {
	IDs []int32
	// Mask is Hugging Face's attention_mask: 1 for a token, 0 for
	// padding. Padding must be on the right (each row 1…1 0…0, at least
	// one 1). nil means no padding.
	Mask []int32
}

// lengths checks in against cfg and a batch of shape [batch, seq] and
// returns the tokens per sequence.
func (in Inputs) lengths(cfg Config, batch, seq int) ([]int32, error) {
	lens, err := nn.TokenLengths(in.IDs, in.Mask, batch, seq, cfg.VocabSize)
	if err != nil {
		return nil, fmt.Errorf("gpt2: %w: %w", err, ErrInput)
	}
	return lens, nil
}

// Forward is an inference pass of one batch shape with all its buffers
// allocated: Set or SetInputs, then Run, as often as wanted. Run queues
// only kernel launches, so on a device that captures graphs it can be
// captured once and replayed. It is the model as an nn.Runner.
type Forward struct {
	m          *Model
	Batch, Seq int

	bufs    *nn.TensorSet
	ids     *kernels.Tensor // I32 [B, S]
	pos     *kernels.Tensor // I32 [S]: 0…S−1
	keyLens *kernels.Tensor // I32 [B]: each sequence's tokens
	posEmb  *kernels.Tensor // [S, H]
	x       *kernels.Tensor // the residual stream [B, S, H]
	x2      *kernels.Tensor // its [N, H] view
	h       *kernels.Tensor // a LayerNorm's output [N, H]: ln_1, ln_2, ln_f
	qkv     *kernels.Tensor // c_attn's output [N, 3H]
	table   *kernels.Tensor // qkv as rows of one head [N·3·heads, hd]
	rows    [3]*kernels.Tensor
	heads   [3]*kernels.Tensor // q, k, v [B, heads, S, hd]
	ah      *kernels.Tensor    // the attention's output [B, heads, S, hd]
	a4, a   *kernels.Tensor    // heads merged, [B, S, heads, hd] and its [N, H] view
	f       *kernels.Tensor    // the MLP's activations [N, inner]
	logits  *kernels.Tensor    // [N, V]
	scratch *layers.Scratch    // the quantized linears' inputs; nil for a float model
}

// NewForward allocates the buffers of a forward pass over batch sequences
// of seq tokens. A Forward made before Quantize must be made again.
func (m *Model) NewForward(batch, seq int) (*Forward, error) {
	cfg := m.Config
	if batch <= 0 || seq <= 0 {
		return nil, fmt.Errorf("gpt2: batch %d, seq %d: want both > 0: %w", batch, seq, ErrInput)
	}
	if seq > cfg.NPositions {
		return nil, fmt.Errorf("gpt2: seq %d exceeds n_positions %d: %w", seq, cfg.NPositions, ErrInput)
	}
	f := &Forward{m: m, Batch: batch, Seq: seq, bufs: nn.NewTensorSet(m.be)}
	if err := f.alloc(); err != nil {
		return nil, errors.Join(fmt.Errorf("gpt2: %w", err), f.bufs.Free())
	}
	return f, nil
}

// alloc allocates the buffers of one block, which every block uses in
// turn, of the embeddings and of the head.
func (f *Forward) alloc() error {
	cfg, dt := f.m.Config, f.m.Precision.DType()
	B, S, H, nh, hd, I := f.Batch, f.Seq, cfg.NEmbd, cfg.NHead, cfg.HeadDim(), cfg.Inner()
	N := B * S
	a := nn.Allocator{Set: f.bufs}
	f.ids, f.keyLens = a.Tensor(kernels.I32, B, S), a.Tensor(kernels.I32, B)
	f.x, f.posEmb = a.Tensor(dt, B, S, H), a.Tensor(dt, S, H)
	f.x2 = a.View(f.x, N, H)
	f.h, f.qkv = a.Tensor(dt, N, H), a.Tensor(dt, N, 3*H)
	f.table = a.View(f.qkv, N*3*nh, hd)
	for i := range f.heads {
		f.heads[i] = a.Tensor(dt, B, nh, S, hd)
	}
	f.ah, f.a4 = a.Tensor(dt, B, nh, S, hd), a.Tensor(dt, B, S, nh, hd)
	f.a = a.View(f.a4, N, H)
	f.f, f.logits = a.Tensor(dt, N, I), a.Tensor(dt, N, cfg.VocabSize)
	if f.m.quantized {
		f.scratch = layers.NewScratch(&a, kernels.I8, dt, N, []int{H, I}, []int{H}, true)
	}
	if a.Err() != nil {
		return a.Err()
	}
	pos := make([]int32, S)
	for i := range pos {
		pos[i] = int32(i)
	}
	f.pos = a.Ints("position ids", pos, S)
	// Row (b, h, s) of q, k and v is row ((b·S + s)·3 + which)·heads + h
	// of c_attn's output: the heads are gathered in attention's layout.
	for which := range f.rows {
		idx := make([]int32, 0, B*nh*S)
		for b := range B {
			for h := range nh {
				for s := range S {
					idx = append(idx, int32(((b*S+s)*3+which)*nh+h))
				}
			}
		}
		f.rows[which] = a.Ints([3]string{"q rows", "k rows", "v rows"}[which], idx, B, nh, S)
	}
	return a.Err()
}

// SetInputs checks in and copies it to the device.
func (f *Forward) SetInputs(in Inputs) error {
	lens, err := in.lengths(f.m.Config, f.Batch, f.Seq)
	if err != nil {
		return err
	}
	for _, u := range []struct {
		t *kernels.Tensor
		v []int32
	}{{f.ids, in.IDs}, {f.keyLens, lens}} {
		if err := kernels.UploadInt32(u.t, u.v); err != nil {
			return fmt.Errorf("gpt2: inputs: %w", err)
		}
	}
	return nil
}

// Run queues the forward pass of the inputs last set: the logits of every
// position.
func (f *Forward) Run() error {
	m := f.m
	be, cfg := m.be, m.Config
	eps := float32(cfg.LayerNormEpsilon)
	err := nn.RunSteps(
		func() error { return be.Embedding(f.x, m.w.wte, f.ids) },
		func() error { return be.Embedding(f.posEmb, m.w.wpe, f.pos) },
		func() error { return be.Add(f.x, f.x, f.posEmb) },
	)
	if err != nil {
		return fmt.Errorf("gpt2: embeddings: %w", err)
	}
	attn := kernels.AttentionParams{Causal: true, KeyLens: f.keyLens}
	if !cfg.ScaleAttnWeights {
		attn.Scale = 1
	}
	for i := range m.w.blocks {
		if err := f.block(&m.w.blocks[i], eps, attn); err != nil {
			return fmt.Errorf("gpt2: block %d: %w", i, err)
		}
	}
	err = nn.RunSteps(
		func() error { return be.LayerNorm(f.h, nil, nil, f.x2, m.w.lnF.g, m.w.lnF.b, eps) },
		func() error {
			return m.w.head.Project(be, nil, f.logits, layers.Input{X: f.h}, kernels.ActNone, nil)
		},
	)
	if err != nil {
		return fmt.Errorf("gpt2: ln_f and lm_head: %w", err)
	}
	return nil
}

// block runs one block over the residual stream:
//
//	x += c_proj(attention(split(c_attn(ln_1(x)))))
//	x += mlp.c_proj(gelu_new(mlp.c_fc(ln_2(x))))
func (f *Forward) block(l *block, eps float32, attn kernels.AttentionParams) error {
	be := f.m.be
	project := func(out, x *kernels.Tensor, lin *linear, act kernels.Activation, res *kernels.Tensor) error {
		in, err := lin.Prepare(be, f.scratch, x)
		if err != nil {
			return err
		}
		return lin.Project(be, f.scratch, out, in, act, res)
	}
	ops := []struct {
		name string
		run  func() error
	}{
		{"ln_1", func() error { return be.LayerNorm(f.h, nil, nil, f.x2, l.ln1.g, l.ln1.b, eps) }},
		{"c_attn", func() error { return project(f.qkv, f.h, &l.attn, kernels.ActNone, nil) }},
		{"split q", func() error { return be.Embedding(f.heads[0], f.table, f.rows[0]) }},
		{"split k", func() error { return be.Embedding(f.heads[1], f.table, f.rows[1]) }},
		{"split v", func() error { return be.Embedding(f.heads[2], f.table, f.rows[2]) }},
		{"attention", func() error { return be.Attention(f.ah, f.heads[0], f.heads[1], f.heads[2], attn) }},
		{"merge heads", func() error { return be.SwapAxes(f.a4, f.ah) }},
		{"attn.c_proj", func() error { return project(f.x2, f.a, &l.attnOut, kernels.ActNone, f.x2) }},
		{"ln_2", func() error { return be.LayerNorm(f.h, nil, nil, f.x2, l.ln2.g, l.ln2.b, eps) }},
		{"mlp.c_fc", func() error { return project(f.f, f.h, &l.mlpIn, f.m.Config.Act(), nil) }},
		{"mlp.c_proj", func() error { return project(f.x2, f.f, &l.mlpOut, kernels.ActNone, f.x2) }},
	}
	for _, op := range ops {
		if err := op.run(); err != nil {
			return fmt.Errorf("%s: %w", op.name, err)
		}
	}
	return nil
}

// Logits downloads the logits [batch, seq, vocab] of the last pass as
// float32.
func (f *Forward) Logits() ([]float32, error) { return kernels.ToFloat32(f.logits) }

// Close frees the buffers.
func (f *Forward) Close() error { return f.bufs.Free() }

// NewRunner returns a Forward for the shape of in's input_ids, [batch,
// seq]: the model as an nn.Runner.
func (m *Model) NewRunner(in map[string]nn.Values) (nn.Runner, error) {
	batch, seq, err := nn.TokenShape(in)
	if err != nil {
		return nil, fmt.Errorf("gpt2: %w (%w)", err, ErrInput)
	}
	f, err := m.NewForward(batch, seq)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Set sets input_ids and, optionally, attention_mask, each of the
// Forward's shape [batch, seq] (SetInputs).
func (f *Forward) Set(in map[string]nn.Values) error {
	v, err := nn.Inputs(in, true, "input_ids", "attention_mask")
	if err != nil {
		return fmt.Errorf("gpt2: %w (%w)", err, ErrInput)
	}
	if want := []int{f.Batch, f.Seq}; !slices.Equal(v[0].Shape, want) {
		return fmt.Errorf("gpt2: input_ids has shape %v, want %v: %w", v[0].Shape, want, ErrInput)
	}
	return f.SetInputs(Inputs{IDs: v[0].I32, Mask: v[1].I32})
}

// Outputs returns GPT2LMHeadModel's output of the last pass: logits
// [batch, seq, vocab].
func (f *Forward) Outputs() ([]nn.Named, error) {
	logits, err := f.Logits()
	if err != nil {
		return nil, fmt.Errorf("gpt2: logits: %w", err)
	}
	return []nn.Named{{Name: "logits", Values: nn.Values{Shape: []int{f.Batch, f.Seq, f.m.Config.VocabSize}, F32: logits}}}, nil
}

// The model runs through the one run API.
var _ nn.Runnable = (*Model)(nil)
