// Package gpt2 is GPT-2 with the semantics of Hugging Face's GPT2Model and
// GPT2LMHeadModel (lm_head tied to the token embeddings), over any
// kernels.Backend: loading of real checkpoints (safetensors with Hugging
// Face names, with or without GPT2LMHeadModel's "transformer." prefix, and
// config.json), seeded synthetic weights of any config, the logits of
// every position of a batch with right padding, and int8 (W8A8 dynamic)
// inference.
//
// Checkpoints keep Hugging Face's layout: a block's linear layers are
// Conv1D modules whose weight is stored [in, out] (y = x·W + b). Load
// transposes them to the [out, in] of layers.Linear; Params lists them as
// stored.
package gpt2

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/layers"
	"github.com/zbench/zbench/models/nn"
)

// linear is a block's linear layer: weight [out, in], as in
// torch.nn.Linear, and bias [out], or its int8 form once the model is
// quantized.
type linear = layers.Linear

// norm is a LayerNorm's weight and bias.
type norm struct{ g, b *kernels.Tensor }

// block is one transformer block's parameters.
type block struct {
	ln1, ln2      norm
	attn, attnOut linear // c_attn (q, k and v in one product) and attn.c_proj
	mlpIn, mlpOut linear // mlp.c_fc and mlp.c_proj
}

// linears are the block's linear layers with their names in the
// checkpoint (without ".weight"), in the checkpoint's order.
func (b *block) linears(i int) []struct {
	name string
	lin  *linear
} {
	return []struct {
		name string
		lin  *linear
	}{
		{blockParam(i, cAttn), &b.attn}, {blockParam(i, attnOut), &b.attnOut},
		{blockParam(i, cFC), &b.mlpIn}, {blockParam(i, mlpOut), &b.mlpOut},
	}
}

// weights are the model's parameters by role.
type weights struct {
	wte, wpe *kernels.Tensor
	blocks   []block
	lnF      norm
	head     linear // lm_head: the token embeddings, no bias
}

// wire assigns tensors to roles by parameter name.
func wire(cfg Config, get func(name string) *kernels.Tensor) weights {
	lin := func(n string) linear { return linear{W: get(n + ".weight"), B: get(n + ".bias")} }
	ln := func(n string) norm { return norm{get(n + ".weight"), get(n + ".bias")} }
	w := weights{wte: get(wteName), wpe: get(wpeName), lnF: ln(lnF), head: linear{W: get(wteName)}}
	for i := range cfg.NLayer {
		l := func(rest string) string { return blockParam(i, rest) }
		w.blocks = append(w.blocks, block{
			ln1: ln(l("ln_1")), attn: lin(l(cAttn)), attnOut: lin(l(attnOut)),
			ln2: ln(l("ln_2")), mlpIn: lin(l(cFC)), mlpOut: lin(l(mlpOut)),
		})
	}
	return w
}

// Model is GPT2LMHeadModel on a device.
type Model struct {
	Config    Config
	Precision nn.Precision
	be        kernels.Backend
	params    *nn.TensorSet
	w         weights
	quantized bool
}

// Load uploads the weights of cfg from src to be in precision prec (f32,
// f16 or bf16), the Conv1D weights transposed to [out, in]. When src is a
// checkpoint, a tensor of it that no parameter reads is an error (the
// attention buffers and the tied lm_head.weight excepted).
func Load(be kernels.Backend, cfg Config, src nn.Source, prec nn.Precision) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gpt2: %w", err)
	}
	if !prec.Valid() || prec == nn.Mixed {
		return nil, fmt.Errorf("gpt2: precision %v (want f32, f16 or bf16): %w", prec, kernels.ErrDType)
	}
	s := nn.NewTensorSet(be)
	if err := loadParams(s, cfg, src, prec.DType()); err != nil {
		return nil, errors.Join(err, s.Free())
	}
	return &Model{Config: cfg, Precision: prec, be: be, params: s, w: wire(cfg, s.Get)}, nil
}

// loadParams uploads every parameter of cfg from src into s in dtype dt,
// the Conv1D weights [in, out] transposed to [out, in].
func loadParams(s *nn.TensorSet, cfg Config, src nn.Source, dt kernels.DType) error {
	for _, p := range cfg.Params() {
		if !isConv1D(p.Name) {
			if err := nn.LoadParam(s, src, p, dt); err != nil {
				return err
			}
			continue
		}
		v, err := src.Values(p)
		if err != nil {
			return err
		}
		in, out := p.Shape[0], p.Shape[1]
		if _, err := s.Upload(p.Name, dt, transpose(v, in, out), out, in); err != nil {
			return err
		}
	}
	if c, ok := src.(*nn.Checkpoint); ok {
		return c.CheckUnused()
	}
	return nil
}

// Backend is the device the model lives on.
func (m *Model) Backend() kernels.Backend { return m.be }

// Close frees the weights.
func (m *Model) Close() error { return m.params.Free() }
