package bert

import (
	"fmt"
	"math"
	"strings"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/layers"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/safetensors"
)

// Quantized checkpoints: the compressed-tensors layout that vLLM and
// llm-compressor read. A config.json whose quantization_config is
// quant.W8A8 (ParseConfig sets Config.Quant) has every encoder linear X
// stored as X.weight (I8 [out, in]), X.weight_scale (F32 [out, 1]: per
// output channel), X.input_scale (F32 [1]: static, per tensor) and X.bias
// (F32 [out]); the embeddings, layer norms and pooler stay in floating
// point. Load reads such a checkpoint into a quantized model and
// Model.QuantizedTensors writes one.

// quantIgnored are the modules a quantized BERT leaves in floating point:
// its quantization_config's "ignore".
var quantIgnored = []string{"pooler.dense"}

// quantizedLinears names the linear layers (without ".weight") that a
// quantized model holds in int8, in the order of Params.
func (c Config) quantizedLinears() []string {
	var names []string
	for i := range c.NumHiddenLayers {
		for _, site := range siteLinears {
			for _, n := range site {
				names = append(names, layerParam(i, n))
			}
		}
	}
	return names
}

// parseQuantization reads config.json's quantization_config into c.Quant,
// accepting only what Load runs: W8A8 with the pooler, and nothing else,
// left in floating point.
func (c *Config) parseQuantization(name string, raw []byte) error {
	s, err := quant.ParseConfig(name, raw)
	if err != nil {
		return fmt.Errorf("bert: %w", err)
	}
	if s.Scheme != quant.W8A8 || s.Dynamic {
		return fmt.Errorf("bert: %s: quantization_config is %s%s; BERT runs w8a8 with static input scales: %w",
			name, s.Scheme, map[bool]string{true: " with dynamic input scales"}[s.Dynamic], ErrConfig)
	}
	if strings.Join(s.Ignore, ",") != strings.Join(quantIgnored, ",") {
		return fmt.Errorf("bert: %s: quantization_config ignores %q; this model quantizes every encoder linear and leaves exactly %q in floating point: %w",
			name, s.Ignore, quantIgnored, ErrConfig)
	}
	c.Quant = s.Scheme
	return nil
}

// loadQuantized uploads a quantized checkpoint's tensors into s: the
// float parameters in dt, the int8 linears as I8 with F32 scales and
// biases.
func loadQuantized(s *nn.TensorSet, cfg Config, src nn.Source, dt kernels.DType) error {
	ck, ok := src.(*nn.Checkpoint)
	if !ok {
		return fmt.Errorf("bert: the config is quantized (%s): its weights must come from its checkpoint: %w", cfg.Quant, ErrInput)
	}
	shapes := map[string][]int{}
	var float []nn.Param
	for _, p := range cfg.Params(true, false) {
		shapes[p.Name] = p.Shape
		float = append(float, p)
	}
	quantized := map[string]bool{}
	for _, n := range cfg.quantizedLinears() {
		quantized[n+".weight"], quantized[n+".bias"] = true, true
	}
	for _, p := range float {
		if quantized[p.Name] {
			continue
		}
		v, err := ck.Values(p)
		if err != nil {
			return err
		}
		if _, err := s.Upload(p.Name, dt, v, p.Shape...); err != nil {
			return err
		}
	}
	for _, n := range cfg.quantizedLinears() {
		out, in := shapes[n+".weight"][0], shapes[n+".weight"][1]
		w, err := ck.Int8Values(nn.Param{Name: n + ".weight", Shape: []int{out, in}})
		if err != nil {
			return err
		}
		if _, err := s.Upload(n+".weight", kernels.I8, w, out, in); err != nil {
			return err
		}
		for _, t := range []struct {
			name  string
			shape []int
			scale bool
		}{{".weight_scale", []int{out, 1}, true}, {".input_scale", []int{1}, true}, {".bias", []int{out}, false}} {
			v, err := ck.Values(nn.Param{Name: n + t.name, Shape: t.shape})
			if err != nil {
				return err
			}
			for i, x := range v {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || t.scale && x <= 0 {
					return fmt.Errorf("bert: %s%s[%d] = %v, want a finite%s value: %w", n, t.name, i, x,
						map[bool]string{true: " positive", false: ""}[t.scale], nn.ErrWeights)
				}
			}
			if _, err := s.Upload(n+t.name, kernels.F32, v, kernels.Shape(t.shape).Len()); err != nil {
				return err
			}
		}
	}
	return ck.CheckUnused()
}

