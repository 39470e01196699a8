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
	"slices"
	"strconv"
	"strings"

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
	q, k, v, o linear
	// qkv is the query, key and value projections as one product (their
	// weights stacked [3H, H], their biases [3H]) in a float model loaded
	// for inference, which then has no q, k and v of their own.
	qkv           linear
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

// Load uploads the weights of cfg from src to be in precision prec, each
// layer's query, key and value weights stacked into one product
// (stackedParams) and the float linears packed for the backend's products
// where it packs them (layers.Pack).
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
	ps, stacked := stackedParams(cfg, src)
	for _, p := range ps {
		from := src // a checkpoint's tensors stored in the dtype are copied as they are
		if _, ok := stacked.parts[p.Name]; ok {
			from = stacked
		}
		if err := nn.LoadParam(s, from, p, prec.DType()); err != nil {
			return nil, errors.Join(err, s.Free())
		}
	}
	if c, ok := src.(*nn.Checkpoint); ok { // a tensor no parameter read is an error
		if err := c.CheckUnused(); err != nil {
			return nil, errors.Join(err, s.Free())
		}
	}
	w := wire(cfg, s.Get)
	lins := []*linear{&w.pooler}
	for i := range w.layers {
		l := &w.layers[i]
		l.qkv = linear{W: s.Get(qkvParam(i, "weight")), B: s.Get(qkvParam(i, "bias"))}
		lins = append(lins, &l.qkv, &l.o, &l.ffnIn, &l.ffnOut)
	}
	if err := layers.Pack(be, lins...); err != nil {
		return nil, errors.Join(fmt.Errorf("bert: %w", err), s.Free())
	}
	return &Model{Config: cfg, Precision: prec, be: be, params: s, w: w}, nil
}

// qkvNames are the names of a layer's query, key and value linears under
// encoder.layer.N.attention.self, in their stacked order.
var qkvNames = [3]string{"query", "key", "value"}

// qkvParam is the name of layer i's stacked query, key and value weight
// (suffix "weight") or bias ("bias") in a model's tensors: not a checkpoint
// name.
func qkvParam(i int, suffix string) string { return layerParam(i, "attention.self.qkv."+suffix) }

// stackedParams are the parameters of cfg as Load keeps them: every
// layer's query, key and value weights and biases stacked (qkvParam), the
// pooler's, no masked-LM head's; the stackedSource supplies the stacked
// ones from src.
func stackedParams(cfg Config, src nn.Source) ([]nn.Param, stackedSource) {
	parts := map[string][3]nn.Param{}
	var ps []nn.Param
	for _, p := range cfg.Params(true, false) {
		i, name, suffix, ok := selfParam(p.Name)
		if !ok {
			ps = append(ps, p)
			continue
		}
		stacked := qkvParam(i, suffix)
		three, seen := parts[stacked]
		three[slices.Index(qkvNames[:], name)] = p
		parts[stacked] = three
		if !seen {
			ps = append(ps, nn.Param{Name: stacked, Shape: append([]int{3 * p.Shape[0]}, p.Shape[1:]...)})
		}
	}
	return ps, stackedSource{src, parts}
}

// selfParam splits a name encoder.layer.I.attention.self.NAME.SUFFIX.
func selfParam(full string) (i int, name, suffix string, ok bool) {
	rest, found := strings.CutPrefix(full, "encoder.layer.")
	if !found {
		return 0, "", "", false
	}
	n, rest, _ := strings.Cut(rest, ".")
	rest, found = strings.CutPrefix(rest, "attention.self.")
	if !found {
		return 0, "", "", false
	}
	name, suffix, _ = strings.Cut(rest, ".")
	i, err := strconv.Atoi(n)
	return i, name, suffix, err == nil
}

// stackedSource is src with the stacked parameters of stackedParams: each
// the values of its three parts, in order.
type stackedSource struct {
	src   nn.Source
	parts map[string][3]nn.Param
}

func (s stackedSource) Values(p nn.Param) ([]float32, error) {
	three, ok := s.parts[p.Name]
	if !ok {
		return s.src.Values(p)
	}
	vals := make([]float32, 0, p.Len())
	for _, part := range three {
		v, err := s.src.Values(part)
		if err != nil {
			return nil, err
		}
		vals = append(vals, v...)
	}
	return vals, nil
}

// splitQKV splits every stacked projection of m (Load's) into the query,
// key and value linears, whose quantized forms are per linear.
func (m *Model) splitQKV() error {
	for i := range m.w.layers {
		l := &m.w.layers[i]
		if l.qkv.W == nil {
			continue
		}
		lins := []*linear{&l.q, &l.k, &l.v}
		for _, part := range []struct {
			t    *kernels.Tensor
			name string
			set  func(lin *linear, t *kernels.Tensor)
		}{{l.qkv.W, "weight", func(lin *linear, t *kernels.Tensor) { lin.W = t }}, {l.qkv.B, "bias", func(lin *linear, t *kernels.Tensor) { lin.B = t }}} {
			vals, err := kernels.ToFloat32(part.t)
			if err != nil {
				return fmt.Errorf("bert: %w", err)
			}
			shape := append([]int{part.t.Shape()[0] / 3}, part.t.Shape()[1:]...)
			n := len(vals) / 3
			for j, lin := range lins {
				t, err := m.params.Upload(layerParam(i, "attention.self."+qkvNames[j]+"."+part.name),
					part.t.DType(), vals[j*n:(j+1)*n], shape...)
				if err != nil {
					return fmt.Errorf("bert: %w", err)
				}
				part.set(lin, t)
			}
			if err := m.params.Release(part.t); err != nil {
				return fmt.Errorf("bert: %w", err)
			}
		}
		l.qkv = linear{}
	}
	return nil
}

// Backend is the device the model lives on.
func (m *Model) Backend() kernels.Backend { return m.be }

// Close frees the weights.
func (m *Model) Close() error { return m.params.Free() }
