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
)

// Precision is the arithmetic of a model on its device.
type Precision uint8

// Precisions.
const (
	F32 Precision = iota + 1
	F16
	BF16
	// Mixed keeps weights, linear layers, layer norms and the feed-forward
	// network in float32 and runs the attention core (q·kᵀ, softmax, ·v)
	// in float16.
	Mixed
)

// String is the name used in benchmark names and flags.
func (p Precision) String() string {
	switch p {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	case Mixed:
		return "mixed"
	}
	return fmt.Sprintf("precision(%d)", p)
}

// ParsePrecision parses f32, f16, bf16 or mixed.
func ParsePrecision(s string) (Precision, error) {
	for _, p := range []Precision{F32, F16, BF16, Mixed} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("bert: unknown precision %q (want f32, f16, bf16 or mixed)", s)
}

// DType is the dtype of the weights and activations.
func (p Precision) DType() kernels.DType {
	switch p {
	case F16:
		return kernels.F16
	case BF16:
		return kernels.BF16
	}
	return kernels.F32
}

// attnDType is the dtype of the attention core.
func (p Precision) attnDType() kernels.DType {
	if p == Mixed {
		return kernels.F16
	}
	return p.DType()
}

// linear is a dense layer: weight [out, in] as in torch.nn.Linear, bias [out].
type linear struct{ w, b *kernels.Tensor }

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
	lin := func(n string) linear { return linear{get(n + ".weight"), get(n + ".bias")} }
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

// tensorSet is a set of named device tensors freed together.
type tensorSet struct {
	be     kernels.Backend
	byName map[string]*kernels.Tensor
	all    []*kernels.Tensor
}

func newTensorSet(be kernels.Backend) *tensorSet {
	return &tensorSet{be: be, byName: map[string]*kernels.Tensor{}}
}

// alloc allocates a tensor, remembering it (by name if name is not "").
func (s *tensorSet) alloc(name string, dt kernels.DType, shape ...int) (*kernels.Tensor, error) {
	t, err := s.be.Alloc(dt, shape...)
	if err != nil {
		if name != "" {
			return nil, fmt.Errorf("bert: %s: %w", name, err)
		}
		return nil, fmt.Errorf("bert: %w", err)
	}
	s.all = append(s.all, t)
	if name != "" {
		s.byName[name] = t
	}
	return t, nil
}

// upload allocates a tensor holding vals.
func (s *tensorSet) upload(name string, dt kernels.DType, vals []float32, shape ...int) (*kernels.Tensor, error) {
	t, err := kernels.FromFloat32(s.be, dt, vals, shape...)
	if err != nil {
		return nil, fmt.Errorf("bert: %s: %w", name, err)
	}
	s.all = append(s.all, t)
	if name != "" {
		s.byName[name] = t
	}
	return t, nil
}

// ints allocates an I32 tensor holding vals; name is for errors only.
func (s *tensorSet) ints(name string, vals []int32, shape ...int) (*kernels.Tensor, error) {
	t, err := kernels.FromInt32(s.be, vals, shape...)
	if err != nil {
		return nil, fmt.Errorf("bert: %s: %w", name, err)
	}
	s.all = append(s.all, t)
	return t, nil
}

func (s *tensorSet) get(name string) *kernels.Tensor { return s.byName[name] }

// allocator allocates buffers into a set, keeping the first error: after
// one, every call does nothing and returns nil.
type allocator struct {
	s   *tensorSet
	err error
}

// tensor allocates an unnamed tensor.
func (a *allocator) tensor(dt kernels.DType, shape ...int) *kernels.Tensor {
	if a.err != nil {
		return nil
	}
	var t *kernels.Tensor
	t, a.err = a.s.alloc("", dt, shape...)
	return t
}

// ints allocates an I32 tensor named name holding vals, or left unset
// when vals is nil.
func (a *allocator) ints(name string, vals []int32, shape ...int) *kernels.Tensor {
	if a.err != nil {
		return nil
	}
	var t *kernels.Tensor
	if vals == nil {
		t, a.err = a.s.alloc(name, kernels.I32, shape...)
	} else {
		t, a.err = a.s.ints(name, vals, shape...)
	}
	return t
}

// view returns x reshaped.
func (a *allocator) view(x *kernels.Tensor, shape ...int) *kernels.Tensor {
	if a.err != nil {
		return nil
	}
	var v *kernels.Tensor
	v, a.err = x.Reshape(shape...)
	return v
}

// free releases every tensor of the set.
func (s *tensorSet) free() error {
	var errs []error
	for _, t := range s.all {
		errs = append(errs, s.be.Free(t))
	}
	s.all, s.byName = nil, nil
	return errors.Join(errs...)
}

// loadParams uploads every parameter of ps from src in dtype dt.
func loadParams(s *tensorSet, src Source, ps []Param, dt kernels.DType) error {
	for _, p := range ps {
		v, err := src.Values(p)
		if err != nil {
			return err
		}
		if _, err := s.upload(p.Name, dt, v, p.Shape...); err != nil {
			return err
		}
	}
	if c, ok := src.(*Checkpoint); ok {
		return c.CheckUnused()
	}
	return nil
}

// Model is BertModel (embeddings, encoder, pooler) on a device.
type Model struct {
	Config    Config
	Precision Precision
	be        kernels.Backend
	params    *tensorSet
	w         weights
}

// Load uploads the weights of cfg from src to be in precision prec.
func Load(be kernels.Backend, cfg Config, src Source, prec Precision) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bert: %w", err)
	}
	if prec < F32 || prec > Mixed {
		return nil, fmt.Errorf("bert: %v: %w", prec, kernels.ErrDType)
	}
	s := newTensorSet(be)
	if err := loadParams(s, src, cfg.Params(true, false), prec.DType()); err != nil {
		return nil, errors.Join(err, s.free())
	}
	return &Model{Config: cfg, Precision: prec, be: be, params: s, w: wire(cfg, s.get)}, nil
}

// Backend is the device the model lives on.
func (m *Model) Backend() kernels.Backend { return m.be }

// Close frees the weights.
func (m *Model) Close() error { return m.params.free() }