// wireQuantized gives the encoder's linears of w their int8 form from the
// tensors of a quantized checkpoint, and checks that query, key and value
// read their shared input with one scale.
func wireQuantized(cfg Config, w *weights, get func(string) *kernels.Tensor) error {
	q := func(n string) *layers.Quantized {
		return &layers.Quantized{W: get(n + ".weight"), Scale: get(n + ".weight_scale"), InScale: get(n + ".input_scale"), B: get(n + ".bias")}
	}
	for i := range w.layers {
		l := &w.layers[i]
		lins := [numSites][]*linear{{&l.q, &l.k, &l.v}, {&l.o}, {&l.ffnIn}, {&l.ffnOut}}
		for s, site := range siteLinears {
			for j, n := range site {
				*lins[s][j] = linear{Q: q(layerParam(i, n))}
			}
		}
		var scales [3]float32
		for j, lin := range []linear{l.q, l.k, l.v} {
			v, err := kernels.ToFloat32(lin.Q.InScale)
			if err != nil {
				return fmt.Errorf("bert: %w", err)
			}
			scales[j] = v[0]
		}
		if scales[0] != scales[1] || scales[0] != scales[2] {
			return fmt.Errorf("bert: layer %d: query, key and value have input_scale %v: they read one input, quantized once, and need one scale: %w",
				i, scales, nn.ErrWeights)
		}
	}
	return nil
}

// QuantizedTensors returns the tensors of a quantized model's checkpoint
// in the compressed-tensors layout (see Load), the float parameters in
// their device dtype; quant.NewConfig(quant.Spec{Scheme: quant.W8A8, Method: method, Ignore: QuantIgnored()})
// is its config's quantization_config.
func (m *Model) QuantizedTensors() ([]safetensors.Tensor, error) {
	if !m.Quantized() {
		return nil, fmt.Errorf("bert: the model is not quantized: %w", ErrInput)
	}
	if m.FP8() {
		return nil, fmt.Errorf("bert: the model's FP8 linears have no checkpoint layout here: %w", kernels.ErrUnsupported)
	}
	quantized := map[string]bool{}
	for _, n := range m.Config.quantizedLinears() {
		quantized[n+".weight"], quantized[n+".bias"] = true, true
	}
	var out []safetensors.Tensor
	add := func(name string, t *kernels.Tensor, shape ...int) error {
		if t == nil {
			return fmt.Errorf("bert: %s: no such tensor on the device: %w", name, ErrInput)
		}
		dt, err := safetensors.DTypeName(t.DType())
		if err != nil {
			return fmt.Errorf("bert: %s: %w", name, err)
		}
		buf := make([]byte, t.Bytes())
		if err := m.be.Download(buf, t); err != nil {
			return fmt.Errorf("bert: %s: %w", name, err)
		}
		if shape == nil {
			shape = t.Shape()
		}
		out = append(out, safetensors.Tensor{Name: name, DType: dt, Shape: shape, Data: buf})
		return nil
	}
	for _, p := range m.Config.Params(true, false) {
		if !quantized[p.Name] {
			if err := add(p.Name, m.params.Get(p.Name)); err != nil {
				return nil, err
			}
		}
	}
	for _, n := range m.Config.quantizedLinears() {
		w := m.params.Get(n + ".weight")
		if err := add(n+".weight", w); err != nil {
			return nil, err
		}
		if err := add(n+".weight_scale", m.params.Get(n+".weight_scale"), w.Shape()[0], 1); err != nil {
			return nil, err
		}
		for _, suffix := range []string{".input_scale", ".bias"} {
			if err := add(n+suffix, m.params.Get(n+suffix)); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// QuantIgnored is the "ignore" list of a quantized BERT's
// quantization_config: the modules left in floating point.
func QuantIgnored() []string { return append([]string{}, quantIgnored...) }
