// Package bert is BERT with the semantics of Hugging Face's BertModel and
// BertForMaskedLM, over any kernels.Backend: loading of real checkpoints
// (safetensors with Hugging Face names, config.json), seeded synthetic
// weights of any config, batched inference with padding, and a masked-LM
// training step with an explicit per-layer backward and AdamW over
// preallocated buffers.
package bert

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/layers"
	"github.com/zbench/zbench/models/nn"
)

// linear is a dense layer: weight [out, in] as in torch.nn.Linear, bias
// [out], or its int8 or FP8 form once the model is quantized.
type linear = layers.Linear

// norm is a LayerNorm's weight and bias.
type norm struct{ g, b *kernels.Tensor }

// layer is one encoder layer's parameters.
type layer struct {
	q, k, v, o    linear
	ln1           norm
	ffnIn, ffnOut linear
	ln2           norm
}

// weights are the model's parameters by role. The same struct holds
// gradients and optimiser moments in training.
type weights struct {
	word, pos, typ *kernels.Tensor
	embLN          norm
	layers         []layer
	pooler         linear // absent in training
	mlmDense       linear // the masked-LM head, training only
	mlmLN          norm
	mlmBias        *kernels.Tensor
}

// wire assigns tensors to roles by parameter name.
func wire(cfg Config, get func(name string) *kernels.Tensor) weights {
	lin := func(n string) linear { return linear{W: get(n + ".weight"), B: get(n + ".bias")} }
	ln := func(n string) norm { return norm{get(n + ".weight"), get(n + ".bias")} }
	w := weights{
		word:     get("embeddings.word_embeddings.weight"),
		pos:      get("embeddings.position_embeddings.weight"),
		typ:      get("embeddings.token_type_embeddings.weight"),
		embLN:    ln("embeddings.LayerNorm"),
		pooler:   lin("pooler.dense"),
		mlmDense: lin(mlmDense),
		mlmLN:    ln(mlmLayerNorm),
		mlmBias:  get(mlmBias),
	}
	for i := range cfg.NumHiddenLayers {
		l := func(rest string) string { return layerParam(i, rest) }
		w.layers = append(w.layers, layer{
			q: lin(l("attention.self.query")), k: lin(l("attention.self.key")), v: lin(l("attention.self.value")),
			o: lin(l("attention.output.dense")), ln1: ln(l("attention.output.LayerNorm")),
			ffnIn: lin(l("intermediate.dense")), ffnOut: lin(l("output.dense")), ln2: ln(l("output.LayerNorm")),
		})
	}
	return w
}

// Model is BertModel (embeddings, encoder, pooler) on a device.
type Model struct {
	Config    Config
	Precision nn.Precision
	be        kernels.Backend
	params    *nn.TensorSet
	w         weights
}

// Load uploads the weights of cfg from src to be in precision prec, the
// float linears' packed for the backend's products where it packs them
// (layers.Pack).
func Load(be kernels.Backend, cfg Config, src nn.Source, prec nn.Precision) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bert: %w", err)
	}
	if !prec.Valid() {
		return nil, fmt.Errorf("bert: %v: %w", prec, kernels.ErrDType)
	}
	s := nn.NewTensorSet(be)
	if cfg.Quant != "" {
		if _, err := kernels.Group[kernels.Quant](be); err != nil {
			return nil, fmt.Errorf("bert: the checkpoint is quantized (%s): %w", cfg.Quant, err)
		}
		if err := loadQuantized(s, cfg, src, prec.DType()); err != nil {
			return nil, errors.Join(err, s.Free())
		}
		w := wire(cfg, s.Get)
		if err := wireQuantized(cfg, &w, s.Get); err != nil {
			return nil, errors.Join(err, s.Free())
		}
		return &Model{Config: cfg, Precision: prec, be: be, params: s, w: w}, nil
	}
	if err := nn.LoadParams(s, src, cfg.Params(true, false), prec.DType()); err != nil {
		return nil, errors.Join(err, s.Free())
	}
	w := wire(cfg, s.Get)
	lins := []*linear{&w.pooler}
	for i := range w.layers {
		l := w.layers[i].linears()
		lins = append(lins, l[:]...)
	}
	if err := layers.Pack(be, lins...); err != nil {
		return nil, errors.Join(fmt.Errorf("bert: %w", err), s.Free())
	}
	return &Model{Config: cfg, Precision: prec, be: be, params: s, w: w}, nil
}

// Backend is the device the model lives on.
func (m *Model) Backend() kernels.Backend { return m.be }

// Close frees the weights.
func (m *Model) Close() error { return m.params.Free() }
